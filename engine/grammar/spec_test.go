package grammar

import (
	"hash/fnv"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/tandem-run/tandem/engine/sample"
	"github.com/tandem-run/tandem/engine/spec"
)

// toyModel gives fake logits that depend on the whole history, like a
// model: a hash of the history seeds them. A draft is the target with
// noise, so it is often but not always right.
type toyModel struct {
	vocab int
	seed  uint64
	noise float64
	base  *toyModel
}

func (m *toyModel) logits(history []int32) []float32 {
	var out []float32
	if m.base != nil {
		out = m.base.logits(history)
	} else {
		out = make([]float32, m.vocab)
	}
	h := fnv.New64a()
	for _, t := range history {
		h.Write([]byte{byte(t), byte(t >> 8)})
	}
	rng := rand.New(rand.NewPCG(h.Sum64(), m.seed))
	scale := 4.0
	if m.base != nil {
		scale = m.noise
	}
	for i := range out {
		out[i] += float32(rng.NormFloat64() * scale)
	}
	return out
}

// maskedGreedy decodes with the masked target alone.
func maskedGreedy(t *testing.T, c *Constraint, target *toyModel, limit int) []int32 {
	m := c.NewMatcher()
	var out []int32
	for len(out) < limit && !m.Ended() {
		mask, err := m.Mask()
		if err != nil {
			t.Fatal(err)
		}
		l := target.logits(out)
		MaskLogits(l, mask)
		tok := sample.Argmax(l)
		if err := m.Advance(tok); err != nil {
			t.Fatal(err)
		}
		out = append(out, tok)
	}
	return out
}

// maskedSpeculative decodes greedily with k drafted tokens a step, as the
// engine will: the draft masks its own logits through a fork of the
// matcher (or, maskDraft false, proposes unmasked like prompt lookup),
// Speculate cuts the draft and gives the target's masks.
func maskedSpeculative(t *testing.T, c *Constraint, target, draft *toyModel, k, limit int, maskDraft bool) (out []int32, drafted, accepted int) {
	m := c.NewMatcher()
	for len(out) < limit && !m.Ended() {
		var proposal []int32
		dm := m.Fork()
		for range k {
			l := draft.logits(append(slices.Clone(out), proposal...))
			if maskDraft {
				mask, err := dm.Mask()
				if err != nil {
					t.Fatal(err)
				}
				MaskLogits(l, mask)
			}
			tok := sample.Argmax(l)
			proposal = append(proposal, tok)
			if maskDraft {
				if err := dm.Advance(tok); err != nil {
					t.Fatal(err)
				}
				if dm.Ended() {
					break
				}
			}
		}
		masks, n, err := m.Speculate(proposal)
		if err != nil {
			t.Fatal(err)
		}
		proposal = proposal[:n]
		ids := make([]int32, n+1)
		for i := range ids {
			l := target.logits(append(slices.Clone(out), proposal[:i]...))
			MaskLogits(l, masks[i])
			ids[i] = sample.Argmax(l)
		}
		a := spec.GreedyAccepted(proposal, ids)
		drafted += n
		accepted += a
		step := append(proposal[:a:a], ids[a])
		for _, tok := range step {
			if len(out) >= limit || m.Ended() {
				break
			}
			if err := m.Advance(tok); err != nil {
				t.Fatal(err)
			}
			out = append(out, tok)
		}
	}
	return out, drafted, accepted
}

// Greedy speculative decoding under a grammar mask gives exactly what the
// masked target gives alone, for drafts that mask themselves and for
// drafts that do not.
func TestMaskedSpeculationIsExact(t *testing.T) {
	bv := newByteVocab(`{"`, `":`, `", "`, `true`, `name`, `tags`, `["`, `"]`, `": "`)
	v := NewVocab(bv)
	c := compileFor(t, schemaCases[0].schema, v)
	for seed := range uint64(6) {
		target := &toyModel{vocab: bv.VocabSize(), seed: seed}
		draft := &toyModel{vocab: bv.VocabSize(), seed: seed + 100, noise: 1.5, base: target}
		want := maskedGreedy(t, c, target, 200)
		for _, maskDraft := range []bool{true, false} {
			for _, k := range []int{1, 3, 6} {
				got, drafted, accepted := maskedSpeculative(t, c, target, draft, k, 200, maskDraft)
				if !slices.Equal(got, want) {
					t.Fatalf("seed %d k=%d maskDraft=%v:\n got %q\nwant %q", seed, k, maskDraft, decodeBytes(bv, got), decodeBytes(bv, want))
				}
				if maskDraft && accepted == 0 {
					t.Errorf("seed %d k=%d: no drafted token accepted of %d: the test proves little", seed, k, drafted)
				}
			}
		}
	}
}

func decodeBytes(v byteVocab, ids []int32) string {
	var s []byte
	for _, id := range ids {
		s = append(s, v.pieces[id]...)
	}
	return string(s)
}

// Sampled speculation under a mask keeps the masked target's distribution:
// over many draws, the first token's frequencies match masked p.
func TestMaskedSamplingKeepsTheTargetDistribution(t *testing.T) {
	bv := newByteVocab()
	g, err := CompileGBNF(`root ::= [a-f] "."`)
	if err != nil {
		t.Fatal(err)
	}
	c, err := NewConstraint(g, NewVocab(bv))
	if err != nil {
		t.Fatal(err)
	}
	m := c.NewMatcher()
	rng := rand.New(rand.NewPCG(7, 8))
	n := bv.VocabSize()
	softmax := func(l []float32) []float32 {
		p := make([]float32, n)
		mx := float32(math.Inf(-1))
		for _, x := range l {
			mx = max(mx, x)
		}
		var sum float64
		for i, x := range l {
			p[i] = float32(math.Exp(float64(x - mx)))
			sum += float64(p[i])
		}
		for i := range p {
			p[i] = float32(float64(p[i]) / sum)
		}
		return p
	}
	tl, dl := make([]float32, n), make([]float32, n)
	for i := range n {
		tl[i], dl[i] = float32(rng.NormFloat64()), float32(rng.NormFloat64())
	}
	for _, b := range "abc" { // the draft likes tokens the target does not
		dl[b] += 2
	}
	masks, _, err := m.Speculate(nil)
	if err != nil {
		t.Fatal(err)
	}
	MaskLogits(tl, masks[0])
	MaskLogits(dl, masks[0])
	p, q := softmax(tl), softmax(dl)
	const draws = 200_000
	counts := make([]int, n)
	for range draws {
		d := sample.Draw(q, rng.Float64())
		tok := d
		if !spec.Accept(p, q, d, rng.Float64()) {
			tok = spec.Residual(p, q, rng.Float64())
		}
		if !masks[0].Has(tok) {
			t.Fatalf("token %q outside the mask", rune(tok))
		}
		counts[tok]++
	}
	for b := 'a'; b <= 'f'; b++ {
		want := float64(p[b])
		got := float64(counts[b]) / draws
		sigma := math.Sqrt(want * (1 - want) / draws)
		if math.Abs(got-want) > 5*sigma+1e-9 {
			t.Errorf("%c: frequency %.4f, masked target %.4f", b, got, want)
		}
	}
}

func TestMaskLogitsAndProbs(t *testing.T) {
	mask := newMask(130)
	mask.set(3)
	mask.set(70)
	row := make([]float32, 140) // a padded head: 10 more than the vocabulary
	for i := range row {
		row[i] = float32(i)
	}
	MaskLogits(row, mask)
	for i, x := range row {
		if want := i == 3 || i == 70; want != !math.IsInf(float64(x), -1) {
			t.Errorf("logit %d = %v", i, x)
		}
	}
	p := make([]float32, 130)
	for i := range p {
		p[i] = 1.0 / 130
	}
	if !MaskProbs(p, mask) || p[3] != 0.5 || p[70] != 0.5 || p[4] != 0 {
		t.Errorf("masked probs %v %v %v", p[3], p[70], p[4])
	}
	if MaskProbs(make([]float32, 130), mask) {
		t.Error("no mass reported as masked fine")
	}
}
