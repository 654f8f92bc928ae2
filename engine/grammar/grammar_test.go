package grammar

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math/bits"
	"math/rand/v2"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/tandem-run/tandem/engine/gguf"
	"github.com/tandem-run/tandem/engine/tokenizer"
	"github.com/tandem-run/tandem/kernels/sharedtest"
)

// Tokenizers are shared between tests: Qwen3's takes a while to build.
var tokenizers sync.Map // name -> *tokenizer.Tokenizer

// vocabFiles are the vocabularies the tests run on: Qwen3's 151k tokens
// and the demo models' 8k.
var vocabFiles = map[string][]string{
	"qwen3": {"testdata", "vocab", "vocab-qwen3.gguf"},
	"demo":  {"models", "factory-target-Q8_0.gguf"},
}

func loadTokenizer(t testing.TB, name string) *tokenizer.Tokenizer {
	t.Helper()
	if tk, ok := tokenizers.Load(name); ok {
		return tk.(*tokenizer.Tokenizer)
	}
	f, err := gguf.Open(sharedtest.Path(t, vocabFiles[name]...))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tk, err := tokenizer.FromGGUF(f)
	if err != nil {
		t.Fatal(err)
	}
	tokenizers.Store(name, tk)
	return tk
}

var vocabs sync.Map // name -> *Vocab

func loadVocab(t testing.TB, name string) (*Vocab, *tokenizer.Tokenizer) {
	t.Helper()
	tk := loadTokenizer(t, name)
	if v, ok := vocabs.Load(name); ok {
		return v.(*Vocab), tk
	}
	v := NewVocab(tk)
	vocabs.Store(name, v)
	return v, tk
}

// schemaCase is a schema with documents that validate against it (in
// several spellings) and documents that do not.
type schemaCase struct {
	name, schema string
	valid        []string
	invalid      []string
	unordered    []string
}

var schemaCases = []schemaCase{
	{
		name: "person",
		schema: `{"type":"object","properties":{
			"name":{"type":"string"},
			"age":{"type":"integer"},
			"height":{"type":"number"},
			"role":{"enum":["admin","user","guest"]},
			"tags":{"type":"array","items":{"type":"string"}},
			"active":{"type":"boolean"}},
			"required":["name","age","height","role","tags","active"],"additionalProperties":false}`,
		valid: []string{
			`{"name":"Ann","age":31,"height":1.68,"role":"admin","tags":["a","b"],"active":true}`,
			`{"name": "Bob \"B\" Lee", "age": -4, "height": 2e3, "role": "guest", "tags": [], "active": false}`,
			"{\n  \"name\": \"caf\u00e9 \u4e2d\u6587 \U0001F999\",\n  \"age\": 0,\n  \"height\": 0.5,\n  \"role\": \"user\",\n  \"tags\": [\n    \"x\"\n  ],\n  \"active\": true\n}",
			`{"name":"\u00e9\n","age":7,"height":-1.25E-7,"role":"user","tags":["\\"],"active":false}`,
		},
		invalid: []string{
			`{"name":"Ann","age":31}`,
			`{"name":"Ann","age":3.5,"height":1,"role":"admin","tags":[],"active":true}`,
			`{"name":"Ann","age":3,"height":1,"role":"root","tags":[],"active":true}`,
		},
		// Valid, but properties come in the schema's order (as OpenAI's
		// structured outputs promise), so the grammar does not make it.
		unordered: []string{`{"age":3,"name":"Ann","height":1,"role":"admin","tags":[],"active":true}`},
	},
	{
		name: "nested-optional",
		schema: `{"type":"object","properties":{
			"id":{"type":"integer","minimum":1},
			"address":{"type":"object","properties":{"city":{"type":"string","minLength":1,"maxLength":12},"zip":{"type":"string","pattern":"^[0-9]{5}$"}},"required":["city"]},
			"score":{"type":"integer","minimum":0,"maximum":10},
			"note":{"type":["string","null"]}},
			"required":["id","address"]}`,
		valid: []string{
			`{"id":1,"address":{"city":"Paris"}}`,
			`{"id":42,"address":{"city":"Oslo","zip":"01234"},"score":10,"note":null}`,
			`{"id": 7, "address": {"city": "Rome", "zip": "99999"}, "note": "hi"}`,
			`{"id":3,"address":{"city":"x"},"score":0}`,
		},
		invalid: []string{
			`{"id":0,"address":{"city":"Paris"}}`,
			`{"id":1,"address":{"city":""}}`,
			`{"id":1,"address":{"city":"Paris","zip":"1234"}}`,
			`{"id":1,"address":{"city":"Paris"},"score":11}`,
			`{"address":{"city":"Paris"}}`,
		},
	},
	{
		name: "defs-anyof",
		schema: `{"$defs":{"item":{"type":"object","properties":{"sku":{"type":"string"},"qty":{"type":"integer"}},"required":["sku","qty"],"additionalProperties":false},
			"tree":{"type":"object","properties":{"label":{"type":"string"},"kids":{"type":"array","items":{"$ref":"#/$defs/tree"},"maxItems":3}},"required":["label"],"additionalProperties":false}},
			"type":"object","properties":{
			"items":{"type":"array","items":{"$ref":"#/$defs/item"},"minItems":1,"maxItems":4},
			"shipping":{"anyOf":[{"const":"pickup"},{"type":"object","properties":{"days":{"type":"integer"}},"required":["days"],"additionalProperties":false}]},
			"tree":{"$ref":"#/$defs/tree"},
			"pair":{"type":"array","prefixItems":[{"type":"string"},{"type":"boolean"}],"items":false}},
			"required":["items","shipping","tree","pair"],"additionalProperties":false}`,
		valid: []string{
			`{"items":[{"sku":"a1","qty":2}],"shipping":"pickup","tree":{"label":"r"},"pair":["x",true]}`,
			`{"items":[{"sku":"a","qty":1},{"sku":"b","qty":-2}],"shipping":{"days":3},"tree":{"label":"r","kids":[{"label":"c","kids":[]},{"label":"d"}]},"pair":["y"]}`,
			`{"items":[{"sku":"a","qty":1}],"shipping":"pickup","tree":{"label":"r"},"pair":[]}`,
		},
		invalid: []string{
			`{"items":[],"shipping":"pickup","tree":{"label":"r"},"pair":[]}`,
			`{"items":[{"sku":"a","qty":1}],"shipping":"drone","tree":{"label":"r"},"pair":[]}`,
			`{"items":[{"sku":"a","qty":1}],"shipping":"pickup","tree":{"label":"r"},"pair":["a",true,1]}`,
		},
	},
	{
		name:   "json-object",
		schema: `{"type":"object"}`,
		valid: []string{
			`{}`, `{"a":[1,2,{"b":null}],"c":"d"}`, "{\n\t\"k\": -0.0e+1\n}", `{"":[[],{}]}`,
		},
		invalid: []string{`[]`, `{"a":}`, `{"a":01}`, `{"a":"\x"}`},
	},
}

// compileFor builds a schema's constraint over a vocabulary.
func compileFor(t testing.TB, schema string, v *Vocab) *Constraint {
	t.Helper()
	g, err := FromSchema([]byte(schema))
	if err != nil {
		t.Fatal(err)
	}
	c, err := NewConstraint(g, v)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// validate checks doc against schema with the JSON-schema library alone.
func validate(t *testing.T, schema, doc string) error {
	t.Helper()
	sch, _, err := CompileSchema([]byte(schema))
	if err != nil {
		t.Fatal(err)
	}
	val, err := jsonDecode(doc)
	if err != nil {
		return err
	}
	return sch.Validate(val)
}

func jsonDecode(doc string) (any, error) {
	d := json.NewDecoder(strings.NewReader(doc))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	if _, err := d.Token(); err != io.EOF {
		return nil, errors.New("text after the value")
	}
	return v, nil
}

// The test documents are right about themselves: the valid ones validate
// and the invalid ones do not, by the library alone.
func TestSchemaCasesAreRight(t *testing.T) {
	for _, sc := range schemaCases {
		for _, d := range sc.valid {
			if err := validate(t, sc.schema, d); err != nil {
				t.Errorf("%s: valid %s: %v", sc.name, d, err)
			}
		}
		for _, d := range sc.invalid {
			if validate(t, sc.schema, d) == nil {
				t.Errorf("%s: invalid %s validates", sc.name, d)
			}
		}
		for _, d := range sc.unordered {
			if err := validate(t, sc.schema, d); err != nil {
				t.Errorf("%s: unordered %s: %v", sc.name, d, err)
			}
		}
	}
}

// feed advances a fresh matcher by the tokenization of doc and reports the
// first rejected token, or whether it ends complete.
func feed(c *Constraint, tk *tokenizer.Tokenizer, doc string) (accepted bool, err error) {
	ids, err := tk.Encode(doc, tokenizer.EncodeOptions{})
	if err != nil {
		return false, err
	}
	m := c.NewMatcher()
	for _, id := range ids {
		mask, err := m.Mask()
		if err != nil {
			return false, err
		}
		if !mask.Has(id) {
			return false, nil
		}
		if err := m.Advance(id); err != nil {
			return false, err
		}
	}
	return m.Accepting(), nil
}

// Every valid document's tokenization is allowed token by token and ends
// complete; no invalid one is.
func TestTokenizationsAccepted(t *testing.T) {
	for _, name := range []string{"demo", "qwen3"} {
		v, tk := loadVocab(t, name)
		for _, sc := range schemaCases {
			c := compileFor(t, sc.schema, v)
			for _, d := range sc.valid {
				if ok, err := feed(c, tk, d); !ok || err != nil {
					t.Errorf("%s/%s: valid %q not accepted (%v)", name, sc.name, d, err)
				}
			}
			for _, d := range append(sc.invalid, sc.unordered...) {
				if ok, err := feed(c, tk, d); ok {
					t.Errorf("%s/%s: invalid %q accepted (%v)", name, sc.name, d, err)
				}
			}
		}
	}
}

// Random JSON values, written compactly and indented, are all accepted by
// the json_object grammar.
func TestRandomObjectsAccepted(t *testing.T) {
	v, tk := loadVocab(t, "qwen3")
	g, err := JSONObject()
	if err != nil {
		t.Fatal(err)
	}
	c, err := NewConstraint(g, v)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	var value func(depth int) any
	value = func(depth int) any {
		switch k := rng.IntN(7); {
		case k == 0 && depth < 3:
			m := map[string]any{}
			for range rng.IntN(4) {
				m[randText(rng)] = value(depth + 1)
			}
			return m
		case k == 1 && depth < 3:
			var a []any
			for range rng.IntN(4) {
				a = append(a, value(depth+1))
			}
			return a
		case k == 2:
			return randText(rng)
		case k == 3:
			return rng.NormFloat64() * 1e3
		case k == 4:
			return rng.IntN(1<<40) - 1<<39
		case k == 5:
			return rng.IntN(2) == 0
		}
		return nil
	}
	for i := range 200 {
		obj := map[string]any{"k": value(0), randText(rng): value(1)}
		var b []byte
		if i%2 == 0 {
			b, _ = json.Marshal(obj)
		} else {
			b, _ = json.MarshalIndent(obj, "", "  ")
		}
		if ok, err := feed(c, tk, string(b)); !ok || err != nil {
			t.Fatalf("%s not accepted (%v)", b, err)
		}
	}
}

func randText(rng *rand.Rand) string {
	const alphabet = "ab cd\"\\\n\t/é中🦙<>&\x01"
	rs := []rune(alphabet)
	var sb strings.Builder
	for range rng.IntN(8) {
		sb.WriteRune(rs[rng.IntN(len(rs))])
	}
	return sb.String()
}

// walk generates one output by picking allowed tokens at random (leaning
// toward tokens that close structures, so walks end) and returns its text,
// or false if it did not end within the step limit.
func walk(t *testing.T, c *Constraint, tk *tokenizer.Tokenizer, rng *rand.Rand) (string, bool) {
	t.Helper()
	m := c.NewMatcher()
	var out []byte
	for range 400 {
		if m.Done() {
			return string(out), true
		}
		mask, err := m.Mask()
		if err != nil {
			t.Fatal(err)
		}
		if m.Accepting() && rng.IntN(3) == 0 {
			return string(out), true
		}
		draw := randomAllowed(mask, c.v.size, rng)
		best, bestScore := int32(-1), -1
		for range 6 {
			id := draw()
			p, _ := tk.PieceBytes(id)
			score := rng.IntN(2) + 3*bytes.Count(p, []byte(`"`)) + 4*bytes.Count(p, []byte(`}`)) + 4*bytes.Count(p, []byte(`]`))
			if tk.IsEOG(id) {
				score = 100
			}
			if score > bestScore {
				best, bestScore = id, score
			}
		}
		if tk.IsEOG(best) {
			return string(out), true
		}
		if err := m.Advance(best); err != nil {
			t.Fatalf("advance by an allowed token: %v", err)
		}
		p, _ := tk.PieceBytes(best)
		out = append(out, p...)
	}
	return "", false
}

// Random walks over the masks always make JSON that parses and validates.
func TestRandomWalksValidate(t *testing.T) {
	for _, name := range []string{"demo", "qwen3"} {
		v, tk := loadVocab(t, name)
		rng := rand.New(rand.NewPCG(3, 4))
		for _, sc := range schemaCases {
			c := compileFor(t, sc.schema, v)
			ended := 0
			for range 25 {
				doc, ok := walk(t, c, tk, rng)
				if !ok {
					continue
				}
				ended++
				if err := validate(t, sc.schema, doc); err != nil {
					t.Errorf("%s/%s: walk made %q: %v", name, sc.name, doc, err)
				}
			}
			if ended < 10 {
				t.Errorf("%s/%s: only %d of 25 walks ended", name, sc.name, ended)
			}
		}
	}
}

// randomAllowed draws ids uniformly from a mask: by rejection when the
// mask is dense, from a list of its ids when it is sparse.
func randomAllowed(m Mask, size int, rng *rand.Rand) func() int32 {
	if m.Count()*16 > size {
		return func() int32 {
			for {
				if id := int32(rng.IntN(size)); m.Has(id) {
					return id
				}
			}
		}
	}
	ids := maskIDs(m)
	return func() int32 { return ids[rng.IntN(len(ids))] }
}

// maskIDs lists the ids in a mask.
func maskIDs(m Mask) []int32 {
	var ids []int32
	for w, bits := range m {
		for ; bits != 0; bits &= bits - 1 {
			ids = append(ids, int32(w*64+trailingZeros(bits)))
		}
	}
	return ids
}

func trailingZeros(x uint64) int { return bits.TrailingZeros64(x) }

// Every short string over a small alphabet: what the grammar accepts
// validates, and what validates is accepted unless it is spelled in a way
// the grammar does not write: whitespace that is leading, trailing or
// doubled, a zero written -0, an integer with an exponent.
func TestShortStringsExhaustive(t *testing.T) {
	for _, tc := range []struct {
		schema   string
		alphabet string
		maxLen   int
	}{
		{`{"type":"array","items":{"type":"integer","minimum":0,"maximum":12},"maxItems":3}`, "[], 012-", 6},
		{`{"type":"string","maxLength":2}`, "\"a\\nu0", 7},
		{`{"anyOf":[{"type":"boolean"},{"type":"null"},{"type":"integer","minimum":1}]}`, "nultrefas1", 5},
	} {
		exponent := regexp.MustCompile(`[0-9]e`)
		sch, _, err := CompileSchema([]byte(tc.schema))
		if err != nil {
			t.Fatal(err)
		}
		g, err := FromSchema([]byte(tc.schema))
		if err != nil {
			t.Fatal(err)
		}
		c, err := NewConstraint(g, NewVocab(newByteVocab()))
		if err != nil {
			t.Fatal(err)
		}
		accepted := map[string]bool{}
		var dfs func(m *Matcher, s string)
		dfs = func(m *Matcher, s string) {
			if m.Accepting() {
				accepted[s] = true
			}
			if len(s) == tc.maxLen {
				return
			}
			for i := 0; i < len(tc.alphabet); i++ {
				f := m.Fork()
				if f.Advance(int32(tc.alphabet[i])) == nil {
					dfs(f, s+tc.alphabet[i:i+1])
				}
			}
		}
		dfs(c.NewMatcher(), "")
		valid := 0
		var all func(s string)
		all = func(s string) {
			if v, err := jsonDecode(s); err == nil && sch.Validate(v) == nil {
				valid++
				plain := !strings.HasPrefix(s, " ") && !strings.HasSuffix(s, " ") && !strings.Contains(s, "  ") &&
					!strings.Contains(s, "-0") && !exponent.MatchString(s)
				if plain && !accepted[s] {
					t.Errorf("%s: valid %q refused", tc.schema, s)
				}
			} else if accepted[s] {
				t.Errorf("%s: invalid %q accepted", tc.schema, s)
			}
			if len(s) < tc.maxLen {
				for i := 0; i < len(tc.alphabet); i++ {
					all(s + tc.alphabet[i:i+1])
				}
			}
		}
		all("")
		if valid < 5 || len(accepted) < 5 {
			t.Errorf("%s: only %d valid and %d accepted strings: the test proves little", tc.schema, valid, len(accepted))
		}
		t.Logf("%s: %d valid, %d accepted", tc.schema, valid, len(accepted))
	}
}
