package main

import (
	"math"
	"slices"
	"testing"
	"time"
)

// A DFlash round of k costs one block of k plus the verification of k+1
// rows, not k draft steps.
func TestIdealBlocks(t *testing.T) {
	verify := make([]time.Duration, 17)
	for r := range verify {
		verify[r] = 10*time.Millisecond + time.Duration(r)*time.Millisecond
	}
	blocks := []time.Duration{0, 2 * time.Millisecond, 3 * time.Millisecond}
	// k = 2 at acceptance 0.5: 1.75 tokens for 3 + 13 ms; k = 0: one
	// token for 11 ms; k = 4 is priced at the longest block measured.
	out := row{Acceptance: 0.5}
	rounds := []round{{drafted: 2, accepted: 1}, {}, {drafted: 4}}
	idealBlocks(&out, rounds, verify, blocks)
	tokens := 1.75 + 1 + (1-math.Pow(0.5, 5))/0.5
	cost := 16.0 + 11 + 3 + 15
	if want := tokens / cost * 11; math.Abs(out.Ideal-want) > 1e-9 {
		t.Errorf("ideal %g, want %g", out.Ideal, want)
	}
	if out.DraftStep != 2 || out.BlockMS[2] != 3 {
		t.Errorf("draft step %g ms, blocks %v", out.DraftStep, out.BlockMS)
	}
	if got := tokensOf([]round{{ids: []int32{1, 2}}, {}, {ids: []int32{3}}}); !slices.Equal(got, []int32{1, 2, 3}) {
		t.Errorf("tokens %v", got)
	}
}
