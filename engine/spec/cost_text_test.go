package spec

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// text is acceptance that follows the text being written, as the H200's
// traces show it (issue 17): a state the draft knows (0) and one it does
// not (1), each with its acceptance by drafted position (the last
// repeating deeper), and a chance per token of leaving each. Runs of
// rejections are then content, not chance: the model draft's first
// position was accepted 55% of the time after a round that accepted
// nothing and 95% after a full one, EAGLE-3's 34% and 60%. A request
// starts in the known state with chance start (a new prompt is new
// content).
type text struct {
	rates [2][]float64
	leave [2]float64
	start float64
	state int
}

func (x *text) rate(i int) float64 {
	r := x.rates[x.state]
	return r[min(i, len(r))-1]
}

// step moves the text on by one token.
func (x *text) step(rng *rand.Rand) {
	if rng.Float64() < x.leave[x.state] {
		x.state = 1 - x.state
	}
}

// The hidden states below were fitted (maximum likelihood over a grid)
// to the per-round traces of /work/.device/7 (H200, 8B Q4_K_M target,
// known prompts): the model draft at k = 4, T = 0.7, and EAGLE-3 at k = 1,
// greedy. EAGLE-3's deeper positions are its measured ratios (53/120,
// 10/48, 4/38, 0/26 at positions 1-4) applied to each state.
func modelDraftText() *text {
	return &text{rates: [2][]float64{{0.85, 0.9}, {0.05}}, leave: [2]float64{0.01, 0.08}, start: 0.9}
}

func eagle3Text() *text {
	return &text{rates: [2][]float64{{0.7, 0.3, 0.15, 0.02}, {0.1, 0.04, 0.02, 0.01}}, leave: [2]float64{0.08, 0.15}, start: 0.65}
}

// eagle3TextG is EAGLE-3's text refitted (maximum likelihood, the
// forward algorithm over the states, Nelder-Mead) to the later H200 runs
// of the same pair (/work/.device/8, the closing note's final head; F16
// and Q4_K_M drafts, k = 1 and adaptive, known prompts, greedy: 1,039
// rounds). Their adaptive rounds reached the deeper positions often, and
// these were accepted about as often as the first (positions 1-3: 150 of
// 345, 41 of 76, 18 of 40 with the F16 draft), not as eagle3Text's older
// ratios say: known text accepts 0.73, 0.63, 0.60 by position and is left
// after 7.5 tokens on average; unknown text accepts nothing and is left
// after 3.5.
func eagle3TextG() *text {
	return &text{rates: [2][]float64{{0.73, 0.63, 0.60}, {0}}, leave: [2]float64{0.13, 0.29}, start: 0.49}
}

// h200RowsG is the H200's 8B Q4_K_M target pass on that run (3.238,
// 3.674, 4.102, 4.243, 7.109 ms at 1, 2, 4, 8, 16 rows, interpolated
// between).
func h200RowsG(r int) time.Duration {
	return powersOfTwo(r, []float64{3.238, 3.674, 4.102, 4.243, 7.109})
}

// eagle3DraftG is an EAGLE-3 draft call of k steps on that run: its
// rounds' wall time less the pass of k+1 rows and 0.08 ms on the host.
// One and three steps, the lengths drafted hundreds of times, cost 0.10
// and 0.49 ms; two and four to seven, drafted a few times a row, 1.6 to
// 2.9 ms (5.4-7.5 ms rounds). Why those are dear is not known (each
// length's first runs in the load, or a slower path); the warm-up's
// seed gives the Chooser what it timed.
func eagle3DraftG(k int) time.Duration {
	ms := []float64{0, 0.10, 1.6, 0.49, 2.3, 2.6, 2.7, 2.8, 2.9}
	if k < len(ms) {
		return time.Duration(ms[k] * 1e6)
	}
	return time.Duration((2.9 + 0.1*float64(k-8)) * 1e6)
}

// textPair is a pair whose acceptance follows a text (sim.text).
type textPair struct {
	name string
	p    pair
	x    func() *text
	// seeded sizes: the engine's warm-up times draft calls of 1..8 steps
	// and passes of 1..9 rows before the first request.
	seeded bool
}

// textPairs are the pairs the simulations of acceptance that follows the
// text run: the H200's 8B target with its Q8_0 model draft at T = 0.7
// (0.106 ms a draft step on the device, 0.3 ms a token sampling on the
// host) and with its EAGLE-3 head, greedy (0.252 ms a step; and, refitted
// to the later runs, eagle3G on eagle3TextG); and the demo pair on one
// CPU thread as specbench measured it here (passes of 1, 2, 4, 8, 16
// rows: 1.636, 2.753, 4.624, 5.831, 7.735 ms; a draft step 0.191 ms),
// with its model draft and with lookup (whose draft costs nearly
// nothing, and which is not warmed up): at the acceptance its text
// gives, no length pays there, though full acceptance would.
func textPairs() []textPair {
	var c curve
	c.init(18, 1)
	for i, ms := range []float64{1.636, 2.753, 4.624, 5.831, 7.735} {
		c.add(1<<i, time.Duration(ms*1e6))
	}
	cpu := func(r int) time.Duration { return time.Duration(c.at(r)) }
	return []textPair{
		{"model draft, T=0.7", pair{step: 106 * time.Microsecond, perToken: 300 * time.Microsecond, verify: h200Rows, outside: [2]time.Duration{50 * time.Microsecond, 80 * time.Microsecond}}, modelDraftText, true},
		{"EAGLE-3, greedy", pair{step: 252 * time.Microsecond, verify: h200Rows, outside: [2]time.Duration{50 * time.Microsecond, 80 * time.Microsecond}}, eagle3Text, true},
		{"EAGLE-3, greedy, refit", eagle3G(), eagle3TextG, true},
		{"CPU demo, model draft", pair{step: 191 * time.Microsecond, verify: cpu, outside: [2]time.Duration{20 * time.Microsecond, 30 * time.Microsecond}}, modelDraftText, true},
		{"CPU demo, lookup", pair{step: 5 * time.Microsecond, verify: cpu, outside: [2]time.Duration{20 * time.Microsecond, 30 * time.Microsecond}}, modelDraftText, false},
	}
}

// eagle3G is the EAGLE-3 pair of eagle3TextG's run: its passes, its
// draft calls, the host's 0.05 and 0.08 ms a round without and with a
// draft.
func eagle3G() pair {
	return pair{step: 100 * time.Microsecond, stepAt: eagle3DraftG, verify: h200RowsG, outside: [2]time.Duration{50 * time.Microsecond, 80 * time.Microsecond}}
}

// newTextSim is a sim of a fresh load of tp: the warm-up's costs seeded
// where the engine seeds them, draft lengths up to the engine's 16.
func newTextSim(seed uint64, tp textPair) *sim {
	s := newSimWith(seed, CostOptions{MaxK: 16})
	s.text = tp.x()
	if tp.seeded {
		var c Costs
		c.Draft = make([]time.Duration, 9)
		c.Verify = make([]time.Duration, 10)
		for k := 1; k <= 8; k++ {
			c.Draft[k] = time.Duration(k) * tp.p.step
			if tp.p.stepAt != nil {
				c.Draft[k] = tp.p.stepAt(k)
			}
		}
		for r := 1; r <= 9; r++ {
			c.Verify[r] = tp.p.verify(r)
		}
		s.c.Seed(c)
	}
	return s
}

// texts plays n requests of tokens tokens each, as the engine does (Begin
// at each request's start, no draft longer than the request has left
// beyond the round's own token), and returns each request's speed over
// the target alone's.
func (s *sim) texts(p pair, n, tokens int) []float64 {
	alone := float64(p.verify(1) + p.perToken + p.outside[0])
	speeds := make([]float64, n)
	for i := range n {
		if s.rng.Float64() < s.text.start {
			s.text.state = 0
		} else {
			s.text.state = 1
		}
		s.c.Begin()
		start := s.clk.t
		for left := tokens; left > 0; {
			k := s.c.Next(s.c.o.MaxK)
			if s.fixed > 0 {
				k = s.fixed
			}
			k = max(0, min(k, left-1))
			left -= s.round(p, k, 0)
		}
		speeds[i] = float64(tokens) / float64(s.clk.t.Sub(start)) * alone
	}
	return speeds
}

// benchRows plays what packaging/bench-spec.sh measures for one row:
// fresh loads of tp (seeds of them), each running 9 requests of 64 tokens
// (three prompts, three repetitions), and returns the mean speed over the
// target alone, the lowest repetition's (three requests), and the share
// of rounds drafting.
func benchRows(tp textPair, fixed int, seeds uint64) (mean, low, drafting float64) {
	low = 1e9
	rounds := 0
	for seed := uint64(1); seed <= seeds; seed++ {
		s := newTextSim(seed, tp)
		s.fixed = fixed
		speeds := s.texts(tp.p, 9, 64)
		for r := 0; r < 9; r += 3 {
			// A repetition's speed: its three requests' tokens over
			// their time.
			low = min(low, together(speeds[r:r+3]))
		}
		mean += together(speeds) / float64(seeds)
		rounds += len(s.ks)
		drafting += float64(countDrafting(s.ks))
	}
	return mean, low, drafting / float64(rounds)
}

// together is the speed of requests of equal tokens run one after
// another, from each one's speed: their tokens over the sum of their
// times.
func together(speeds []float64) float64 {
	inv := 0.0
	for _, v := range speeds {
		inv += 1 / v
	}
	return float64(len(speeds)) / inv
}

// The Chooser on acceptance that follows the text, in the requests the
// bench runs, against every fixed length. Logged for the design record
// (cost.go's comment cites it); the tests below assert what it shows.
func TestChooserTextTable(t *testing.T) {
	if testing.Short() {
		t.Skip("a table for the design record")
	}
	var b strings.Builder
	for _, tp := range textPairs() {
		mean, low, share := benchRows(tp, 0, 200)
		fmt.Fprintf(&b, "%-22s adaptive %.3fx (lowest repetition %.3f, drafting %.0f%%)", tp.name, mean, low, 100*share)
		bestK, best := 0, 0.0
		for k := 1; k <= 8; k++ {
			if v, _, _ := benchRows(tp, k, 40); v > best {
				bestK, best = k, v
			}
		}
		one, _, _ := benchRows(tp, 1, 40)
		fmt.Fprintf(&b, "; best fixed k=%d %.3fx; k=1 %.3fx\n", bestK, best, one)
	}
	t.Log("\n" + b.String())
}

// After a collapse long enough that failed probes stretched the wait to
// its longest, a new request in text the draft knows drafts again from
// its first rounds: a new prompt is new content, so Begin makes a probe
// due. (Without it, the H200's 8B pair at T = 0.7 drafted nothing for
// three whole requests of 64 tokens after one collapse: 1.00x in a
// repetition where the others made 2.38x and 1.68x.)
func TestChooserProbesAtBegin(t *testing.T) {
	tp := textPairs()[0]
	known := &text{rates: [2][]float64{{0.9}, {0.9}}}
	unknown := &text{rates: [2][]float64{{0}, {0}}}
	back := 0
	const seeds = 20
	for seed := uint64(1); seed <= seeds; seed++ {
		s := newTextSim(seed, tp)
		s.text = known
		s.texts(tp.p, 2, 64)
		s.text = unknown
		s.texts(tp.p, 12, 64)
		if s.c.Decision().Drafting {
			t.Fatalf("seed %d: drafting after 12 requests that accepted nothing: %+v", seed, s.c.Decision())
		}
		n := len(s.ks)
		s.text = known
		s.texts(tp.p, 1, 64)
		if r := s.ks[n:]; countDrafting(r) >= len(r)-2 {
			back++
		}
	}
	t.Logf("the next request drafted in all but 2 rounds at most on %d of %d seeds", back, seeds)
	// A probe is rejected one time in ten at this acceptance.
	if back < seeds*3/4 {
		t.Errorf("a request in known text drafted in all but 2 rounds at most on %d of %d seeds", back, seeds)
	}
}

// On acceptance that follows the text (runs of rejections where the text
// leaves what the draft knows), in the bench's requests: the model draft
// at T = 0.7 on the H200's 8B target does not fall to the target alone
// in a whole repetition (on main its lowest of 200 fresh loads was
// 0.99x, as the H200 measured once), and EAGLE-3, whose k = 1 rounds pay
// 1.19x and whose runs of first-token rejections turned drafting off for
// long, comes within 4% of k = 1 (on main 5%).
func TestChooserFollowsText(t *testing.T) {
	tps := textPairs()
	mean, low, _ := benchRows(tps[0], 0, 200)
	fixed, _, _ := benchRows(tps[0], 7, 200)
	t.Logf("%s: adaptive %.3fx (lowest repetition %.3fx); k = 7 %.3fx", tps[0].name, mean, low, fixed)
	if low < 1.1 || mean < 0.93*fixed {
		t.Errorf("%s: adaptive %.3fx (lowest repetition %.3fx) against k = 7's %.3fx", tps[0].name, mean, low, fixed)
	}
	mean, _, _ = benchRows(tps[1], 0, 200)
	fixed, _, _ = benchRows(tps[1], 1, 200)
	t.Logf("%s: adaptive %.3fx; k = 1 %.3fx", tps[1].name, mean, fixed)
	if mean < 0.96*fixed {
		t.Errorf("%s: adaptive %.3fx against k = 1's %.3fx", tps[1].name, mean, fixed)
	}
	// Refitted to the later runs, EAGLE-3's deeper positions pay now and
	// then, and the adaptive length is at least k = 1's.
	mean, _, _ = benchRows(tps[2], 0, 200)
	fixed, _, _ = benchRows(tps[2], 1, 200)
	t.Logf("%s: adaptive %.3fx; k = 1 %.3fx", tps[2].name, mean, fixed)
	if mean < 0.995*fixed {
		t.Errorf("%s: adaptive %.3fx against k = 1's %.3fx", tps[2].name, mean, fixed)
	}
}

// EAGLE-3 on the H200's 8B target (eagle3G), in text it knows (the
// first position accepted 0.6, the next 0.5), after three requests: a
// dip of 8 to 12 rounds that accept nothing (the text the draft does not
// know, as the H200's runs show them), then 30 rounds of the known text.
// Without the step down (hold), drafting turned off in the dips and
// waited ProbeAfter rounds for a probe in text the draft knew again: 399
// rounds without a draft after 250 dips, 1.258x the target alone; with
// it, 198, 1.266x.
func TestChooserStepsDownThroughDips(t *testing.T) {
	p := eagle3G()
	known := func() *text { return &text{rates: [2][]float64{{0.6, 0.5}, {0}}, start: 1} }
	offs, runs, speed := 0, 0, 0.0
	for dip := 8; dip <= 12; dip++ {
		for seed := uint64(1); seed <= 50; seed++ {
			s := newTextSim(seed, textPair{"dip", p, known, true})
			s.texts(p, 3, 64)
			n, start, tokens := len(s.ks), s.clk.t, 0
			s.text.state = 1
			for range dip {
				tokens += s.round(p, s.c.Next(16), 0)
			}
			s.text.state = 0
			for range 30 {
				tokens += s.round(p, s.c.Next(16), 0)
			}
			r := s.ks[n:]
			offs += len(r) - countDrafting(r)
			runs++
			speed += float64(tokens) / float64(s.clk.t.Sub(start)) * float64(p.verify(1)+p.outside[0])
		}
	}
	speed /= float64(runs)
	t.Logf("%d rounds without a draft after %d dips; %.3fx the target alone", offs, runs, speed)
	if offs > runs*6/5 {
		t.Errorf("%d rounds without a draft after %d dips", offs, runs)
	}
}
