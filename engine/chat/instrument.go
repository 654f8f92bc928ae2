package chat

import (
	"fmt"
	"reflect"
	"unsafe"

	"github.com/ardanlabs/jinja"
)

// The engine (github.com/ardanlabs/jinja v1.8.0) offers no hook into a
// render: no context, no callback per operation, and its operators and
// filters are package-private. What it does offer is calls: a call
// expression evaluates its arguments in order and hands them to a Go
// function. instrument therefore rewrites the compiled template's syntax
// tree once, in New, so that every operation able to make a large value
// runs through a guard function (sandbox.go) before or after the engine's
// own code does the work:
//
//	x * n           -> x' * n'          x' records x, n' refuses len(x)*n over the budget
//	a + b, a ~ b    -> " made"(a + b)   the result is measured and charged
//	[..], {..}, s[i:j], f(..)  -> " made"(...)
//	v | f(args)     -> " filter"("f", __filter_f, f, v, args...)   checked, then called
//	o.m(args)       -> " method"("m", (" push"(o)).m, args...)     checked with o, then called
//	{{ v }}, text   -> {{ " out"(v) }}  every byte printed is charged
//	for x in v      -> for x in " iter"(v)   the element count is bounded
//
// The guards are looked up by names with a space, which no template can
// spell or assign, and are bound per render to that render's context and
// budget. Every guard checks the context, so a render past its time limit
// or cancelled stops at its next operation instead of running on.
//
// The tree's types are unexported, so the rewrite reads and writes them
// through reflect and unsafe. That ties this file to the engine version
// go.mod pins; instrument checks every type and field it relies on and
// fails (New then refuses every template) rather than render unguarded if
// an upgrade changes them, and sandbox_test.go renders the reference
// templates through it.

// Names of the guards in the render's variables.
const (
	guardMade   = " made"
	guardOut    = " out"
	guardIter   = " iter"
	guardPush   = " push"
	guardMul    = " mul"
	guardFilter = " filter"
	guardMethod = " method"
)

// tree knows the engine's syntax-tree types, learnt from a probe template.
type tree struct {
	exprT, nodeT                          reflect.Type // the two interfaces
	call, name, lit, attr, output, filter reflect.Type // pointer types
}

// probeSource holds one of each node the rewrite creates or rewrites.
const probeSource = `t{{ a.b(1) }}{{ c | d }}`

func newTree() (*tree, error) {
	probe, err := jinja.Compile(probeSource)
	if err != nil {
		return nil, err
	}
	nodes, err := fieldOf(reflect.ValueOf(probe).Elem(), "nodes")
	if err != nil {
		return nil, err
	}
	if nodes.Kind() != reflect.Slice || nodes.Len() != 3 {
		return nil, fmt.Errorf("probe template has %v nodes", nodes)
	}
	tr := &tree{nodeT: nodes.Type().Elem()}
	out := nodes.Index(1).Elem()
	tr.output = out.Type()
	call, err := fieldOf(out.Elem(), "expression")
	if err != nil {
		return nil, err
	}
	tr.exprT = call.Type()
	tr.call = call.Elem().Type()
	fn, err := fieldOf(call.Elem().Elem(), "fn")
	if err != nil {
		return nil, err
	}
	tr.attr = fn.Elem().Type()
	obj, err := fieldOf(fn.Elem().Elem(), "obj")
	if err != nil {
		return nil, err
	}
	tr.name = obj.Elem().Type()
	args, err := fieldOf(call.Elem().Elem(), "args")
	if err != nil {
		return nil, err
	}
	if args.Len() != 1 {
		return nil, fmt.Errorf("probe call has %d arguments", args.Len())
	}
	tr.lit = args.Index(0).Elem().Type()
	filt, err := fieldOf(nodes.Index(2).Elem().Elem(), "expression")
	if err != nil {
		return nil, err
	}
	tr.filter = filt.Elem().Type()
	for _, c := range []struct {
		t      reflect.Type
		name   string
		fields []string
	}{
		{tr.call, "callExpr", []string{"fn", "args", "kwargs"}},
		{tr.name, "nameExpr", []string{"name"}},
		{tr.lit, "litExpr", []string{"val"}},
		{tr.attr, "attrExpr", []string{"obj", "attr"}},
		{tr.output, "outputNode", []string{"expression"}},
		{tr.filter, "filterExpr", []string{"expr", "name", "args", "kwargs"}},
	} {
		if c.t.Kind() != reflect.Pointer || c.t.Elem().Name() != c.name {
			return nil, fmt.Errorf("expected *%s, found %v", c.name, c.t)
		}
		for _, f := range c.fields {
			if _, ok := c.t.Elem().FieldByName(f); !ok {
				return nil, fmt.Errorf("%s has no field %s", c.name, f)
			}
		}
	}
	if f, _ := tr.lit.Elem().FieldByName("val"); f.Type != reflect.TypeOf(jinja.Value{}) {
		return nil, fmt.Errorf("litExpr.val is %v", f.Type)
	}
	return tr, nil
}

// fieldOf returns a settable view of struct v's field, exported or not.
func fieldOf(v reflect.Value, name string) (reflect.Value, error) {
	if v.Kind() != reflect.Struct {
		return reflect.Value{}, fmt.Errorf("%v is not a struct", v.Type())
	}
	f := v.FieldByName(name)
	if !f.IsValid() {
		return reflect.Value{}, fmt.Errorf("%v has no field %s", v.Type(), name)
	}
	if !f.CanAddr() {
		return reflect.Value{}, fmt.Errorf("%v.%s is not addressable", v.Type(), name)
	}
	return reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem(), nil
}

// must is fieldOf for fields newTree has checked exist.
func must(v reflect.Value, name string) reflect.Value {
	f, err := fieldOf(v, name)
	if err != nil {
		panic(err) // recovered by instrument
	}
	return f
}

// instrument rewrites t's syntax tree in place (see the comment above).
func instrument(t *jinja.Template) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("template engine internals: %v", r)
		}
	}()
	tr, err := newTree()
	if err != nil {
		return fmt.Errorf("template engine internals: %w", err)
	}
	nodes, err := fieldOf(reflect.ValueOf(t).Elem(), "nodes")
	if err != nil {
		return fmt.Errorf("template engine internals: %w", err)
	}
	tr.nodes(nodes)
	return nil
}

// nodes instruments a []node in place; text becomes guarded output.
func (tr *tree) nodes(list reflect.Value) {
	for i := range list.Len() {
		slot := list.Index(i)
		n := slot.Elem()
		if n.Type().Elem().Name() == "textNode" {
			text := must(n.Elem(), "text").String()
			slot.Set(tr.newOutput(tr.guard(guardOut, tr.newLit(jinja.NewString(text)))))
			continue
		}
		tr.node(n)
	}
}

// node instruments one statement. An unknown kind panics: rendering it
// unguarded is not an option.
func (tr *tree) node(n reflect.Value) {
	s := n.Elem()
	switch name := s.Type().Name(); name {
	case "outputNode":
		e := must(s, "expression")
		e.Set(tr.guard(guardOut, tr.expr(e)))
	case "ifNode":
		branches := must(s, "branches")
		for i := range branches.Len() {
			b := branches.Index(i)
			if c := must(b, "condition"); !c.IsNil() {
				c.Set(tr.expr(c))
			}
			tr.nodes(must(b, "body"))
		}
	case "forNode":
		it := must(s, "iter")
		it.Set(tr.guard(guardIter, tr.expr(it)))
		if f := must(s, "filterExpr"); !f.IsNil() {
			f.Set(tr.expr(f))
		}
		tr.nodes(must(s, "body"))
		tr.nodes(must(s, "elseBody"))
	case "setNode":
		v := must(s, "value")
		v.Set(tr.expr(v))
	case "setBlockNode":
		tr.nodes(must(s, "body"))
	case "macroNode":
		params := must(s, "params")
		for i := range params.Len() {
			if d := must(params.Index(i), "defaultVal"); !d.IsNil() {
				d.Set(tr.expr(d))
			}
		}
		tr.nodes(must(s, "body"))
	case "callNode":
		// The engine looks for a call expression here to pass caller in:
		// its parts are guarded, the call itself stays.
		e := must(s, "expr")
		if e.Elem().Type() == tr.call {
			tr.callParts(e.Elem().Elem())
		} else {
			e.Set(tr.expr(e))
		}
		tr.nodes(must(s, "body"))
	case "filterBlockNode":
		// The engine needs a bare filter name here; the filters it can
		// apply to the body grow it by a bounded factor at most, and the
		// body's own output is guarded.
		tr.nodes(must(s, "body"))
	case "breakNode", "continueNode":
	default:
		panic(fmt.Sprintf("unknown statement %s", name))
	}
}

// expr instruments an expression's parts and returns what replaces it.
func (tr *tree) expr(slot reflect.Value) reflect.Value {
	e := slot.Elem()
	if !e.IsValid() {
		return slot
	}
	s := e.Elem()
	sub := func(fields ...string) {
		for _, f := range fields {
			if v := must(s, f); !v.IsNil() {
				v.Set(tr.expr(v))
			}
		}
	}
	list := func(field string) {
		l := must(s, field)
		for i := range l.Len() {
			l.Index(i).Set(tr.expr(l.Index(i)))
		}
	}
	switch name := s.Type().Name(); name {
	case "litExpr", "nameExpr":
		return e
	case "attrExpr":
		sub("obj")
		return e
	case "itemExpr":
		sub("obj", "key")
		return e
	case "unaryExpr":
		sub("operand")
		return e
	case "condExpr":
		sub("trueExpr", "condition", "falseExpr")
		return e
	case "testExpr":
		sub("expr")
		list("args")
		return e
	case "sliceExpr":
		sub("obj", "start", "stop", "step")
		return tr.guard(guardMade, e)
	case "binExpr":
		sub("left", "right")
		switch must(s, "op").String() {
		case "*":
			l, r := must(s, "left"), must(s, "right")
			l.Set(tr.guard(guardPush, l))
			r.Set(tr.guard(guardMul, r))
			return tr.guard(guardMade, e)
		case "+", "~":
			return tr.guard(guardMade, e)
		}
		return e
	case "listExpr":
		list("items")
		return tr.guard(guardMade, e)
	case "dictExpr":
		pairs := must(s, "pairs")
		for i := range pairs.Len() {
			for _, f := range []string{"key", "value"} {
				v := must(pairs.Index(i), f)
				v.Set(tr.expr(v))
			}
		}
		return tr.guard(guardMade, e)
	case "callExpr":
		tr.callParts(s)
		fn := must(s, "fn")
		if fn.Elem().Type() != tr.attr {
			return tr.guard(guardMade, e)
		}
		// o.m(args) -> " method"("m", (" push"(o)).m, args...)
		attr := fn.Elem().Elem()
		obj := must(attr, "obj")
		obj.Set(tr.guard(guardPush, obj))
		args := must(s, "args")
		head := []reflect.Value{tr.newLit(jinja.NewString(must(attr, "attr").String())), fn.Elem()}
		args.Set(tr.prepend(args, head...))
		fn.Set(tr.newName(guardMethod))
		return e
	case "filterExpr":
		sub("expr")
		list("args")
		tr.kwargs(must(s, "kwargs"))
		// v | f(args) -> " filter"("f", __filter_f, f, v, args...)
		fname := must(s, "name").String()
		call := reflect.New(tr.call.Elem())
		must(call.Elem(), "fn").Set(tr.newName(guardFilter))
		args := must(s, "args")
		must(call.Elem(), "args").Set(tr.prepend(args,
			tr.newLit(jinja.NewString(fname)), tr.newName("__filter_"+fname), tr.newName(fname), must(s, "expr").Elem()))
		kw := must(call.Elem(), "kwargs")
		kw.Set(must(s, "kwargs"))
		return tr.asExpr(call)
	default:
		panic(fmt.Sprintf("unknown expression %s", name))
	}
}

// callParts instruments a call's function, arguments and keyword values.
func (tr *tree) callParts(s reflect.Value) {
	fn := must(s, "fn")
	fn.Set(tr.expr(fn))
	args := must(s, "args")
	for i := range args.Len() {
		args.Index(i).Set(tr.expr(args.Index(i)))
	}
	tr.kwargs(must(s, "kwargs"))
}

func (tr *tree) kwargs(kws reflect.Value) {
	for i := range kws.Len() {
		v := must(kws.Index(i), "value")
		v.Set(tr.expr(v))
	}
}

// guard wraps e (an expr value) in a call of the guard named name.
func (tr *tree) guard(name string, e reflect.Value) reflect.Value {
	if e.Kind() != reflect.Interface {
		e = tr.asExpr(e)
	}
	call := reflect.New(tr.call.Elem())
	must(call.Elem(), "fn").Set(tr.newName(name))
	args := reflect.MakeSlice(reflect.SliceOf(tr.exprT), 1, 1)
	args.Index(0).Set(e)
	must(call.Elem(), "args").Set(args)
	return tr.asExpr(call)
}

// prepend returns the []expr head followed by list.
func (tr *tree) prepend(list reflect.Value, head ...reflect.Value) reflect.Value {
	out := reflect.MakeSlice(reflect.SliceOf(tr.exprT), 0, len(head)+list.Len())
	for _, h := range head {
		out = reflect.Append(out, tr.asExpr(h))
	}
	for i := range list.Len() {
		out = reflect.Append(out, list.Index(i))
	}
	return out
}

func (tr *tree) newName(name string) reflect.Value {
	n := reflect.New(tr.name.Elem())
	must(n.Elem(), "name").SetString(name)
	return tr.asExpr(n)
}

func (tr *tree) newLit(v jinja.Value) reflect.Value {
	n := reflect.New(tr.lit.Elem())
	must(n.Elem(), "val").Set(reflect.ValueOf(v))
	return tr.asExpr(n)
}

func (tr *tree) newOutput(e reflect.Value) reflect.Value {
	n := reflect.New(tr.output.Elem())
	must(n.Elem(), "expression").Set(e)
	v := reflect.New(tr.nodeT).Elem()
	v.Set(n)
	return v
}

// asExpr holds a node pointer (or an expr already) in an expr interface value.
func (tr *tree) asExpr(p reflect.Value) reflect.Value {
	if p.Kind() == reflect.Interface {
		p = p.Elem()
	}
	v := reflect.New(tr.exprT).Elem()
	v.Set(p)
	return v
}
