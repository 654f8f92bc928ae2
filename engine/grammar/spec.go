package grammar

import (
	"fmt"
	"math"
)

// MaskLogits sets the logit of every token m does not allow to -Inf, in
// place, so a sampler sees the masked distribution: softmax renormalizes
// over the allowed tokens, and argmax picks the best allowed one. Rows
// longer than the vocabulary (padded heads) lose their extra entries too.
func MaskLogits(row []float32, m Mask) {
	neg := float32(math.Inf(-1))
	for w := 0; w*64 < len(row); w++ {
		var bits uint64
		if w < len(m) {
			bits = m[w]
		}
		if bits == math.MaxUint64 {
			continue
		}
		end := min(len(row), (w+1)*64)
		for i := w * 64; i < end; i++ {
			if bits&(1<<(uint(i)&63)) == 0 {
				row[i] = neg
			}
		}
	}
}

// MaskProbs zeroes the probability of every token m does not allow and
// renormalizes the rest, in place. It reports false, leaving p zeroed where
// masked, when no allowed token has any mass (the caller then falls back to
// masking logits, or to the target alone).
func MaskProbs(p []float32, m Mask) bool {
	var sum float64
	for i := range p {
		if !m.Has(int32(i)) {
			p[i] = 0
			continue
		}
		sum += float64(p[i])
	}
	if sum <= 0 {
		return false
	}
	scale := 1 / sum
	for i := range p {
		p[i] = float32(float64(p[i]) * scale)
	}
	return true
}

// Speculate prepares one speculative step under the grammar. Given the
// drafted tokens, it returns how many of them the grammar allows in a row
// (n; the rest cannot be accepted under the mask, so the step should drop
// them) and the mask at each of the n+1 positions the target verifies:
// masks[i] is the mask after the first i drafted tokens. m itself does not
// move; after verification the caller advances it by the tokens kept.
//
// Exactness: the target's logits at position i are masked with masks[i],
// the same mask the draft's were masked with when it proposed token i (a
// drafter works from m.Fork(), masking before each pick). Greedy
// verification then keeps a drafted token exactly when it is the masked
// target's argmax, so the output equals the masked target decoding alone;
// rejection sampling with the masked p and q keeps the masked target's
// distribution.
func (m *Matcher) Speculate(drafted []int32) (masks []Mask, n int, err error) {
	f := m.Fork()
	masks = make([]Mask, 0, len(drafted)+1)
	for i, t := range drafted {
		mask, err := f.Mask()
		if err != nil {
			return nil, 0, err
		}
		masks = append(masks, mask)
		if !mask.Has(t) || f.Advance(t) != nil {
			return masks, i, nil
		}
		if f.ended {
			// Generation stops at the end token: the target's row after
			// it is never used, but must still be one it can sample.
			return append(masks, mask), i + 1, nil
		}
	}
	mask, err := f.Mask()
	if err != nil {
		return nil, 0, err
	}
	return append(masks, mask), len(drafted), nil
}

// AdvanceAll advances m by the accepted tokens of a step.
func (m *Matcher) AdvanceAll(tokens []int32) error {
	for i, t := range tokens {
		if err := m.Advance(t); err != nil {
			if rb := m.Rollback(i); rb != nil {
				return fmt.Errorf("%w (and %v)", err, rb)
			}
			return err
		}
	}
	return nil
}
