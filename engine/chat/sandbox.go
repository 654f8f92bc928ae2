package chat

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/ardanlabs/jinja"
)

// errBudget marks a render stopped by its budget.
var errBudget = errors.New("over the render's budget")

// sandbox is one render's guards (see instrument.go): its context, what it
// may still make, and the operands a guarded operation waits on.
type sandbox struct {
	ctx   context.Context
	value int   // bytes one value, or one piece of output, may hold
	items int   // elements one list, dict or loop may hold
	work  int64 // bytes left to make and print, all values together
	print int64 // bytes left to print, into the output or a block's or macro's
	stack []jinja.Value
}

// maxDepth bounds the nesting of lists and dicts a render may make.
const maxDepth = 64

func newSandbox(ctx context.Context, l Limits, messages []Message, tools []Tool) *sandbox {
	var in int64
	for _, m := range messages {
		in += int64(len(m.Content) + len(m.Role) + len(m.ToolCallID) + len(m.Name))
		for _, c := range m.ToolCalls {
			in += int64(len(c.ID) + len(c.Function.Name) + len(c.Function.Arguments))
		}
	}
	for _, t := range tools {
		in += int64(len(t.JSON) + len(t.Function.Name) + len(t.Function.Description) + len(t.Function.Parameters))
	}
	// Output printed anywhere but the result (a macro's, a set block's) is
	// printed again to reach it, so twice the output limit is room enough.
	return &sandbox{ctx: ctx, value: l.Output, items: l.Items, work: l.Work + 8*in, print: 2 * int64(l.Output)}
}

// vars adds the guards to a render's variables.
func (s *sandbox) vars(v map[string]jinja.Value) {
	one := func(name string, f func(jinja.Value) (jinja.Value, error)) {
		v[name] = jinja.NewCallable(name, func(args []jinja.Value, _ map[string]jinja.Value) (jinja.Value, error) {
			if err := s.ctx.Err(); err != nil {
				return jinja.Undefined(), err
			}
			if len(args) != 1 {
				return jinja.Undefined(), fmt.Errorf("guard %q called with %d arguments", name, len(args))
			}
			return f(args[0])
		})
	}
	one(guardMade, func(x jinja.Value) (jinja.Value, error) { return x, s.made(x) })
	one(guardOut, func(x jinja.Value) (jinja.Value, error) {
		n, err := s.size(x)
		if err != nil {
			return x, err
		}
		if s.print -= n; s.print < 0 {
			return x, fmt.Errorf("the render printed over %d bytes: %w", 2*s.value, errBudget)
		}
		return x, s.spend(n)
	})
	one(guardIter, func(x jinja.Value) (jinja.Value, error) {
		n := 0
		switch {
		case x.IsList():
			n = x.AsList().Len()
		case x.IsDict():
			n = x.AsDict().Len()
		case x.IsString():
			n = utf8.RuneCountInString(x.AsString())
		}
		if n > s.items {
			return x, fmt.Errorf("a loop over %d elements: %w (%d)", n, errBudget, s.items)
		}
		return x, nil
	})
	one(guardPush, func(x jinja.Value) (jinja.Value, error) {
		s.stack = append(s.stack, x)
		return x, nil
	})
	one(guardMul, func(n jinja.Value) (jinja.Value, error) {
		x := s.pop()
		if x.IsString() && n.IsInt() && n.AsInt() > 0 {
			if err := s.fits(int64(len(x.AsString())), n.AsInt()); err != nil {
				return n, fmt.Errorf("repeating a string of %d bytes %d times: %w", len(x.AsString()), n.AsInt(), err)
			}
		}
		return n, nil
	})
	v[guardFilter] = jinja.NewCallable(guardFilter, s.filter)
	v[guardMethod] = jinja.NewCallable(guardMethod, s.method)
}

func (s *sandbox) pop() jinja.Value {
	if len(s.stack) == 0 {
		return jinja.Undefined()
	}
	x := s.stack[len(s.stack)-1]
	s.stack = s.stack[:len(s.stack)-1]
	return x
}

// fits refuses a value of n pieces of size bytes over the value limit.
func (s *sandbox) fits(size, n int64) error {
	if size > 0 && n > int64(s.value)/size {
		return fmt.Errorf("%w (%d bytes a value)", errBudget, s.value)
	}
	return nil
}

// spend charges n bytes to the render's work budget.
func (s *sandbox) spend(n int64) error {
	s.work -= n
	if s.work < 0 {
		return fmt.Errorf("the render made too much: %w", errBudget)
	}
	return nil
}

// made checks a value an operation has just made and charges it: strings
// by their bytes, lists and dicts by their slots (their elements were
// charged when they were made).
func (s *sandbox) made(x jinja.Value) error {
	if _, err := s.size(x); err != nil {
		return err
	}
	switch {
	case x.IsString():
		return s.spend(int64(len(x.AsString())))
	case x.IsList():
		return s.spend(16 * int64(x.AsList().Len()))
	case x.IsDict():
		return s.spend(48 * int64(x.AsDict().Len()))
	}
	return nil
}

// size is about the bytes x prints as, refusing values over the value
// limit, collections over the item limit and nesting past maxDepth. The
// walk stops at the limit, so a list that holds itself many times over
// costs no more than the limit to measure.
func (s *sandbox) size(x jinja.Value) (int64, error) {
	switch {
	case x.IsString():
		n := int64(len(x.AsString()))
		if n > int64(s.value) {
			return n, fmt.Errorf("a value of %d bytes: %w (%d)", n, errBudget, s.value)
		}
		return n, nil
	case !x.IsList() && !x.IsDict():
		return 8, nil
	}
	type item struct {
		v     jinja.Value
		depth int
	}
	var n int64
	todo := []item{{x, 0}}
	for len(todo) > 0 {
		it := todo[len(todo)-1]
		todo = todo[:len(todo)-1]
		if it.depth > maxDepth {
			return n, fmt.Errorf("values nested deeper than %d: %w", maxDepth, errBudget)
		}
		v := it.v
		switch {
		case v.IsString():
			n += int64(len(v.AsString()))
		case v.IsList():
			l := v.AsList()
			if l.Len() > s.items {
				return n, fmt.Errorf("a list of %d elements: %w (%d)", l.Len(), errBudget, s.items)
			}
			n += 2 + 2*int64(l.Len())
			for _, e := range l.Items {
				todo = append(todo, item{e, it.depth + 1})
			}
		case v.IsDict():
			d := v.AsDict()
			if d.Len() > s.items {
				return n, fmt.Errorf("a dict of %d entries: %w (%d)", d.Len(), errBudget, s.items)
			}
			n += 2 + 4*int64(d.Len())
			for _, k := range d.Keys {
				n += int64(len(k))
				todo = append(todo, item{d.Data[k], it.depth + 1})
			}
		default:
			n += 8
		}
		if n > int64(s.value) {
			return n, fmt.Errorf("a value of over %d bytes: %w", s.value, errBudget)
		}
		if len(todo) > s.value {
			return n, fmt.Errorf("a value of over %d elements: %w", s.value, errBudget)
		}
	}
	return n, nil
}

// shape is the element count and nesting depth of x, for tojson's indent.
func shape(x jinja.Value, limit int) (nodes, depth int) {
	var walk func(jinja.Value, int)
	walk = func(v jinja.Value, d int) {
		if nodes > limit || d > maxDepth {
			return
		}
		nodes++
		depth = max(depth, d)
		switch {
		case v.IsList():
			for _, e := range v.AsList().Items {
				walk(e, d+1)
			}
		case v.IsDict():
			for _, k := range v.AsDict().Keys {
				walk(v.AsDict().Data[k], d+1)
			}
		}
	}
	walk(x, 0)
	return nodes, depth
}

// filter runs v | name(args) after checking what it would make:
// args are the filter's name, the builtin filter, a template-defined one
// (the engine's fallback), the input and the filter's own arguments.
func (s *sandbox) filter(args []jinja.Value, kwargs map[string]jinja.Value) (jinja.Value, error) {
	if err := s.ctx.Err(); err != nil {
		return jinja.Undefined(), err
	}
	if len(args) < 4 || !args[0].IsString() {
		return jinja.Undefined(), fmt.Errorf("guarded filter called with %d arguments", len(args))
	}
	name, fn := args[0].AsString(), args[1]
	if !fn.IsCallable() {
		fn = args[2]
	}
	if !fn.IsCallable() {
		return jinja.Undefined(), fmt.Errorf("unknown filter %q", name)
	}
	in, rest := args[3], args[4:]
	if err := s.before(name, in, rest, kwargs); err != nil {
		return jinja.Undefined(), fmt.Errorf("filter %s: %w", name, err)
	}
	out, err := fn.AsCallable().Fn(args[3:], kwargs)
	if err != nil {
		return out, err
	}
	return out, s.made(out)
}

// method runs obj.name(args) after checking what it would make: args are
// the method's name, the bound method and its arguments; obj was pushed
// while the bound method was looked up.
func (s *sandbox) method(args []jinja.Value, kwargs map[string]jinja.Value) (jinja.Value, error) {
	obj := s.pop()
	if err := s.ctx.Err(); err != nil {
		return jinja.Undefined(), err
	}
	if len(args) < 2 || !args[0].IsString() {
		return jinja.Undefined(), fmt.Errorf("guarded method called with %d arguments", len(args))
	}
	name, fn := args[0].AsString(), args[1]
	if !fn.IsCallable() {
		return jinja.Undefined(), fmt.Errorf("%s is not callable", name)
	}
	if err := s.before(name, obj, args[2:], kwargs); err != nil {
		return jinja.Undefined(), fmt.Errorf("%s(): %w", name, err)
	}
	out, err := fn.AsCallable().Fn(args[2:], kwargs)
	if err != nil {
		return out, err
	}
	return out, s.made(out)
}

// before refuses the filters and methods whose result can outgrow their
// operands by more than a small factor, when it would be over the limits.
// Filters and methods not listed make at most a few times the bytes they
// are given, and made() measures what they return.
func (s *sandbox) before(name string, in jinja.Value, args []jinja.Value, kwargs map[string]jinja.Value) error {
	str := func(i int) string {
		if i < len(args) && args[i].IsString() {
			return args[i].AsString()
		}
		return ""
	}
	switch name {
	case "replace":
		if !in.IsString() || len(args) < 2 {
			return nil
		}
		text, old, repl := in.AsString(), str(0), str(1)
		n := int64(strings.Count(text, old))
		return s.fits(1, int64(len(text))+n*int64(len(repl)))
	case "join":
		list, sep := in, str(0)
		if in.IsString() && len(args) > 0 { // the method: sep.join(list)
			list, sep = args[0], in.AsString()
		}
		size, err := s.size(list)
		if err != nil || !list.IsList() {
			return err
		}
		return s.fits(1, size+int64(list.AsList().Len())*int64(len(sep)))
	case "indent":
		if !in.IsString() {
			return nil
		}
		width := int64(4)
		if w, ok := kwargs["width"]; ok && w.IsInt() {
			width = w.AsInt()
		} else if len(args) > 0 && args[0].IsInt() {
			width = args[0].AsInt()
		} else if len(args) > 0 && args[0].IsString() {
			width = int64(len(args[0].AsString()))
		}
		lines := int64(strings.Count(in.AsString(), "\n") + 1)
		if width < 0 {
			return nil
		}
		if err := s.fits(lines, width); err != nil {
			return err
		}
		return s.fits(1, int64(len(in.AsString()))+lines*width)
	case "tojson":
		size, err := s.size(in)
		if err != nil {
			return err
		}
		indent := int64(0)
		if v, ok := kwargs["indent"]; ok && v.IsInt() {
			indent = v.AsInt()
		} else if len(args) > 0 && args[0].IsInt() {
			indent = args[0].AsInt()
		}
		if err := s.fits(1, 6*size); err != nil {
			return err
		}
		if indent > 0 {
			nodes, depth := shape(in, s.value)
			if err := s.fits(int64(nodes)*int64(depth+1), indent); err != nil {
				return err
			}
		}
		return nil
	case "list":
		if in.IsString() && utf8.RuneCountInString(in.AsString()) > s.items {
			return fmt.Errorf("a list of the characters of %d bytes: %w", len(in.AsString()), errBudget)
		}
	case "split":
		if !in.IsString() {
			return nil
		}
		sep := str(0)
		n := strings.Count(in.AsString(), " ") + 1
		if sep != "" {
			n = strings.Count(in.AsString(), sep) + 1
		}
		if n > s.items {
			return fmt.Errorf("splitting into %d parts: %w (%d)", n, errBudget, s.items)
		}
	case "format":
		if !in.IsString() {
			return nil
		}
		var widest int64
		for _, a := range args {
			n, err := s.size(a)
			if err != nil {
				return err
			}
			widest = max(widest, n)
		}
		return s.fits(1, int64(len(in.AsString()))+int64(strings.Count(in.AsString(), "{"))*widest)
	case "from_json", "fromjson":
		// Each JSON value becomes a template value of tens of bytes.
		if in.IsString() && len(in.AsString()) > s.value/16 {
			return fmt.Errorf("%d bytes of JSON: %w", len(in.AsString()), errBudget)
		}
	case "append", "insert":
		if in.IsList() && in.AsList().Len() >= s.items {
			return fmt.Errorf("a list of %d elements: %w (%d)", in.AsList().Len(), errBudget, s.items)
		}
	case "update":
		if in.IsDict() && len(args) > 0 && args[0].IsDict() && in.AsDict().Len()+args[0].AsDict().Len() > s.items {
			return fmt.Errorf("a dict of %d entries: %w (%d)", in.AsDict().Len()+args[0].AsDict().Len(), errBudget, s.items)
		}
	}
	return nil
}
