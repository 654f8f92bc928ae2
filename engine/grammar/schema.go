package grammar

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"net/url"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// MaxSchemaBytes bounds a JSON schema's text.
const MaxSchemaBytes = 1 << 20

// schemaURL names the schema being compiled; nothing is loaded from it.
const schemaURL = "urn:tandem:schema"

// FromSchema compiles a JSON schema (draft 2020-12 unless it says
// otherwise) to the grammar of the JSON values that validate against it.
// Objects are written with their declared properties in the schema's
// order (optional ones may be left out; undeclared ones never appear,
// which every schema allows). An assertion the grammar cannot express is
// an error wrapping ErrUnsupported that names the keyword; an invalid
// schema wraps ErrSchema; one no value satisfies wraps ErrEmpty.
func FromSchema(schema []byte) (*Grammar, error) {
	var r Rules
	e, err := r.AddSchema("schema", schema)
	if err != nil {
		return nil, err
	}
	if err := r.Define("root", e); err != nil {
		return nil, err
	}
	g, err := r.Compile("root")
	if errors.Is(err, ErrEmpty) {
		return nil, fmt.Errorf("grammar: no JSON value satisfies the schema: %w", ErrEmpty)
	}
	return g, err
}

// AddSchema adds the rules of a JSON schema to r, under names starting
// with prefix, and returns the expression of a value valid against it
// (for composing, as a tool call's arguments).
func (r *Rules) AddSchema(prefix string, schema []byte) (Expr, error) {
	sch, order, err := CompileSchema(schema)
	if err != nil {
		return nil, err
	}
	defineJSON(r)
	sc := &schemaCompiler{r: r, prefix: prefix, order: order, rules: map[*jsonschema.Schema]string{}}
	return sc.rule(sch, "$")
}

// CompileSchema checks a JSON schema against its meta-schema and resolves
// its local references. References to other documents are refused. It
// also returns, for each object in the text, its keys in order.
func CompileSchema(schema []byte) (*jsonschema.Schema, map[string][]string, error) {
	if len(schema) > MaxSchemaBytes {
		return nil, nil, fmt.Errorf("grammar: schema of %d bytes, over %d: %w", len(schema), MaxSchemaBytes, ErrSchema)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(schema))
	if err != nil {
		return nil, nil, fmt.Errorf("grammar: schema is not JSON: %v: %w", err, ErrSchema)
	}
	order, err := keyOrder(schema)
	if err != nil {
		return nil, nil, fmt.Errorf("grammar: schema is not JSON: %v: %w", err, ErrSchema)
	}
	c := jsonschema.NewCompiler()
	c.UseLoader(noLoader{})
	if err := c.AddResource(schemaURL, doc); err != nil {
		return nil, nil, fmt.Errorf("grammar: %v: %w", err, ErrSchema)
	}
	sch, err := c.Compile(schemaURL)
	if err != nil {
		// The library's report is an indented tree; one line reads better
		// in an HTTP error.
		msg := strings.Join(strings.Fields(strings.ReplaceAll(err.Error(), schemaURL, "schema")), " ")
		return nil, nil, fmt.Errorf("grammar: %s: %w", msg, ErrSchema)
	}
	return sch, order, nil
}

// noLoader refuses every document but the schema itself: a request's
// schema must not make the server fetch URLs or read files.
type noLoader struct{}

func (noLoader) Load(u string) (any, error) {
	return nil, fmt.Errorf("$ref to another document (%s) is not supported", u)
}

// keyOrder maps the JSON pointer path of every object in doc (its keys
// joined by "\x00") to the object's keys in document order, which the
// compiled schema's maps have lost.
func keyOrder(doc []byte) (map[string][]string, error) {
	order := map[string][]string{}
	d := json.NewDecoder(bytes.NewReader(doc))
	d.UseNumber()
	var walk func(path []string) error
	walk = func(path []string) error {
		tok, err := d.Token()
		if err != nil {
			return err
		}
		switch tok {
		case json.Delim('{'):
			key := strings.Join(path, "\x00")
			order[key] = []string{}
			for d.More() {
				kt, err := d.Token()
				if err != nil {
					return err
				}
				k, _ := kt.(string)
				order[key] = append(order[key], k)
				if err := walk(append(path[:len(path):len(path)], k)); err != nil {
					return err
				}
			}
			_, err = d.Token()
			return err
		case json.Delim('['):
			for i := 0; d.More(); i++ {
				if err := walk(append(path[:len(path):len(path)], fmt.Sprint(i))); err != nil {
					return err
				}
			}
			_, err = d.Token()
			return err
		}
		return nil
	}
	return order, walk(nil)
}

type schemaCompiler struct {
	r      *Rules
	prefix string
	order  map[string][]string
	rules  map[*jsonschema.Schema]string
}

// unsupported names the keyword the grammar cannot express.
func unsupported(s *jsonschema.Schema, keyword string) error {
	return fmt.Errorf("grammar: schema %s: keyword %q: %w", pointer(s), keyword, ErrUnsupported)
}

// pointer is where s sits in the schema document, as a JSON pointer.
func pointer(s *jsonschema.Schema) string {
	_, frag, _ := strings.Cut(s.Location, "#")
	if frag == "" {
		return "#"
	}
	return "#" + frag
}

// path is s's location as raw keys joined by "\x00" (keyOrder's keys).
func path(s *jsonschema.Schema) string {
	_, frag, _ := strings.Cut(s.Location, "#")
	if frag == "" {
		return ""
	}
	toks := strings.Split(strings.TrimPrefix(frag, "/"), "/")
	for i, t := range toks {
		if u, err := url.PathUnescape(t); err == nil {
			t = u
		}
		toks[i] = strings.ReplaceAll(strings.ReplaceAll(t, "~1", "/"), "~0", "~")
	}
	return strings.Join(toks, "\x00")
}

// rule names s's grammar as a rule (once per schema, so references and
// recursion share it) and returns a reference to it.
func (sc *schemaCompiler) rule(s *jsonschema.Schema, hint string) (Expr, error) {
	if name, ok := sc.rules[s]; ok {
		return Ref(name), nil
	}
	name := sc.r.Fresh(sc.prefix + "-" + hint)
	sc.rules[s] = name
	e, err := sc.value(s)
	if err != nil {
		return nil, err
	}
	if err := sc.r.Define(name, e); err != nil {
		return nil, err
	}
	return Ref(name), nil
}

// nothing matches no text: a false schema.
func nothing() Expr { return altExpr(nil) }

// value is the expression of the JSON values valid against s.
func (sc *schemaCompiler) value(s *jsonschema.Schema) (Expr, error) {
	if s.Bool != nil {
		if *s.Bool {
			return Ref(jsonValue), nil
		}
		return nothing(), nil
	}
	if err := checkKeywords(s); err != nil {
		return nil, err
	}
	if s.Enum != nil || s.Const != nil {
		return sc.literals(s)
	}
	// Each part constrains the value; a grammar can intersect them only
	// when one is all there is.
	type part struct {
		keyword string
		build   func() (Expr, error)
	}
	var parts []part
	if s.Ref != nil {
		parts = append(parts, part{"$ref", func() (Expr, error) { return sc.rule(s.Ref, "ref") }})
	}
	for _, sub := range s.AllOf {
		parts = append(parts, part{"allOf", func() (Expr, error) { return sc.rule(sub, "allOf") }})
	}
	for _, k := range []struct {
		name string
		subs []*jsonschema.Schema
	}{{"anyOf", s.AnyOf}, {"oneOf", s.OneOf}} {
		if len(k.subs) == 0 {
			continue
		}
		// oneOf is read as anyOf: the grammar cannot exclude a value that
		// two choices both accept, so such schemas may produce a value
		// valid against several. Discriminated unions (a const per
		// choice) are exact.
		parts = append(parts, part{k.name, func() (Expr, error) {
			var alts []Expr
			for _, sub := range k.subs {
				e, err := sc.rule(sub, k.name)
				if err != nil {
					return nil, err
				}
				alts = append(alts, e)
			}
			return altExpr(alts), nil
		}})
	}
	if hasOwn(s) || len(parts) == 0 {
		parts = append(parts, part{"type", func() (Expr, error) { return sc.typed(s) }})
	}
	if len(parts) > 1 {
		kw := parts[1].keyword
		if kw == "type" {
			kw = parts[0].keyword
		}
		return nil, fmt.Errorf("grammar: schema %s: keyword %q together with other constraints on the same value: %w", pointer(s), kw, ErrUnsupported)
	}
	return parts[0].build()
}

// checkKeywords refuses the assertions this package does not implement.
func checkKeywords(s *jsonschema.Schema) error {
	checks := []struct {
		keyword string
		used    bool
	}{
		{"not", s.Not != nil},
		{"if", s.If != nil},
		{"then", s.Then != nil},
		{"else", s.Else != nil},
		{"$dynamicRef", s.DynamicRef != nil},
		{"$recursiveRef", s.RecursiveRef != nil},
		{"propertyNames", s.PropertyNames != nil},
		{"patternProperties", len(s.PatternProperties) > 0},
		{"dependencies", len(s.Dependencies) > 0},
		{"dependentRequired", len(s.DependentRequired) > 0},
		{"dependentSchemas", len(s.DependentSchemas) > 0},
		{"unevaluatedProperties", s.UnevaluatedProperties != nil},
		{"unevaluatedItems", s.UnevaluatedItems != nil},
		{"minProperties", s.MinProperties != nil && *s.MinProperties > 0},
		{"maxProperties", s.MaxProperties != nil},
		{"contains", s.Contains != nil},
		{"uniqueItems", s.UniqueItems},
		{"multipleOf", s.MultipleOf != nil},
	}
	for _, c := range checks {
		if c.used {
			return unsupported(s, c.keyword)
		}
	}
	return nil
}

// hasOwn reports whether s constrains the value itself (a type or a
// type's keywords) rather than only through $ref and the combinators.
func hasOwn(s *jsonschema.Schema) bool {
	return s.Types != nil || len(s.Properties) > 0 || len(s.Required) > 0 || s.AdditionalProperties != nil ||
		s.Items != nil || s.Items2020 != nil || len(s.PrefixItems) > 0 || s.AdditionalItems != nil ||
		s.MinItems != nil || s.MaxItems != nil || s.MinLength != nil || s.MaxLength != nil || s.Pattern != nil ||
		s.Minimum != nil || s.Maximum != nil || s.ExclusiveMinimum != nil || s.ExclusiveMaximum != nil
}

// literals is the choice of s's enum values (or its const) that pass the
// rest of s, each in one canonical spelling.
func (sc *schemaCompiler) literals(s *jsonschema.Schema) (Expr, error) {
	var values []any
	if s.Const != nil {
		values = append(values, *s.Const)
	}
	if s.Enum != nil {
		values = append(values, s.Enum.Values...)
	}
	var alts []Expr
	seen := map[string]bool{}
	for _, v := range values {
		if s.Validate(v) != nil {
			continue
		}
		text, err := canonical(v)
		if err != nil {
			return nil, fmt.Errorf("grammar: schema %s: enum value: %v: %w", pointer(s), err, ErrSchema)
		}
		if !seen[text] {
			seen[text] = true
			alts = append(alts, Lit(text))
		}
	}
	return altExpr(alts), nil
}

// canonical is v as compact JSON, without Go's HTML escaping.
func canonical(v any) (string, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return "", err
	}
	return strings.TrimSuffix(buf.String(), "\n"), nil
}

// typed is the choice of s's types (all types when it names none but its
// keywords imply some), each with s's keywords for that type.
func (sc *schemaCompiler) typed(s *jsonschema.Schema) (Expr, error) {
	var types []string
	if s.Types != nil {
		types = s.Types.ToStrings()
	} else {
		if len(s.Properties) > 0 || len(s.Required) > 0 || s.AdditionalProperties != nil {
			types = append(types, "object")
		}
		if s.Items != nil || s.Items2020 != nil || len(s.PrefixItems) > 0 || s.AdditionalItems != nil || s.MinItems != nil || s.MaxItems != nil {
			types = append(types, "array")
		}
		if s.MinLength != nil || s.MaxLength != nil || s.Pattern != nil {
			types = append(types, "string")
		}
		if s.Minimum != nil || s.Maximum != nil || s.ExclusiveMinimum != nil || s.ExclusiveMaximum != nil {
			types = append(types, "number")
		}
		if len(types) == 0 {
			return Ref(jsonValue), nil
		}
		// Keywords of one type leave values of the others unconstrained:
		// the grammar could allow them, but a client that wrote
		// "properties" means an object.
	}
	hasNumber := false
	for _, t := range types {
		hasNumber = hasNumber || t == "number"
	}
	var alts []Expr
	for _, t := range types {
		var e Expr
		var err error
		switch t {
		case "null":
			e = Ref(jsonNull)
		case "boolean":
			e = Ref(jsonBool)
		case "integer":
			if hasNumber {
				continue // number covers it
			}
			e, err = sc.number(s, true)
		case "number":
			e, err = sc.number(s, false)
		case "string":
			e, err = sc.str(s)
		case "array":
			e, err = sc.array(s)
		case "object":
			e, err = sc.object(s)
		}
		if err != nil {
			return nil, err
		}
		alts = append(alts, e)
	}
	return Alt(alts...), nil
}

// maxEnumeratedRange is the widest integer range written out as a choice
// of its numbers.
const maxEnumeratedRange = 1000

// number handles the bounds a grammar can hold exactly: an integer range
// of up to maxEnumeratedRange numbers, and the non-negative (minimum 0)
// and positive (integers, minimum 1 or exclusiveMinimum 0) half-lines.
func (sc *schemaCompiler) number(s *jsonschema.Schema, integer bool) (Expr, error) {
	base := Ref(jsonNumber)
	if integer {
		base = Ref(jsonInt)
	}
	lo, hi := s.Minimum, s.Maximum
	// Exclusive bounds of integers are inclusive ones a step in.
	if s.ExclusiveMinimum != nil {
		if !integer || lo != nil {
			return nil, unsupported(s, "exclusiveMinimum")
		}
		lo = new(big.Rat).Add(ratFloor(s.ExclusiveMinimum), big.NewRat(1, 1))
	}
	if s.ExclusiveMaximum != nil {
		if !integer || hi != nil {
			return nil, unsupported(s, "exclusiveMaximum")
		}
		hi = new(big.Rat).Sub(ratCeil(s.ExclusiveMaximum), big.NewRat(1, 1))
	}
	switch {
	case lo == nil && hi == nil:
		return base, nil
	case integer && lo != nil && hi != nil:
		l, h := ratCeil(lo), ratFloor(hi)
		span := new(big.Rat).Sub(h, l)
		if span.Sign() < 0 {
			return nothing(), nil
		}
		if span.Cmp(big.NewRat(maxEnumeratedRange, 1)) > 0 || !l.IsInt() {
			return nil, unsupported(s, "maximum")
		}
		var alts []Expr
		for x := new(big.Int).Set(l.Num()); x.Cmp(h.Num()) <= 0; x.Add(x, big.NewInt(1)) {
			alts = append(alts, Lit(x.String()))
		}
		return altExpr(alts), nil
	case hi == nil && lo.Sign() == 0:
		// Non-negative: no minus sign ("-0" is zero too, but need not be made).
		if integer {
			return Alt(Lit("0"), Seq(digits('1'), Repeat(digits('0'), 0, maxIntDigits-1))), nil
		}
		return Seq(Alt(Lit("0"), Seq(digits('1'), Repeat(digits('0'), 0, maxIntDigits-1))),
			Opt(Seq(Lit("."), Repeat(digits('0'), 1, maxFracDigits))),
			Opt(Seq(Class(false, RuneRange{'e', 'e'}, RuneRange{'E', 'E'}), Opt(Class(false, RuneRange{'+', '+'}, RuneRange{'-', '-'})), Repeat(digits('0'), 1, maxExponDigits)))), nil
	case integer && hi == nil && lo.Cmp(big.NewRat(1, 1)) == 0:
		return Seq(digits('1'), Repeat(digits('0'), 0, maxIntDigits-1)), nil
	}
	if lo != nil {
		return nil, unsupported(s, "minimum")
	}
	return nil, unsupported(s, "maximum")
}

func ratFloor(r *big.Rat) *big.Rat {
	q := new(big.Int).Div(r.Num(), r.Denom()) // Euclidean: floor for positive denominators
	return new(big.Rat).SetInt(q)
}

func ratCeil(r *big.Rat) *big.Rat {
	f := ratFloor(r)
	if f.Cmp(r) != 0 {
		f.Add(f, big.NewRat(1, 1))
	}
	return f
}

func (sc *schemaCompiler) str(s *jsonschema.Schema) (Expr, error) {
	if s.Pattern != nil {
		if s.MinLength != nil || s.MaxLength != nil {
			kw := "minLength"
			if s.MinLength == nil {
				kw = "maxLength"
			}
			return nil, fmt.Errorf("grammar: schema %s: keyword %q together with \"pattern\": %w", pointer(s), kw, ErrUnsupported)
		}
		body, err := patternExpr(s.Pattern.String())
		if err != nil {
			return nil, fmt.Errorf("grammar: schema %s: keyword \"pattern\": %v: %w", pointer(s), err, ErrUnsupported)
		}
		return Seq(Lit(`"`), body, Lit(`"`)), nil
	}
	lo, hi := 0, -1
	if s.MinLength != nil {
		lo = *s.MinLength
	}
	if s.MaxLength != nil {
		hi = *s.MaxLength
	}
	if lo > maxRepeat || hi > maxRepeat {
		kw := "minLength"
		if hi > maxRepeat {
			kw = "maxLength"
		}
		return nil, fmt.Errorf("grammar: schema %s: keyword %q over %d: %w", pointer(s), kw, maxRepeat, ErrUnsupported)
	}
	if hi >= 0 && hi < lo {
		return nothing(), nil
	}
	if lo == 0 && hi < 0 {
		return Ref(jsonString), nil
	}
	return Seq(Lit(`"`), Repeat(Ref(jsonChar), lo, hi), Lit(`"`)), nil
}

func (sc *schemaCompiler) array(s *jsonschema.Schema) (Expr, error) {
	var prefix []*jsonschema.Schema
	var rest any // nil (any value), bool, or *jsonschema.Schema
	switch items := s.Items.(type) {
	case []*jsonschema.Schema: // draft 2019-09 and before: a tuple
		prefix, rest = items, s.AdditionalItems
	case *jsonschema.Schema:
		rest = items
	}
	if len(s.PrefixItems) > 0 {
		prefix = s.PrefixItems
	}
	if s.Items2020 != nil {
		rest = s.Items2020
	}
	lo, hi := 0, -1
	if s.MinItems != nil {
		lo = *s.MinItems
	}
	if s.MaxItems != nil {
		hi = *s.MaxItems
	}
	if lo > maxRepeat || hi > maxRepeat {
		return nil, unsupported(s, "maxItems")
	}
	var restExpr Expr
	switch r := rest.(type) {
	case nil:
		restExpr = Ref(jsonValue)
	case bool:
		if r {
			restExpr = Ref(jsonValue)
		} else {
			hi = min(hi, len(prefix))
			if hi < 0 {
				hi = len(prefix)
			}
		}
	case *jsonschema.Schema:
		e, err := sc.rule(r, "items")
		if err != nil {
			return nil, err
		}
		restExpr = e
	}
	if hi >= 0 && hi < lo {
		return nothing(), nil
	}
	if len(prefix) == 0 {
		if restExpr == nil {
			return arrayOf(nothing(), 0, 0), nil
		}
		return arrayOf(restExpr, lo, hi), nil
	}
	// A tuple: item i follows the prefix schema i, the ones after it the
	// items schema; items up to minItems are required.
	ws := Ref(jsonWS)
	n := len(prefix)
	if hi >= 0 {
		n = min(n, hi)
	}
	var tail Expr = Seq()
	if restExpr != nil && (hi < 0 || hi > len(prefix)) {
		more := -1
		if hi >= 0 {
			more = hi - len(prefix)
		}
		tail = Repeat(Seq(Lit(","), ws, restExpr, ws), max(0, lo-len(prefix)), more)
	} else if lo > len(prefix) {
		return nothing(), nil
	}
	for i := n - 1; i >= 0; i-- {
		item, err := sc.rule(prefix[i], "prefixItems")
		if err != nil {
			return nil, err
		}
		sep := Seq()
		if i > 0 {
			sep = Lit(",")
		}
		step := Seq(sep, ws, item, ws, tail)
		if i < lo {
			tail = step
		} else {
			tail = Opt(step)
		}
	}
	return Seq(Lit("["), ws, tail, Lit("]")), nil
}

func (sc *schemaCompiler) object(s *jsonschema.Schema) (Expr, error) {
	ws := Ref(jsonWS)
	var extra Expr // the value of an undeclared property; nil: none allowed
	switch a := s.AdditionalProperties.(type) {
	case nil:
		extra = Ref(jsonValue)
	case bool:
		if a {
			extra = Ref(jsonValue)
		}
	case *jsonschema.Schema:
		e, err := sc.rule(a, "additionalProperties")
		if err != nil {
			return nil, err
		}
		extra = e
	}
	if len(s.Properties) == 0 && len(s.Required) == 0 {
		if extra == nil {
			return Seq(Lit("{"), ws, Lit("}")), nil
		}
		return objectOf(Ref(jsonString), extra), nil
	}
	// Declared properties in the schema's order, then required ones it
	// does not declare.
	var names []string
	seen := map[string]bool{}
	propsAt := "properties"
	if p := path(s); p != "" {
		propsAt = p + "\x00properties"
	}
	for _, k := range sc.order[propsAt] {
		if _, ok := s.Properties[k]; ok && !seen[k] {
			names, seen[k] = append(names, k), true
		}
	}
	for k := range s.Properties { // any the order map missed (it should miss none)
		if !seen[k] {
			names, seen[k] = append(names, k), true
		}
	}
	required := map[string]bool{}
	for _, k := range s.Required {
		required[k] = true
		if !seen[k] {
			if extra == nil {
				return nothing(), nil // required but not allowed
			}
			names, seen[k] = append(names, k), true
		}
	}
	members := make([]Expr, len(names))
	for i, k := range names {
		var v Expr
		if p, ok := s.Properties[k]; ok {
			var err error
			if v, err = sc.rule(p, "properties"); err != nil {
				return nil, err
			}
		} else {
			v = extra
		}
		key, err := canonical(k)
		if err != nil {
			return nil, err
		}
		members[i] = Seq(Lit(key), ws, Lit(":"), ws, v, ws)
	}
	// first[i]: the members from i on, none written yet; after[i]: the same
	// once one has been, so each is preceded by a comma. An optional
	// member may be skipped; rules keep the choices from multiplying.
	n := len(names)
	first, after := make([]Expr, n+1), make([]Expr, n+1)
	first[n], after[n] = Seq(), Seq()
	for i := n - 1; i >= 0; i-- {
		fi := Seq(members[i], after[i+1])
		ai := Seq(Lit(","), ws, members[i], after[i+1])
		if !required[names[i]] {
			fi = Alt(fi, first[i+1])
			ai = Alt(ai, after[i+1])
		}
		fn, an := sc.r.Fresh(sc.prefix+"-obj"), sc.r.Fresh(sc.prefix+"-obj")
		if err := sc.r.Define(fn, fi); err != nil {
			return nil, err
		}
		if err := sc.r.Define(an, ai); err != nil {
			return nil, err
		}
		first[i], after[i] = Ref(fn), Ref(an)
	}
	return Seq(Lit("{"), ws, first[0], Lit("}")), nil
}
