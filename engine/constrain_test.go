package engine

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/tandem-run/tandem/engine/chat"
	"github.com/tandem-run/tandem/engine/grammar"
	"github.com/tandem-run/tandem/engine/internal/schematest"
	"github.com/tandem-run/tandem/engine/sample"
)

func schemaConstraint(t *testing.T, r *Runner, schema string) *grammar.Constraint {
	t.Helper()
	c, err := r.Constraint("schema:"+schema, func() (*grammar.Grammar, error) { return grammar.FromSchema([]byte(schema)) })
	if err != nil {
		t.Fatal(err)
	}
	return c
}

type constrainedRun struct {
	ids   []int32
	text  string
	stats Stats
}

func runConstrained(t *testing.T, r *Runner, req Request) constrainedRun {
	t.Helper()
	var out constrainedRun
	st, err := r.Generate(context.Background(), req, func(e Event) {
		out.ids = append(out.ids, e.IDs...)
		out.text += e.Text
	})
	if err != nil {
		t.Fatal(err)
	}
	out.stats = st
	return out
}

// maskedGreedy decodes greedily by hand: each step runs the target on the
// last token (Forward, no drafts), masks its row with a fresh matcher's
// mask and takes the argmax: the masked target alone, written
// independently of the generation loop.
func maskedGreedy(t *testing.T, r *Runner, prompt []int32, c *grammar.Constraint, maxTokens int) []int32 {
	t.Helper()
	m := c.NewMatcher()
	next, pos := prompt, 0
	var out []int32
	for len(out) < maxTokens && !m.Done() {
		logits, err := r.Forward(context.Background(), next, pos, nil)
		if err != nil {
			t.Fatal(err)
		}
		mask, err := m.Mask()
		if err != nil {
			t.Fatal(err)
		}
		row := slices.Clone(logits)
		grammar.MaskLogits(row, mask)
		tok := int32(sample.Argmax(row))
		if err := m.Advance(tok); err != nil {
			t.Fatal(err)
		}
		out = append(out, tok)
		pos += len(next)
		next = []int32{tok}
		if r.tok.IsEOG(tok) {
			break
		}
	}
	return out
}

// Under a JSON schema, greedy output with every kind of draft is token for
// token the masked target's alone (decoded by hand), it validates against
// the schema, and drafts are still accepted under the mask.
func TestConstrainedGreedyIsTheMaskedTargets(t *testing.T) {
	target := modelPath(t, "factory-target-Q8_0.gguf")
	runners := map[string]*Runner{
		"draft Q8_0": load(t, Config{Target: target, Draft: modelPath(t, "factory-draft-Q8_0.gguf")}),
		"lookup":     load(t, Config{Target: target, Lookup: true}),
		"EAGLE-3":    load(t, Config{Target: modelPath(t, "factory-target-F16.gguf"), Draft: modelPath(t, "factory-eagle3-F16.gguf")}),
	}
	valid := schematest.Validator(t, schematest.Person)
	msgs := []chat.Message{{Role: "user", Content: "Tell me a fortune."}}
	const maxTokens = 256
	for name, r := range runners {
		c := schemaConstraint(t, r, schematest.Person)
		prompt, err := r.promptTokens(context.Background(), Request{Messages: msgs, Constraint: c})
		if err != nil {
			t.Fatal(err)
		}
		want := maskedGreedy(t, r, prompt, c, maxTokens)
		// A fixed length: the count of accepted drafts below must not
		// hang on whether drafting pays on this machine.
		req := Request{Messages: msgs, MaxTokens: maxTokens, Constraint: c, Drafting: Drafting{Max: 4, Min: 4, PMin: -1}}
		alone := runConstrained(t, r, Request{Messages: msgs, MaxTokens: maxTokens, Constraint: c, NoDraft: true})
		spec := runConstrained(t, r, req)
		if !slices.Equal(alone.ids, want) || !slices.Equal(spec.ids, want) {
			t.Errorf("%s: by hand %v\nalone %v\nspeculative %v", name, want, alone.ids, spec.ids)
		}
		if err := valid(spec.text); err != nil || spec.stats.FinishReason != "stop" {
			t.Errorf("%s: %q (%s): %v", name, spec.text, spec.stats.FinishReason, err)
		}
		if spec.stats.Accepted == 0 {
			t.Errorf("%s: no draft accepted under the mask: %+v", name, spec.stats)
		}
		t.Logf("%s: %q, drafted %d accepted %d in %d steps", name, spec.text, spec.stats.Drafted, spec.stats.Accepted, spec.stats.Steps)
	}
}

// Sampled output under a schema validates for every seed, with the draft
// and without, and with penalties (which the sampler applies on masked
// logits).
func TestConstrainedSampledValidates(t *testing.T) {
	r := load(t, Config{Target: modelPath(t, "factory-target-Q8_0.gguf"), Draft: modelPath(t, "factory-draft-Q8_0.gguf")})
	c := schemaConstraint(t, r, schematest.Person)
	valid := schematest.Validator(t, schematest.Person)
	msgs := []chat.Message{{Role: "user", Content: "Quote Genesis 1:3."}}
	for seed := range uint64(6) {
		s := Sampling{Temperature: 0.9, TopK: 40, Seed: seed}
		if seed%3 == 2 {
			s.RepeatPenalty = 1.2
		}
		for _, noDraft := range []bool{false, true} {
			// An array of strings may take many tokens at a high
			// temperature: the budget is generous, the check exact.
			got := runConstrained(t, r, Request{Messages: msgs, MaxTokens: 300, Constraint: c, Sampling: s, NoDraft: noDraft})
			if err := valid(got.text); err != nil || got.stats.FinishReason != "stop" {
				t.Errorf("seed %d, no draft %v: %q (%s): %v", seed, noDraft, got.text, got.stats.FinishReason, err)
			}
		}
	}
}

// A grammar ends generation once its output is complete, even when the
// request ignores the end-of-generation token; a grammar of the empty text
// ends it before the model runs.
func TestConstrainedStopsWhenComplete(t *testing.T) {
	r := load(t, Config{Target: modelPath(t, "factory-target-Q8_0.gguf"), Draft: modelPath(t, "factory-draft-Q8_0.gguf")})
	for _, c := range []struct {
		gbnf, want string
	}{
		{`root ::= "yes" | "no"`, ""},
		{`root ::= "In the beginning"`, "In the beginning"},
		{`root ::= ""`, ""},
	} {
		con, err := r.Constraint("gbnf:"+c.gbnf, func() (*grammar.Grammar, error) { return grammar.CompileGBNF(c.gbnf) })
		if err != nil {
			t.Fatal(err)
		}
		got := runConstrained(t, r, Request{Prompt: "Tell me", MaxTokens: 50, IgnoreEOS: true, Constraint: con})
		if got.stats.FinishReason != "stop" || c.want != "" && got.text != c.want || c.want == "" && c.gbnf != `root ::= ""` && got.text != "yes" && got.text != "no" {
			t.Errorf("%s: %q (%s)", c.gbnf, got.text, got.stats.FinishReason)
		}
	}
}

// A constraint made by another runner is refused (its token ids index
// another vocabulary), and a template without tool syntax refuses tools
// instead of rendering them as ChatML.
func TestConstraintAndToolsRefused(t *testing.T) {
	a := load(t, Config{Target: modelPath(t, "factory-target-Q8_0.gguf")})
	b := load(t, Config{Target: modelPath(t, "factory-target-Q4_K_M.gguf")})
	c := schemaConstraint(t, a, schematest.Person)
	if _, err := b.Generate(context.Background(), Request{Prompt: "x", Constraint: c}, nil); err == nil {
		t.Error("another runner's constraint was used")
	}
	tools, err := chat.ParseTools(json.RawMessage(`[{"type": "function", "function": {"name": "f"}}]`))
	if err != nil {
		t.Fatal(err)
	}
	_, err = a.Generate(context.Background(), Request{Messages: []chat.Message{{Role: "user", Content: "hi"}}, Tools: tools, ChatMLFallback: true}, nil)
	if err == nil || !strings.Contains(err.Error(), chat.ErrNoTools.Error()) {
		t.Errorf("tools on a ChatML template: %v", err)
	}
	if a.ToolSyntax() != chat.NoToolSyntax {
		t.Errorf("ToolSyntax %v", a.ToolSyntax())
	}
	// A grammar that allows nothing is refused when the constraint is made.
	_, err = a.Constraint("gbnf:loop", func() (*grammar.Grammar, error) { return grammar.CompileGBNF("root ::= \"a\" root") })
	if !errors.Is(err, grammar.ErrEmpty) {
		t.Errorf("a grammar of nothing: %v", err)
	}
	if caches, n := a.KVCaches(); len(caches) == 0 || n == 0 || caches[0].Bytes <= 0 || caches[0].Owner != "target" {
		t.Errorf("KV caches %+v, context %d", caches, n)
	}
}
