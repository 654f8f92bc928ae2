package grammar

import (
	"errors"
	"testing"
)

// FuzzGrammar feeds GBNF texts and JSON schemas, as clients send them,
// through compilation and a few matcher steps: any input gets a grammar or
// an error, never a panic or a hang.
func FuzzGrammar(f *testing.F) {
	for _, s := range []string{
		`root ::= "a" [b-d]* ("x" | "y"){1,3}`,
		"root ::= item+\nitem ::= [^\\n]+ \"\\n\"",
		`root ::= ("a"?)*`,
		`root ::= x`,
		`{"type":"object","properties":{"a":{"type":"string","pattern":"^[a-z]{2,4}$"}},"required":["a"]}`,
		`{"$defs":{"t":{"type":"array","items":{"$ref":"#/$defs/t"}}},"$ref":"#/$defs/t"}`,
		`{"anyOf":[{"type":"integer","minimum":0,"maximum":5},{"enum":["x",null]}]}`,
		`{"type":"array","prefixItems":[{"const":1}],"minItems":2,"maxItems":3}`,
	} {
		f.Add(s, []byte("abc{\"[1]"))
	}
	bv := newByteVocab()
	v := NewVocab(bv)
	f.Fuzz(func(t *testing.T, src string, walk []byte) {
		var g *Grammar
		var err error
		if len(src) > 0 && (src[0] == '{' || src[0] == '[' || src[0] == 't' || src[0] == 'f') {
			g, err = FromSchema([]byte(src))
		} else {
			g, err = CompileGBNF(src)
		}
		if err != nil {
			for _, known := range []error{ErrSyntax, ErrInvalid, ErrEmpty, ErrUnsupported, ErrSchema, ErrTooComplex} {
				if errors.Is(err, known) {
					return
				}
			}
			t.Fatalf("%q: error of no known kind: %v", src, err)
		}
		c, err := NewConstraint(g, v)
		if err != nil {
			if !errors.Is(err, ErrTooComplex) && !errors.Is(err, ErrEmpty) {
				t.Fatalf("%q: %v", src, err)
			}
			return
		}
		m := c.NewMatcher()
		for _, b := range walk {
			mask, err := m.Mask()
			if err != nil {
				return
			}
			if mask.Has(int32(b)) != m.Allowed(int32(b)) {
				t.Fatalf("%q: mask and Allowed disagree on %q", src, b)
			}
			if m.Advance(int32(b)) != nil {
				return
			}
		}
	})
}
