package engine

import (
	"errors"
	"fmt"
	"sync"

	"github.com/tandem-run/tandem/engine/chat"
	"github.com/tandem-run/tandem/engine/grammar"
	"github.com/tandem-run/tandem/engine/sample"
	"github.com/tandem-run/tandem/kernels"
)

// grammarCacheSize is how many compiled grammars a runner keeps: clients
// repeat a handful of schemas and tool lists, each a few states to a few
// thousand masks.
const grammarCacheSize = 64

// grammars are a runner's compiled constraints. The vocabulary index is
// built on the first constrained request (tens of milliseconds on a 151k
// vocabulary), so a runner that never sees one never pays for it.
type grammars struct {
	once  sync.Once
	vocab *grammar.Vocab
	cache *grammar.Cache
}

// Constraint returns the constraint kept under key (a text naming the
// grammar: "schema:"+schema, "gbnf:"+source), or compiles the grammar
// build makes and keeps it. It does not wait for a running generation. A
// grammar whose first token no token of the vocabulary can write is an
// error wrapping grammar.ErrEmpty, found here rather than mid-generation.
func (r *Runner) Constraint(key string, build func() (*grammar.Grammar, error)) (*grammar.Constraint, error) {
	c, err := r.grammarCache().Get(key, build)
	if err != nil {
		return nil, err
	}
	if _, err := c.NewMatcher().Mask(); err != nil {
		return nil, err
	}
	return c, nil
}

func (r *Runner) grammarCache() *grammar.Cache {
	g := &r.grammars
	g.once.Do(func() {
		g.vocab = grammar.NewVocab(r.tok)
		g.cache = grammar.NewCache(g.vocab, grammarCacheSize)
	})
	return g.cache
}

// ToolSyntax is how the model's chat template writes tool calls;
// chat.NoToolSyntax when it has no template or shows no tools.
func (r *Runner) ToolSyntax() chat.ToolSyntax {
	if r.template == nil {
		return chat.NoToolSyntax
	}
	return r.template.ToolSyntax()
}

// checkConstraint refuses a constraint made over another vocabulary (by
// another runner's Constraint): its token ids would mean other text.
func (r *Runner) checkConstraint(c *grammar.Constraint) error {
	if c == nil {
		return nil
	}
	if r.grammarCache(); c.Vocab() != r.grammars.vocab {
		return errors.New("engine: the constraint was not made by this runner's Constraint")
	}
	return nil
}

// KVCache is the memory the attention caches of one model hold on one
// device.
type KVCache struct {
	Device int
	Owner  string // "target" or "draft"
	Bytes  int64
}

// KVCaches lists the KV caches by device and owner, and the context (in
// tokens) they are sized for. The caches are allocated at load and keep
// their size, so a server can read this once.
func (r *Runner) KVCaches() ([]KVCache, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.target == nil {
		return nil, 0
	}
	var out []KVCache
	for d, u := range r.DeviceUsage() {
		for l, n := range u {
			if l.Cat == kernels.KV && n > 0 {
				out = append(out, KVCache{Device: d, Owner: l.Owner, Bytes: n})
			}
		}
	}
	return out, r.target.m.Context()
}

// The hooks below are how a grammar enters the generation loop
// (generate.go, drafter.go): masks before each pick, the matcher advanced
// by each token kept.

// pickUnder is pick with the draft's logits masked by m's state first
// (nil m: no grammar), so the draft proposes only what the grammar allows
// and its distribution q is the masked one the verifier compares with the
// masked target's.
func pickUnder(m *grammar.Matcher, s *sample.Sampler, logits []float32, history []int32, dists [][]float32, i int) (int32, float64, error) {
	if m != nil {
		mask, err := m.Mask()
		if err != nil {
			return 0, 0, fmt.Errorf("engine: draft: %w", err)
		}
		grammar.MaskLogits(logits, mask)
	}
	return pick(s, logits, history, dists, i)
}

// draftedUnder advances the draft's matcher by a proposal it keeps and
// reports whether drafting must stop there: the grammar is complete, so
// the only continuation is the end, which the target decides.
func draftedUnder(m *grammar.Matcher, t int32) (stop bool, err error) {
	if m == nil {
		return false, nil
	}
	if err := m.Advance(t); err != nil {
		return true, fmt.Errorf("engine: draft: %w", err)
	}
	return m.Done(), nil
}

// forkMatcher is the drafter's copy of the generation's matcher, or nil.
func (g *generation) forkMatcher() *grammar.Matcher {
	if g.m == nil {
		return nil
	}
	return g.m.Fork()
}

// speculate cuts the drafts where the grammar refuses one (the target
// could not accept it under the mask) and returns the mask of each row
// the target will verify; nil without a grammar.
func (g *generation) speculate(drafted []int32, dists [][]float32) ([]int32, [][]float32, []grammar.Mask, error) {
	if g.m == nil {
		return drafted, dists, nil, nil
	}
	masks, n, err := g.m.Speculate(drafted)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("engine: %w", err)
	}
	if dists != nil {
		dists = dists[:n]
	}
	return drafted[:n], dists, masks, nil
}

// maskRows masks each verified row of logits with its grammar state.
func maskRows(logits []float32, masks []grammar.Mask) {
	if len(masks) == 0 {
		return
	}
	vocab := len(logits) / len(masks)
	for i, m := range masks {
		grammar.MaskLogits(logits[i*vocab:(i+1)*vocab], m)
	}
}

// advanceGrammar moves the matcher by the tokens a step accepted and cuts
// them after the one that completes the output: nothing but the end may
// follow it, and generation stops there.
func (g *generation) advanceGrammar(out []int32) ([]int32, error) {
	if g.m == nil {
		return out, nil
	}
	for i, t := range out {
		if err := g.m.Advance(t); err != nil {
			return nil, fmt.Errorf("engine: %w", err)
		}
		if g.m.Done() {
			return out[:i+1], nil
		}
	}
	return out, nil
}

// grammarComplete reports whether a grammar holds the output and the
// output is complete.
func (g *generation) grammarComplete() bool { return g.m != nil && g.m.Done() }
