package grammar

import (
	"errors"
	"strings"
	"testing"
)

// byteVocab is a toy vocabulary: one token per byte value, some longer
// tokens, and an end-of-generation token with no text.
type byteVocab struct {
	pieces []string
	eog    int32
}

func newByteVocab(extra ...string) byteVocab {
	v := byteVocab{}
	for b := range 256 {
		v.pieces = append(v.pieces, string([]byte{byte(b)}))
	}
	v.eog = int32(len(v.pieces))
	v.pieces = append(v.pieces, "")
	v.pieces = append(v.pieces, extra...)
	return v
}

func (v byteVocab) VocabSize() int { return len(v.pieces) }
func (v byteVocab) PieceBytes(id int32) ([]byte, bool) {
	return []byte(v.pieces[id]), v.pieces[id] != ""
}
func (v byteVocab) IsEOG(id int32) bool { return id == v.eog }

// matches runs s byte by byte through g and reports whether it is a
// complete sentence of g.
func matches(t *testing.T, g *Grammar, s string) bool {
	t.Helper()
	c, err := NewConstraint(g, NewVocab(newByteVocab()))
	if err != nil {
		t.Fatal(err)
	}
	m := c.NewMatcher()
	for i := 0; i < len(s); i++ {
		if err := m.Advance(int32(s[i])); err != nil {
			if !errors.Is(err, ErrRejected) {
				t.Fatal(err)
			}
			return false
		}
	}
	return m.Accepting()
}

func TestGBNF(t *testing.T) {
	for _, tc := range []struct {
		name, src string
		yes, no   []string
	}{
		{"arithmetic", `
# sums and products of numbers, with parentheses
root ::= sum
sum  ::= prod (ws [-+] ws prod)*
prod ::= atom (ws [*/] ws atom)*
atom ::= [0-9]+ | "(" ws sum ws ")"
ws   ::= [ ]*`,
			[]string{"1", "1+2*3", "(1 + 2) * 30", "((4))"},
			[]string{"", "1+", "(1", "1++2", "a"}},
		{"escapes and classes", `root ::= "a\"\\\x41\u00e9\n" [^a-z\]] [\-^]`,
			[]string{"a\"\\Aé\nZ-", "a\"\\Aé\n]^"[:0] + "a\"\\Aé\n!^"},
			[]string{"a\"\\Aé\nb-", "a\"\\Aé\n]-"}},
		{"unicode range and any", "root ::= [ぁ-ゟ]+ . \"!\"",
			[]string{"ひらがなx!", "あ🦙!"},
			[]string{"カタカナx!", "あ!", "x!"}},
		{"repetition bounds", `root ::= "a"{2} "b"{1,3} "c"{2,} "d"{0,1}`,
			[]string{"aabcc", "aabbbccccd"},
			[]string{"abcc", "aabbbbcc", "aabc", "aabccdd"}},
		{"continuation lines", "root ::= \"x\" |\n  \"y\" (\n  \"z\"\n  | \"w\" )\nother ::= \"q\"",
			[]string{"x", "yz", "yw"},
			[]string{"y", "q"}},
		{"empty alternative", `root ::= "a" | `,
			[]string{"a", ""},
			[]string{"b"}},
		{"right recursion", "root ::= item\nitem ::= \"(\" item \")\" | \"\"",
			[]string{"", "()", "((()))"},
			[]string{"(", "())"}},
	} {
		g, err := CompileGBNF(tc.src)
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		for _, s := range tc.yes {
			if !matches(t, g, s) {
				t.Errorf("%s: %q refused", tc.name, s)
			}
		}
		for _, s := range tc.no {
			if matches(t, g, s) {
				t.Errorf("%s: %q accepted", tc.name, s)
			}
		}
	}
}

func TestGBNFErrors(t *testing.T) {
	for _, tc := range []struct {
		src  string
		want error
		says string
	}{
		{`root ::= "abc`, ErrSyntax, "line 1"},
		{"root ::= \"a\"\nx ::= [a-", ErrSyntax, "line 2"},
		{`root ::= "a" ) `, ErrSyntax, "unexpected"},
		{`item ::= "a"`, ErrSyntax, "no rule named root"},
		{`root ::= "\q"`, ErrSyntax, `unknown escape`},
		{`root ::= "a"{3,1}`, ErrSyntax, "out of range"},
		{`root ::= "a"{99999}`, ErrSyntax, "out of range"},
		{"root ::= x", ErrInvalid, `"x", which is not defined`},
		{"root ::= \"a\"\nroot ::= \"b\"", ErrSyntax, "defined twice"},
		{"root ::= expr\nexpr ::= expr \"+\" \"1\" | \"1\"", ErrInvalid, "left-recursive"},
		{"root ::= opt root \"x\" | \"y\"\nopt ::= \"a\"?", ErrInvalid, "left-recursive"},
		{`root ::= ("a"?)*`, ErrInvalid, "left-recursive"},
		{"root ::= loop\nloop ::= \"a\" loop", ErrEmpty, "allows nothing"},
		{`root ::= [^\x00-\U0010FFFF]`, ErrEmpty, "allows nothing"},
		{"root ::= " + strings.Repeat("(", 300) + `"a"` + strings.Repeat(")", 300), ErrSyntax, "nested"},
	} {
		_, err := CompileGBNF(tc.src)
		if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%q: got %v, want %v saying %q", tc.src, err, tc.want, tc.says)
		}
	}
}

func TestSchemaErrors(t *testing.T) {
	for _, tc := range []struct {
		schema string
		want   error
		says   string
	}{
		{`{"not":{"type":"string"}}`, ErrUnsupported, `"not"`},
		{`{"type":"integer","minimum":5}`, ErrUnsupported, `"minimum"`},
		{`{"type":"number","maximum":5}`, ErrUnsupported, `"maximum"`},
		{`{"type":"object","properties":{"a":{"type":"string"}},"minProperties":1}`, ErrUnsupported, `"minProperties"`},
		{`{"type":"array","uniqueItems":true}`, ErrUnsupported, `"uniqueItems"`},
		{`{"type":"object","properties":{"a":{"type":"string","pattern":"a","maxLength":3}}}`, ErrUnsupported, `"maxLength"`},
		{`{"type":"object","properties":{"p":{"if":{"type":"string"}}}}`, ErrUnsupported, `#/properties/p: keyword "if"`},
		{`{"type":"object","anyOf":[{"required":["a"]}]}`, ErrUnsupported, `"anyOf"`},
		{`{"type":"string","pattern":"a\\bb"}`, ErrUnsupported, `"pattern"`},
		{`{"type":"strang"}`, ErrSchema, "at '/type': value must be one of"},
		{`{"$ref":"http://example.com/s.json"}`, ErrSchema, "not supported"},
		{`{"type":`, ErrSchema, "not JSON"},
		{`false`, ErrEmpty, "no JSON value"},
		{`{"type":"string","minLength":5,"maxLength":2}`, ErrEmpty, "no JSON value"},
		{`{"type":"string","enum":[1,2]}`, ErrEmpty, "no JSON value"},
		{`{"type":"object","properties":{"a":false},"required":["a"]}`, ErrEmpty, "no JSON value"},
	} {
		_, err := FromSchema([]byte(tc.schema))
		if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%s: got %v, want %v saying %q", tc.schema, err, tc.want, tc.says)
		}
	}
}

// A grammar with a choice at every position for many positions stays
// within the matcher's limits: stacks are shared, not copied.
func TestAmbiguousGrammarStaysSmall(t *testing.T) {
	g, err := CompileGBNF(`root ::= ("a" | "a" "a" | "a" x)* "b"
x ::= "a"*`)
	if err != nil {
		t.Fatal(err)
	}
	if !matches(t, g, strings.Repeat("a", 2000)+"b") {
		t.Fatal("refused")
	}
}

// Ambiguous and deeply nested grammars, as a hostile client could send,
// end in a result or ErrTooComplex: never a crash (a Go stack overflow is
// fatal) or memory without end. Before the work limits, the last of these
// overflowed the stack.
func TestHostileGrammarsAreBounded(t *testing.T) {
	v := NewVocab(newByteVocab())
	for _, src := range []string{
		`root ::= [a-z]{0,10000}`,
		`root ::= ("a"{0,100}){0,100}`,
		`root ::= ("a"{0,60} "b"?){0,60}`,
		`root ::= (("a" | "aa" | "aaa"){0,50}){0,50}`,
		`root ::= ([^"]{0,300} "x"?){1,300}`,
		"root ::= " + strings.Repeat("(", 200) + `"a"` + strings.Repeat("){0,3}", 200),
	} {
		g, err := CompileGBNF(src)
		if err != nil {
			t.Fatalf("%.40q: %v", src, err)
		}
		c, err := NewConstraint(g, v)
		if err == nil {
			m := c.NewMatcher()
			for range 40 {
				if _, err = m.Mask(); err != nil {
					break
				}
				if err = m.Advance('a'); err != nil {
					break
				}
			}
		}
		if err != nil && !errors.Is(err, ErrTooComplex) && !errors.Is(err, ErrRejected) {
			t.Errorf("%.40q: %v", src, err)
		}
	}
}
