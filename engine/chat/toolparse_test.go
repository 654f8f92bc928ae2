package chat

import (
	"encoding/json"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/tandem-run/tandem/engine/gguf"
	"github.com/tandem-run/tandem/engine/grammar"
	"github.com/tandem-run/tandem/engine/tokenizer"
	"github.com/tandem-run/tandem/kernels/sharedtest"
)

// parsed is what a parser made of a text: content, and each call's name
// and arguments joined from its deltas.
type parsed struct {
	content string
	calls   []FunctionCall
}

func collect(deltas []Delta, into *parsed) {
	for _, d := range deltas {
		if !d.Call {
			into.content += d.Content
			continue
		}
		for len(into.calls) <= d.Index {
			into.calls = append(into.calls, FunctionCall{})
		}
		if d.Name != "" {
			into.calls[d.Index].Name = d.Name
		}
		into.calls[d.Index].Arguments += d.Arguments
	}
}

// parseIn feeds text in pieces of the given sizes (cycling) and flushes.
func parseIn(s ToolSyntax, text string, sizes []int) (parsed, []ToolCall) {
	p := NewToolParser(s)
	var got parsed
	for i := 0; len(text) > 0; i++ {
		n := min(sizes[i%len(sizes)], len(text))
		collect(p.Feed(text[:n]), &got)
		text = text[n:]
	}
	collect(p.Flush(), &got)
	return got, p.Calls()
}

func TestToolParser(t *testing.T) {
	for _, tc := range []struct {
		name    string
		syntax  ToolSyntax
		text    string
		content string
		calls   []FunctionCall
	}{
		{"plain answer", HermesSyntax, "It is sunny < 30 degrees.", "It is sunny < 30 degrees.", nil},
		{"one call", HermesSyntax, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>", "",
			[]FunctionCall{{"get_weather", `{"city": "Paris"}`}}},
		{"content then two calls", HermesSyntax,
			"Let me check.\n<tool_call>\n{\"name\": \"a\", \"arguments\": {\"x\": \"}\\\"{\", \"y\": [1, {\"z\": 2}]}}\n</tool_call>\n<tool_call>\n{\"name\":\"b\",\"arguments\":{}}\n</tool_call>\n",
			"Let me check.\n", []FunctionCall{{"a", `{"x": "}\"{", "y": [1, {"z": 2}]}`}, {"b", `{}`}}},
		{"arguments before the name", HermesSyntax, "<tool_call>{\"arguments\": {\"q\": 1}, \"name\": \"s\"}</tool_call>", "",
			[]FunctionCall{{"s", `{"q": 1}`}}},
		{"not a call", HermesSyntax, "<tool_call>oops</tool_call> done", "<tool_call>oops</tool_call> done", nil},
		{"unclosed call with whole JSON", HermesSyntax, "<tool_call>\n{\"name\": \"a\", \"arguments\": {\"k\": true}}", "",
			[]FunctionCall{{"a", `{"k": true}`}}},
		{"json call", JSONSyntax, "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Oslo\"}}", "",
			[]FunctionCall{{"get_weather", `{"city": "Oslo"}`}}},
		{"json call after python_tag", JSONSyntax, "<|python_tag|>{\"name\": \"f\", \"parameters\": {}}", "",
			[]FunctionCall{{"f", `{}`}}},
		{"json answer that is no call", JSONSyntax, "{\"answer\": 42}", "{\"answer\": 42}", nil},
		{"json syntax, plain text", JSONSyntax, "Hello {there}", "Hello {there}", nil},
		{"no syntax", NoToolSyntax, "<tool_call>{\"name\": \"a\", \"arguments\": {}}</tool_call>", "<tool_call>{\"name\": \"a\", \"arguments\": {}}</tool_call>", nil},
	} {
		for _, sizes := range [][]int{{1 << 20}, {1}, {3, 1, 7}, {11}} {
			got, calls := parseIn(tc.syntax, tc.text, sizes)
			if got.content != tc.content || !slices.Equal(got.calls, tc.calls) {
				t.Errorf("%s, pieces %v: content %q calls %q; want %q %q", tc.name, sizes, got.content, got.calls, tc.content, tc.calls)
			}
			var whole []FunctionCall
			for _, c := range calls {
				whole = append(whole, c.Function)
			}
			if !slices.Equal(whole, tc.calls) {
				t.Errorf("%s, pieces %v: Calls() %q, want %q", tc.name, sizes, whole, tc.calls)
			}
		}
	}
}

// A streamed call's first delta names it before any arguments arrive, and
// its arguments arrive as they are made, not all at the end.
func TestToolParserStreams(t *testing.T) {
	p := NewToolParser(HermesSyntax)
	var got parsed
	collect(p.Feed("<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"ci"), &got)
	if len(got.calls) != 1 || got.calls[0].Name != "get_weather" || got.calls[0].Arguments != `{"ci` {
		t.Fatalf("after part of a call: %+v", got)
	}
	collect(p.Feed("ty\": \"Rome\"}}\n</tool"), &got)
	if got.calls[0].Arguments != `{"city": "Rome"}` {
		t.Fatalf("arguments %q", got.calls[0].Arguments)
	}
	collect(p.Feed("_call>"), &got)
	collect(p.Flush(), &got)
	if got.content != "" || len(p.Calls()) != 1 {
		t.Errorf("content %q, calls %v", got.content, p.Calls())
	}
}

func loadTokenizer(t *testing.T, elem ...string) *tokenizer.Tokenizer {
	t.Helper()
	f, err := gguf.Open(sharedtest.Path(t, elem...))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tk, err := tokenizer.FromGGUF(f)
	if err != nil {
		t.Fatal(err)
	}
	return tk
}

// Under the grammar of tool_choice "required" or a named tool, any output
// (random walks over the masks) is parsed back into well-formed calls of
// the allowed tools, with arguments valid against their parameters.
func TestRequiredToolCallGrammar(t *testing.T) {
	tools := mustTools(t, weatherTools[:len(weatherTools)-1]+`,{"type":"function","function":{"name":"get_time","parameters":{"type":"object","properties":{"zone":{"type":"string","maxLength":8}},"required":["zone"],"additionalProperties":false}}}]`)
	schemas := map[string]string{}
	for _, tl := range tools {
		schemas[tl.Function.Name] = string(tl.Function.Parameters)
	}
	tk := loadTokenizer(t, "models", "factory-target-Q8_0.gguf")
	v := grammar.NewVocab(tk)
	rng := rand.New(rand.NewPCG(5, 6))
	for _, choice := range []ToolChoice{{Mode: "required"}, {Mode: "function", Name: "get_time"}} {
		g, err := ToolCallGrammar(HermesSyntax, tools, choice, true)
		if err != nil {
			t.Fatal(err)
		}
		c, err := grammar.NewConstraint(g, v)
		if err != nil {
			t.Fatal(err)
		}
		ended := 0
		for range 20 {
			text, ok := randomOutput(t, c, tk, rng)
			if !ok {
				continue
			}
			ended++
			got, calls := parseIn(HermesSyntax, text, []int{1, 5})
			if got.content != "" || len(calls) == 0 {
				t.Fatalf("%v: %q parsed to content %q and %d calls", choice, text, got.content, len(calls))
			}
			for _, cl := range calls {
				if choice.Mode == "function" && cl.Function.Name != choice.Name {
					t.Errorf("%v: called %s", choice, cl.Function.Name)
				}
				sch, _, err := grammar.CompileSchema([]byte(schemas[cl.Function.Name]))
				if err != nil {
					t.Fatalf("%s: %v", cl.Function.Name, err)
				}
				d := json.NewDecoder(strings.NewReader(cl.Function.Arguments))
				d.UseNumber()
				var args any
				if err := d.Decode(&args); err != nil {
					t.Fatalf("%q: arguments %q: %v", text, cl.Function.Arguments, err)
				}
				if err := sch.Validate(args); err != nil {
					t.Errorf("%q: arguments invalid: %v", text, err)
				}
			}
		}
		if ended < 10 {
			t.Errorf("%v: only %d of 20 walks ended", choice, ended)
		}
	}
	if _, err := ToolCallGrammar(NoToolSyntax, tools, ToolChoice{Mode: "required"}, false); err == nil || !strings.Contains(err.Error(), ErrNoTools.Error()) {
		t.Errorf("no syntax: %v", err)
	}
}

// randomOutput picks allowed tokens at random, leaning toward tokens that
// close strings and objects so the output ends.
func randomOutput(t *testing.T, c *grammar.Constraint, tk *tokenizer.Tokenizer, rng *rand.Rand) (string, bool) {
	m := c.NewMatcher()
	var out []byte
	for range 600 {
		if m.Done() || (m.Accepting() && rng.IntN(2) == 0) {
			return string(out), true
		}
		mask, err := m.Mask()
		if err != nil {
			t.Fatal(err)
		}
		var ids []int32
		for id := range int32(c.Vocab().Size()) {
			if mask.Has(id) && !tk.IsEOG(id) {
				ids = append(ids, id)
			}
		}
		best, score := ids[0], -1
		for range 6 {
			id := ids[rng.IntN(len(ids))]
			p, _ := tk.PieceBytes(id)
			s := rng.IntN(2) + 3*strings.Count(string(p), `"`) + 4*strings.Count(string(p), "}")
			if s > score {
				best, score = id, s
			}
		}
		if err := m.Advance(best); err != nil {
			t.Fatal(err)
		}
		p, _ := tk.PieceBytes(best)
		out = append(out, p...)
	}
	return "", false
}
