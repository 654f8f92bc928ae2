package spec

import (
	"math"
	"testing"
	"time"
)

// seedOf is the costs of p for draft lengths 1..maxK, as a warm-up would
// measure them.
func seedOf(p pair, maxK int) Costs {
	s := Costs{Draft: make([]time.Duration, maxK+1), Verify: make([]time.Duration, maxK+2)}
	for k := 1; k <= maxK; k++ {
		s.Draft[k] = time.Duration(k) * p.step
	}
	for r := 1; r <= maxK+1; r++ {
		s.Verify[r] = p.verify(r)
	}
	return s
}

// A Chooser seeded with costs decides its first round on them and the
// prior acceptance: where drafting loses it does not draft at all (and
// says why); where it pays it drafts from the first round, at the length
// that is best for the prior, not StartK.
func TestChooserSeeded(t *testing.T) {
	t.Run("loses", func(t *testing.T) {
		s := newSim(1)
		p := pair{step: 12 * time.Millisecond, verify: linear(10*time.Millisecond, time.Millisecond), accept: 0.9}
		s.c.Seed(seedOf(p, 8))
		if d := s.c.Decision(); d.Drafting || d.K != 0 || d.Reason != ReasonCosts || d.Verify1 != p.verify(1) {
			t.Errorf("seeded decision %+v", d)
		}
		s.run(p, 4)
		if countDrafting(s.ks) != 0 {
			t.Errorf("first rounds drafted %v", s.ks)
		}
	})
	t.Run("pays", func(t *testing.T) {
		s := newSim(2)
		p := pair{step: time.Millisecond, verify: linear(10*time.Millisecond, time.Millisecond), accept: 0.9}
		s.c.Seed(seedOf(p, 8))
		d := s.c.Decision()
		// The best length for the prior, by the round's expected tokens
		// over its cost, computed here from the seeded costs.
		a := d.Acceptance
		bestK, bestRate := 0, 0.0
		for k := 1; k <= 8; k++ {
			tokens := (1 - math.Pow(a, float64(k+1))) / (1 - a)
			if r := tokens / float64(time.Duration(k)*p.step+p.verify(k+1)); r > bestRate {
				bestK, bestRate = k, r
			}
		}
		if bestK == s.c.o.StartK {
			t.Fatalf("the test's costs make StartK (%d) the best length: they cannot tell a seeded first round from a blind one", bestK)
		}
		if !d.Drafting || d.Reason != "" || d.K != bestK {
			t.Errorf("seeded decision %+v, want k = %d at acceptance %.2f", d, bestK, a)
		}
		s.run(p, 1)
		if s.ks[0] != bestK {
			t.Errorf("first round drafted %d, want %d", s.ks[0], bestK)
		}
	})
	t.Run("target alone only", func(t *testing.T) {
		// Without a draft call's cost the first round cannot be priced:
		// it drafts StartK to measure it, as an unseeded Chooser does.
		s := newSim(3)
		p := pair{step: time.Millisecond, verify: linear(10*time.Millisecond, time.Millisecond), accept: 0.9}
		seed := seedOf(p, 8)
		seed.Draft = nil
		s.c.Seed(seed)
		if k := s.c.Next(8); k != s.c.o.StartK {
			t.Errorf("first round drafts %d, want StartK %d", k, s.c.o.StartK)
		}
	})
}

// A Chooser seeded to draft from its first round prices the target alone
// by its seeded one-row pass until a round without a draft is measured:
// the host work of drafting rounds is not the target alone's.
func TestChooserSeededPricesAloneApart(t *testing.T) {
	s := newSim(4)
	p := pair{step: time.Millisecond, verify: linear(10*time.Millisecond, time.Millisecond), accept: 0.9,
		outside: [2]time.Duration{0, 3 * time.Millisecond}}
	s.c.Seed(seedOf(p, 8))
	s.run(p, 10)
	if n := countDrafting(s.ks); n != len(s.ks) {
		t.Fatalf("drafted in %d of %d rounds: %v", n, len(s.ks), s.ks)
	}
	if d := s.c.Decision(); d.Alone != p.verify(1) {
		t.Errorf("the target alone priced at %v, want its one-row pass's %v", d.Alone, p.verify(1))
	}
}

// A seeded size whose rounds cost what its seed did not (the H200's
// EAGLE-3 draft of two steps: 5.4-6.2 ms rounds where three steps take
// 4.7) takes its own cost after settle measurements of it: the fastest of
// them, dearer or cheaper than the seed. Counted as later measurements of
// a settled size, each moved it 6% at most (curve.add), and a length
// timed cheap at the warm-up was drafted at a loss for the whole load.
func TestChooserRemeasuresSeeds(t *testing.T) {
	clk := &fakeClock{t: time.Unix(0, 0)}
	c := NewChooser(CostOptions{Now: clk.now})
	c.Seed(Costs{Draft: []time.Duration{0, 100 * time.Microsecond, 300 * time.Microsecond, 450 * time.Microsecond},
		Verify: []time.Duration{0, 3 * time.Millisecond, 3400 * time.Microsecond}})
	draft := func(steps int, d time.Duration) {
		t0 := c.Now()
		clk.t = clk.t.Add(d)
		c.Drafted(t0, steps)
	}
	for i, d := range []time.Duration{1700 * time.Microsecond, 1600 * time.Microsecond, 1900 * time.Microsecond} {
		if got := time.Duration(c.draft.at(2)); got != 300*time.Microsecond {
			t.Fatalf("after %d measurements of 2 steps, %v, want the seed's 300µs", i, got)
		}
		draft(2, d)
	}
	if got := time.Duration(c.draft.at(2)); got != 1600*time.Microsecond {
		t.Errorf("after settle measurements of 2 steps, %v, want their fastest 1.6ms", got)
	}
	// Cheaper than the seed: taken as well.
	for range settle {
		draft(3, 400*time.Microsecond)
	}
	if got := time.Duration(c.draft.at(3)); got != 400*time.Microsecond {
		t.Errorf("three steps %v, want 400µs", got)
	}
	// Past that, as any settled size: a rise counts at most a quarter.
	draft(2, 10*time.Millisecond)
	if got, want := c.draft.at(2), 1600e3*(1+0.25*(rise-1)); math.Abs(got-want) > 1 {
		t.Errorf("after a stall, %v ns, want %v", got, want)
	}
}
