package spec

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// fakeClock is a clock the simulated pair advances by its costs.
type fakeClock struct{ t time.Time }

func (f *fakeClock) now() time.Time { return f.t }

// pair is a simulated draft and target: fixed costs, and drafted tokens
// accepted one after another each with probability accept.
type pair struct {
	step   time.Duration                // one draft step
	verify func(rows int) time.Duration // one target pass
	stepAt func(k int) time.Duration    // a draft call of k steps, when not k*step
	accept float64
	// positions, when set, is the chance of acceptance at each drafted
	// position given all before it were accepted (the last repeats
	// deeper), in place of accept.
	positions []float64
	// perToken is host work a verification does per token it makes
	// (sampling a row's distribution over a large vocabulary).
	perToken time.Duration
	// catchUp is what a draft call costs more after rounds that did
	// not draft: it first runs the tokens it missed (and the engine
	// reports no steps for it).
	catchUp time.Duration
	// catchUpAt, when set, is each catch-up's cost in place of catchUp.
	catchUpAt func() time.Duration
	// onePass reports every draft call as one step (a DFlash block as the
	// engine used to report it).
	onePass bool
	// outside is the host's work a round does outside its draft and
	// target calls, by whether it drafts ([1]) or not ([0]).
	outside [2]time.Duration
	// capture is what a target pass costs more while it captures states
	// for a head-sharing draft: every drafting round's, and a round
	// without a draft's when the Chooser says one may come soon
	// (MayDraftSoon, as the engine pauses the capture).
	capture time.Duration
	// hiccup is added to the target pass of every hiccupEvery-th round:
	// a host that the OS or other work stalls now and then.
	hiccup      time.Duration
	hiccupEvery int
}

// at is the chance that drafted position i is accepted given all before
// it were, where a round's acceptance is a.
func (p pair) at(i int, a float64) float64 {
	if len(p.positions) == 0 {
		return a
	}
	return p.positions[min(i, len(p.positions))-1]
}

func linear(base, perRow time.Duration) func(int) time.Duration {
	return func(r int) time.Duration { return base + time.Duration(r)*perRow }
}

// sim drives a Chooser as the engine will (cost.go's design note).
type sim struct {
	c     *Chooser
	clk   *fakeClock
	rng   *rand.Rand
	start time.Time
	ks    []int
	fixed int // draft this many every round, whatever the chooser says
	// roundAccept, when set, draws each round's acceptance (requests).
	roundAccept func() float64
	// capturedAlone times a one-row pass that captured as any other (the
	// engine before VerifiedCapturing), and captures while the target
	// alone is not yet timed (MayDraftSoon then said yes).
	capturedAlone bool
	// text, when set, draws each drafted position's acceptance from the
	// text's state (cost_text_test.go), moving it on a token at a time.
	text *text
}

func newSim(seed uint64) *sim { return newSimWith(seed, CostOptions{}) }

func newSimWith(seed uint64, o CostOptions) *sim {
	clk := &fakeClock{t: time.Unix(0, 0)}
	o.Now = clk.now
	return &sim{c: NewChooser(o), clk: clk, rng: rand.New(rand.NewPCG(seed, 1)), start: clk.t}
}

// run plays rounds rounds of p and returns the tokens per second they made
// over the target alone's.
func (s *sim) run(p pair, rounds int) float64 {
	start, tokens := s.clk.t, 0
	for range rounds {
		k := s.c.Next(s.c.o.MaxK)
		if s.fixed > 0 {
			k = s.fixed
		}
		tokens += s.round(p, k, p.accept)
	}
	rate := float64(tokens) / float64(s.clk.t.Sub(start))
	return rate * float64(p.verify(1)+p.perToken+p.outside[0])
}

// round plays one round drafting k at acceptance a and returns the tokens
// it made.
func (s *sim) round(p pair, k int, a float64) int {
	s.clk.t = s.clk.t.Add(p.outside[min(k, 1)])
	if k > 0 {
		t0 := s.c.Now()
		d := time.Duration(k) * p.step
		if p.stepAt != nil {
			d = p.stepAt(k)
		}
		steps := k
		if p.onePass {
			steps = 1
		}
		if len(s.ks) > 0 && s.ks[len(s.ks)-1] == 0 && (p.catchUp > 0 || p.catchUpAt != nil) {
			up := p.catchUp
			if p.catchUpAt != nil {
				up = p.catchUpAt()
			}
			d, steps = d+up, 0
		}
		s.clk.t = s.clk.t.Add(d)
		s.c.Drafted(t0, steps)
	}
	s.ks = append(s.ks, k)
	m := 0
	if s.text != nil {
		for m < k && s.rng.Float64() < s.text.rate(m+1) {
			m++
			s.text.step(s.rng)
		}
		s.text.step(s.rng) // the target's own token
	}
	for s.text == nil && m < k && s.rng.Float64() < p.at(m+1, a) {
		m++
	}
	capturing := p.capture > 0 && (k > 0 || s.c.MayDraftSoon(2) && !s.c.Recalibrating() || s.capturedAlone && !s.c.verify.settled(1))
	t1 := s.c.Now()
	s.clk.t = s.clk.t.Add(p.verify(k+1) + time.Duration(m+1)*p.perToken)
	if capturing {
		s.clk.t = s.clk.t.Add(p.capture)
	}
	if p.hiccupEvery > 0 && len(s.ks)%p.hiccupEvery == 0 {
		s.clk.t = s.clk.t.Add(p.hiccup)
	}
	if capturing && !s.capturedAlone {
		s.c.VerifiedCapturing(t1, k+1)
	} else {
		s.c.Verified(t1, k+1)
	}
	s.c.Accepted(k, m)
	return m + 1
}

func countDrafting(ks []int) int {
	n := 0
	for _, k := range ks {
		if k > 0 {
			n++
		}
	}
	return n
}

// steadyFrom is the first round of ks from which at least 18 of 20 rounds
// draft (drafting steadily again), or -1.
func steadyFrom(ks []int) int {
	for i := range ks {
		if countDrafting(ks[i:min(i+20, len(ks))]) >= 18 {
			return i
		}
	}
	return -1
}

// A draft step costing more than the target pass: drafting never pays,
// and probing it costs almost nothing.
func TestChooserNeverPays(t *testing.T) {
	s := newSim(1)
	p := pair{step: 15 * time.Millisecond, verify: linear(10*time.Millisecond, time.Millisecond), accept: 0.9}
	speed := s.run(p, 2000)
	d := s.c.Decision()
	t.Logf("%.3fx the target alone; %d of 2000 rounds drafted; %+v", speed, countDrafting(s.ks), d)
	if d.Drafting || d.Reason != ReasonCosts {
		t.Errorf("decision %+v, want drafting off because %q", d, ReasonCosts)
	}
	if speed < 0.98 {
		t.Errorf("%.3fx the target alone", speed)
	}
	if n := countDrafting(s.ks); n > 30 {
		t.Errorf("%d of 2000 rounds drafted", n)
	}
}

// Cheap draft steps on a target whose passes grow with rows, acceptance
// 0.8: k = 3 makes the most tokens per second (1.575x the target alone);
// 2 and 4 come within 3% of it (the optimum of E(k)/cost(k) is flat), so
// the running estimate of the acceptance moves the choice among them, and
// what must hold is the throughput: within 3% of the ideal.
func TestChooserPaysAtK3(t *testing.T) {
	s := newSim(2)
	p := pair{step: 1500 * time.Microsecond, verify: linear(10*time.Millisecond, 2*time.Millisecond), accept: 0.8}
	s.run(p, 100)
	speed := s.run(p, 1000)
	hist := map[int]int{}
	for _, k := range s.ks[100:] {
		hist[k]++
	}
	t.Logf("%.3fx the target alone; k chosen %v", speed, hist)
	mode := 0
	for k, n := range hist {
		if n > hist[mode] {
			mode = k
		}
	}
	if mode != 3 {
		t.Errorf("k = %d most often (%v), want 3", mode, hist)
	}
	if hist[2]+hist[3]+hist[4] < 900 {
		t.Errorf("k outside 2..4 in %d of 1000 rounds", 1000-hist[2]-hist[3]-hist[4])
	}
	// The ideal for k = 3 at 0.8: E = 2.952 tokens per 22.5 ms, against
	// one per 12 ms.
	if speed < 0.97*1.575 {
		t.Errorf("%.3fx the target alone, ideal 1.575x", speed)
	}
	// The decision's expectation rests on the running acceptance
	// estimate, which wanders round to round.
	if d := s.c.Decision(); !d.Drafting || d.Reason != "" || d.ExpectedSpeedup < 1.3 {
		t.Errorf("decision %+v", d)
	}
}

// The exact choice at known acceptance rates and costs.
func TestChooserBest(t *testing.T) {
	clk := &fakeClock{t: time.Unix(0, 0)}
	c := NewChooser(CostOptions{Now: clk.now})
	verify := linear(10*time.Millisecond, 2*time.Millisecond)
	for range settle {
		for rows := 1; rows <= 9; rows++ {
			t0 := clk.t
			clk.t = clk.t.Add(verify(rows))
			c.Verified(t0, rows)
		}
		t0 := clk.t
		clk.t = clk.t.Add(1500 * time.Microsecond)
		c.Drafted(t0, 1)
	}
	for _, tc := range []struct {
		a float64
		k int
	}{
		// E(k) / (1.5k + 10 + 2(k+1)) ms against 1/12:
		{0.8, 3}, // 2.952/22.5 = 0.1312 beats 2.44/19 and 3.362/26
		{0.5, 1}, // 1.5/15.5 = 0.0968 beats 1.75/19 = 0.0921
		{0.9, 5}, // 4.686/29.5 = 0.1588 beats 4.095/26 and 5.217/33
	} {
		if k, _ := c.best(c.flatRates(tc.a)); k != tc.k {
			t.Errorf("acceptance %.1f: k = %d, want %d", tc.a, k, tc.k)
		}
	}
	// At 0.3, k = 1 gives 1.3/15.5 = 0.0839 against 0.0833 alone: under
	// the 3% margin.
	c.succ, c.fail, c.round, c.lastOne = 298, 700, 5, 5 // (298+1)/(998+2) = 0.299
	c.decide()
	if d := c.Decision(); d.Drafting || d.Reason != ReasonCosts {
		t.Errorf("acceptance 0.3: %+v", d)
	}
}

// Acceptance collapses (the conversation leaves what the draft knows):
// drafting goes off within a few rounds; when acceptance comes back, a
// probe notices and drafting resumes.
func TestChooserAcceptanceCollapses(t *testing.T) {
	s := newSim(3)
	good := pair{step: 1500 * time.Microsecond, verify: linear(10*time.Millisecond, 2*time.Millisecond), accept: 0.8}
	bad := good
	bad.accept = 0

	s.run(good, 300)
	if !s.c.Decision().Drafting {
		t.Fatalf("not drafting at acceptance 0.8: %+v", s.c.Decision())
	}
	n := len(s.ks)
	speed := s.run(bad, 400)
	off := -1
	for i, k := range s.ks[n:] {
		if k == 0 {
			off = i
			break
		}
	}
	t.Logf("acceptance 0: off after %d rounds; %.3fx the target alone over 400 rounds", off, speed)
	if off < 0 || off > 10 {
		t.Errorf("drafting went off after %d rounds of no acceptance", off)
	}
	if d := s.c.Decision(); d.Drafting && !d.Probe || !d.Drafting && d.Reason != ReasonCosts {
		t.Errorf("after collapse: %+v", d)
	}
	if speed < 0.95 {
		t.Errorf("%.3fx the target alone while nothing was accepted", speed)
	}

	n = len(s.ks)
	s.run(good, 400)
	back := steadyFrom(s.ks[n:])
	t.Logf("acceptance back to 0.8: drafting steadily again after %d rounds", back)
	if back < 0 || back > 300 {
		t.Errorf("drafting resumed after %d rounds", back)
	}
}

// The first rounds measure: one drafting round, then the target alone
// until its pass is timed past its first runs, then a choice.
func TestChooserWarmUp(t *testing.T) {
	s := newSim(4)
	p := pair{step: time.Millisecond, verify: linear(10*time.Millisecond, time.Millisecond), accept: 0.9}
	s.run(p, 2+settle)
	if want := []int{4, 0, 0, 0}; !slices.Equal(s.ks[:4], want) || s.ks[4] == 0 {
		t.Errorf("first rounds drafted %v, want %v, then some", s.ks, want)
	}
	if got := s.c.Next(2); got > 2 {
		t.Errorf("Next(2) = %d", got)
	}
}

func TestCurve(t *testing.T) {
	var c curve
	c.init(10, 1)
	if c.at(3) != 0 || c.proportional(3) != 0 {
		t.Error("an empty curve estimates non-zero")
	}
	c.add(2, 20)
	c.add(6, 40)
	for _, tc := range []struct {
		size int
		at   float64
	}{{1, 20}, {2, 20}, {4, 30}, {6, 40}, {8, 50}} {
		if got := c.at(tc.size); got != tc.at {
			t.Errorf("at(%d) = %g, want %g", tc.size, got, tc.at)
		}
	}
	if got := c.proportional(3); got != 30 { // from 2 steps: 20 * 3/2
		t.Errorf("proportional(3) = %g", got)
	}
	c.add(6, 20) // the first measurements keep their smallest
	if got := c.at(8); got != 20 {
		t.Errorf("a falling curve extends flat: at(8) = %g", got)
	}
}

// A size's first runs keep their fastest (a GPU compiles and captures a
// program on them); after those, an outlier counts a quarter above the
// average at most, and a lasting change of cost is followed.
func TestCurveSettles(t *testing.T) {
	var c curve
	c.init(4, 0.25)
	for _, v := range []time.Duration{900, 400, 500} { // compile, capture, run
		c.add(1, v)
	}
	if got := c.at(1); got != 400 {
		t.Fatalf("after the first runs: %g, want 400", got)
	}
	c.add(1, 40000) // a hiccup
	if got := c.at(1); got != 425 {
		t.Errorf("after an outlier: %g, want 400 + (500 - 400)/4 = 425", got)
	}
	for range 40 {
		c.add(1, 1000) // a lasting rise
	}
	if got := c.at(1); got < 999 || got > 1000 {
		t.Errorf("after a lasting change to 1000: %g", got)
	}
	for range 40 {
		c.add(1, 100)
	}
	if got := c.at(1); got < 100 || got > 101 {
		t.Errorf("after a lasting change to 100: %g", got)
	}
}

// compiling is a pair whose every new pass size runs three times slower
// its first two times (a GPU runs a new program eagerly, then captures it
// as a graph), draft calls by their steps and target passes of more than
// one row by their rows: the one-row pass is warm already (an earlier
// request ran the target alone).
func compiling(p pair) pair {
	seenV, seenD := map[int]int{}, map[int]int{}
	verify := p.verify
	p.verify = func(rows int) time.Duration {
		seenV[rows]++
		if seenV[rows] <= 2 && rows > 1 {
			return 3 * verify(rows)
		}
		return verify(rows)
	}
	step := p.step
	p.stepAt = func(k int) time.Duration {
		seenD[k]++
		if seenD[k] <= 2 {
			return 3 * time.Duration(k) * step
		}
		return time.Duration(k) * step
	}
	return p
}

// First runs three times slower than the rest do not turn off a draft
// that pays, nor keep on one that does not: the Chooser measures a size
// past its first runs before it believes it.
func TestChooserFirstRunsSlow(t *testing.T) {
	s := newSim(5)
	pays := compiling(pair{step: 1500 * time.Microsecond, verify: linear(10*time.Millisecond, 2*time.Millisecond), accept: 0.8})
	s.run(pays, 100)
	speed := s.run(pays, 1000)
	t.Logf("paying pair: %.3fx the target alone after 100 rounds; %d of the first 100 drafted", speed, countDrafting(s.ks[:100]))
	if speed < 0.97*1.575 || countDrafting(s.ks[:100]) < 80 {
		t.Errorf("paying pair: %.3fx (ideal 1.575x), %d of the first 100 rounds drafted", speed, countDrafting(s.ks[:100]))
	}

	s = newSim(6)
	loses := compiling(pair{step: 15 * time.Millisecond, verify: linear(10*time.Millisecond, time.Millisecond), accept: 0.9})
	speed = s.run(loses, 1000)
	t.Logf("losing pair: %.3fx the target alone; %d of 1000 rounds drafted", speed, countDrafting(s.ks))
	if d := s.c.Decision(); d.Drafting || d.Reason != ReasonCosts || speed < 0.95 {
		t.Errorf("losing pair: %.3fx, decision %+v", speed, d)
	}
}

// A launch-bound target (the demo pair on a GPU): a draft that never pays,
// and whose probes are dear, since the draft first catches up on every
// token it missed (30 target passes' worth). Counting rounds, probes every
// 16 to 256 of them lost 14% (0.86x over 3000 rounds); the exploration
// budget holds what probes lose to 2% of the time measured (0.97x, the
// first round's loss included).
func TestChooserDearProbesStayWithinBudget(t *testing.T) {
	s := newSim(7)
	p := pair{step: 200 * time.Microsecond, verify: linear(200*time.Microsecond, 60*time.Microsecond), accept: 0.3, catchUp: 8 * time.Millisecond}
	speed := s.run(p, 3000)
	t.Logf("%.3fx the target alone; %d of 3000 rounds drafted; %+v", speed, countDrafting(s.ks), s.c.Decision())
	if d := s.c.Decision(); d.Drafting && !d.Probe || !d.Drafting && d.Reason != ReasonCosts {
		t.Errorf("decision %+v", d)
	}
	if speed < 0.96 {
		t.Errorf("%.3fx the target alone", speed)
	}
}

// Sampling over a large vocabulary on the host (T=0.7 on an 8B target of
// 151,936 tokens): each token a verification makes costs 1.9 ms beside a
// 4.4 ms pass, so the target alone is 6.3 ms a token and the verification
// of a round grows with what it accepts. Drafting at 0.8 acceptance pays
// about 1.8x; the chooser keeps drafting and comes within 5% of the best
// fixed length.
func TestChooserSampledRows(t *testing.T) {
	p := pair{step: 200 * time.Microsecond, verify: linear(4300*time.Microsecond, 120*time.Microsecond), accept: 0.8, perToken: 1900 * time.Microsecond}
	// The best fixed length, played out.
	best, bestK := 0.0, 0
	for k := 1; k <= 8; k++ {
		f := newSim(8)
		f.fixed = k
		if v := f.run(p, 3000); v > best {
			best, bestK = v, k
		}
	}
	s := newSim(8)
	s.run(p, 100)
	speed := s.run(p, 3000)
	t.Logf("adaptive %.3fx the target alone, best fixed k = %d %.3fx; %d of 3000 rounds drafted", speed, bestK, best, countDrafting(s.ks[100:]))
	if speed < 0.95*best {
		t.Errorf("adaptive %.3fx against %.3fx at k = %d", speed, best, bestK)
	}
}

// A DFlash block of k tokens is one draft pass whatever k: priced so (the
// cost measured by block length), the chooser drafts long blocks (k = 8
// makes the most here, 2.22x: 3.70 tokens a 17.5 ms round against one a
// 10.5 ms pass; the optimum is flat from 5 on). Priced as k steps of one
// pass, as when the engine reported a block as one step, it drafts
// shorter blocks (1.64x).
func TestChooserPricesBlocks(t *testing.T) {
	p := pair{step: 3 * time.Millisecond, verify: linear(10*time.Millisecond, 500*time.Microsecond), accept: 0.75}
	p.stepAt = func(int) time.Duration { return p.step }
	s := newSimWith(9, CostOptions{Block: true})
	s.run(p, 100)
	speed := s.run(p, 2000)
	hist := map[int]int{}
	long := 0
	for _, k := range s.ks[100:] {
		hist[k]++
		if k >= 5 {
			long++
		}
	}
	t.Logf("blocks priced as one pass: %.3fx the target alone; k chosen %v", speed, hist)
	if long < 1800 {
		t.Errorf("k of 5 or more in %d of 2000 rounds: %v", long, hist)
	}
	if speed < 0.95*2.22 {
		t.Errorf("%.3fx the target alone, ideal 2.22x", speed)
	}

	p.onePass = true
	s = newSimWith(9, CostOptions{})
	s.run(p, 100)
	stepped := s.run(p, 2000)
	t.Logf("blocks priced as k passes: %.3fx", stepped)
	if stepped > 0.8*speed {
		t.Errorf("pricing a block as k passes made %.3fx, one pass %.3fx: the test does not tell them apart", stepped, speed)
	}
}

// First runs that cost fifty passes each (a GPU compiling and capturing a
// pass size on a launch-bound target) do not use up the probe budget: when
// acceptance collapses and comes back, probes still notice. (Counted
// against the budget, they held drafting off for the rest of the run: the
// H200's 8B target on jargon prompts drafted in 30% of its rounds, 1.10x
// against k = 4's 1.52x.)
func TestChooserDearFirstRunsLeaveProbes(t *testing.T) {
	s := newSim(10)
	good := pair{step: 100 * time.Microsecond, verify: linear(3*time.Millisecond, 150*time.Microsecond), accept: 0.7}
	seen := map[int]int{}
	verify := good.verify
	good.verify = func(rows int) time.Duration {
		if seen[rows]++; seen[rows] <= 2 {
			return 50 * verify(rows)
		}
		return verify(rows)
	}
	bad := good
	bad.accept = 0
	s.run(good, 200)
	s.run(bad, 300)
	n := len(s.ks)
	s.run(good, 600)
	back := steadyFrom(s.ks[n:])
	t.Logf("acceptance back to 0.7: drafting steadily again after %d rounds", back)
	if back < 0 || back > 300 {
		t.Errorf("drafting resumed after %d rounds", back)
	}
}

// Near break-even on few rounds (the H200's 8B Q4_K_M target at T=0.7:
// acceptance 0.62, k = 4 pays about 1.3x, three prompts of 64 tokens, 150
// rounds): the running acceptance estimate wanders across the threshold,
// and without hysteresis each crossing turned drafting off until a probe
// (1.08-1.12x on two seeds of four, in 53-76 of 150 rounds drafting). The
// chooser keeps within 5% of k = 4 on each seed.
func TestChooserNearBreakEvenStaysOn(t *testing.T) {
	p := pair{step: 200 * time.Microsecond, verify: func(r int) time.Duration {
		ms := []float64{0, 3.25, 4.12, 4.3, 4.42, 4.5, 4.56, 4.6, 4.64, 4.7}
		return time.Duration(ms[r] * 1e6)
	}, accept: 0.62, perToken: 800 * time.Microsecond}
	for seed := uint64(1); seed <= 4; seed++ {
		f := newSim(seed)
		f.fixed = 4
		fixed := f.run(p, 150)
		s := newSim(seed)
		speed := s.run(p, 150)
		t.Logf("seed %d: k = 4 %.3fx, adaptive %.3fx, drafting in %d of 150 rounds", seed, fixed, speed, countDrafting(s.ks))
		if speed < 0.95*fixed {
			t.Errorf("seed %d: adaptive %.3fx against k = 4's %.3fx", seed, speed, fixed)
		}
	}
}

// requests plays n requests of 64 tokens each, as the engine drafts them:
// no more than the request has left beyond the round's own token.
func (s *sim) requests(p pair, n int) float64 {
	start, tokens := s.clk.t, 0
	for range n {
		for left := 64; left > 0; {
			k := s.c.Next(s.c.o.MaxK)
			if s.fixed > 0 {
				k = s.fixed
			}
			k = max(0, min(k, left-1))
			a := p.accept
			if s.roundAccept != nil {
				a = s.roundAccept()
			}
			made := s.round(p, k, a)
			tokens += made
			left -= made
		}
	}
	rate := float64(tokens) / float64(s.clk.t.Sub(start))
	return rate * float64(p.verify(1)+p.perToken+p.outside[0])
}

// h200Q4 is the H200's inflated 8B Q4_K_M target with its Q8_0 draft at
// T = 0.7 (issue 17), as measured before the exact few-row Q6_K products
// (mvx_q6_k): target passes of 1, 2, 4, 8, 16 rows take 3.40,
// 3.74, 4.56, 6.52, 6.53 ms, and each token a verification makes 0.3 ms
// more on the host (3.7 ms a token alone); a draft step 0.6 ms (0.1 on
// the device, the rest sampling 151,936 logits on the host).
func h200Q4() pair {
	return pair{step: 600 * time.Microsecond, perToken: 300 * time.Microsecond, verify: func(r int) time.Duration {
		var c curve
		c.init(17, 1)
		for i, ms := range []float64{3.40, 3.74, 4.56, 6.52, 6.53} {
			c.add(1<<i, time.Duration(ms*1e6))
		}
		return time.Duration(c.at(r))
	}}
}

// Sampled on the H200's 8B Q4_K_M target (issue 17), three requests of
// 64 tokens on a fresh Chooser as packaging/bench-spec.sh runs them, 20
// seeds: with one acceptance for every round (0.85) the adaptive length
// comes within 2% of the best fixed one (1.58x, k = 4 1.61x); with
// rounds that differ (each
// in predictable text, kept 0.97 a token, with chance 0.7, else 0.4) the
// geometric fit of short rounds prices long drafts low and it falls 6-8%
// short of the best fixed lengths (k = 4 1.62x, k = 8 1.71x; adaptive
// 1.59x). The H200 measured 1.33x against k = 4's 1.60x: this bounds
// what the Chooser's own choice loses on such costs, and guards it. With
// passes of 3.40, 3.75, 4.15, 4.45 ms at 1, 2, 4, 8 rows (mvx_q6_k) it
// measured 1.76x against k = 4's 1.69x, drafting 6 tokens a round.
func TestChooserSampledH200(t *testing.T) {
	for _, tc := range []struct {
		name    string
		p, e, h float64 // chance a round is easy, its acceptance, and a hard one's
		within  float64
	}{{"one rate", 1, 0.85, 0, 0.96}, {"easy and hard rounds", 0.7, 0.97, 0.4, 0.9}} {
		p := h200Q4()
		const seeds = 20
		var fixed [9]float64
		adaptive, off, rounds := 0.0, 0, 0
		for seed := uint64(1); seed <= seeds; seed++ {
			for k := 0; k <= 8; k++ {
				f := newSim(seed)
				f.fixed = k
				f.roundAccept = func() float64 {
					if f.rng.Float64() < tc.p {
						return tc.e
					}
					return tc.h
				}
				v := f.requests(p, 3) / seeds
				if k > 0 {
					fixed[k] += v
					continue
				}
				adaptive += v
				rounds += len(f.ks)
				off += len(f.ks) - countDrafting(f.ks)
			}
		}
		bestK := 1
		for k := 2; k <= 8; k++ {
			if fixed[k] > fixed[bestK] {
				bestK = k
			}
		}
		t.Logf("%s: adaptive %.3fx the target alone, %d of %d rounds without a draft; best fixed k = %d %.3fx; fixed 1-8 %.3f", tc.name, adaptive, off, rounds, bestK, fixed[bestK], fixed[1:])
		if adaptive < tc.within*fixed[bestK] || off > rounds/10 {
			t.Errorf("%s: adaptive %.3fx against k = %d's %.3fx; %d of %d rounds without a draft", tc.name, adaptive, bestK, fixed[bestK], off, rounds)
		}
	}
}

// A launch-bound target (the demo pair on a GPU, 0.2 ms a pass) with a
// DFlash-like block draft whose calls promise 1.29x (2.19 tokens a round
// of 0.365 ms), but whose rounds spend 0.2 ms on the host outside the
// calls, where the target alone's spend 0.02 ms: drafting makes 0.91x.
// Priced by its calls alone, the chooser drafted in almost every round;
// with the rounds' time outside the calls it stays off.
func TestChooserPricesTimeOutsideCalls(t *testing.T) {
	p := pair{step: 120 * time.Microsecond, verify: linear(200*time.Microsecond, 15*time.Microsecond), accept: 0.7}
	p.stepAt = func(int) time.Duration { return p.step }
	p.outside = [2]time.Duration{20 * time.Microsecond, 200 * time.Microsecond}
	s := newSimWith(11, CostOptions{Block: true, MaxK: 2})
	speed := s.run(p, 2000)
	t.Logf("%.3fx the target alone; %d of 2000 rounds drafted; %+v", speed, countDrafting(s.ks), s.c.Decision())
	if speed < 0.97 {
		t.Errorf("%.3fx the target alone", speed)
	}
	// Without the time outside, the same pair pays and drafts.
	p.outside = [2]time.Duration{}
	s = newSimWith(11, CostOptions{Block: true, MaxK: 2})
	if speed := s.run(p, 2000); speed < 1.2 || countDrafting(s.ks) < 1800 {
		t.Errorf("without host work outside the calls: %.3fx, %d of 2000 rounds drafted", speed, countDrafting(s.ks))
	}
}

// A probe that made its tokens faster than the target alone would have
// pays for one that lost: the budget counts what probes lost net. (Each
// probe's loss floored at zero, a pair whose probes win as often as they
// lose ran out of budget, however much the winners made up.)
func TestChooserProbesNetTheirLoss(t *testing.T) {
	clk := &fakeClock{t: time.Unix(0, 0)}
	c := NewChooser(CostOptions{Now: clk.now})
	pass := func(rows int, d time.Duration) {
		t0 := clk.t
		clk.t = clk.t.Add(d)
		c.Verified(t0, rows)
	}
	for range settle {
		pass(1, time.Millisecond)
		c.Accepted(0, 0)
	}
	c.spent = 100 * time.Millisecond
	probe := func(made int, took time.Duration) {
		c.explore = true
		pass(2, took)
		c.Accepted(1, made-1)
	}
	probe(2, 1200*time.Microsecond) // 2 tokens in 1.2 ms against 2 ms alone: 0.8 ms ahead
	probe(1, 1800*time.Microsecond) // 1 token in 1.8 ms: 0.8 ms behind
	probe(2, 1200*time.Microsecond)
	probe(1, 1800*time.Microsecond)
	if c.lost > 0 {
		t.Errorf("probes that won as much as they lost: %v lost", c.lost)
	}
	if !c.affords() {
		t.Errorf("probes that made up their losses exhaust the budget: lost %v of %v", c.lost, c.spent)
	}
}

// The H200's 8B Q4_K_M target with its EAGLE-3 draft (0.2 ms a step,
// acceptance 0.45: k = 1 pays 1.21x, k = 4 1.07x): the first run of the
// two-row verification compiled and captured its program (8 ms against
// 3.76), while four-token rounds had been measured past their first
// runs. Believing that run, every length under 4 looked dearer than 4,
// and the chooser drafted 4 tokens a round until acceptance dipped, then
// nothing (1.01x on the H200). Drafting a length whose costs are not
// settled when the settled sizes say it would do better measures it, and
// the chooser settles on 1 or 2. A draft call after rounds without one
// first catches up on the tokens it missed (0.6 ms more, reported as no
// steps): that is no draft step's cost, and what probes pay for it is
// made up by what they gain.
func TestChooserMeasuresLengthsItsFirstRunsPricedHigh(t *testing.T) {
	verify := func(r int) time.Duration {
		ms := []float64{0, 3.325, 3.759, 3.98, 4.209, 4.27, 4.33, 4.38, 4.436, 4.5}
		return time.Duration(ms[r] * 1e6)
	}
	p := pair{step: 200 * time.Microsecond, verify: verify, accept: 0.45, catchUp: 600 * time.Microsecond}
	s := newSim(12)
	c := s.c
	timed := func(rows int, d time.Duration) {
		t0 := s.clk.t
		s.clk.t = s.clk.t.Add(d)
		c.Verified(t0, rows)
	}
	for range settle {
		timed(1, verify(1))
		t0 := s.clk.t
		s.clk.t = s.clk.t.Add(4 * p.step)
		c.Drafted(t0, 4)
		timed(5, verify(5))
	}
	timed(2, 8*time.Millisecond) // the two-row pass's first run
	c.succ, c.fail, c.round, c.lastOne = 9, 11, 5, 5
	c.Accepted(0, 0)
	speed := s.run(p, 300)
	hist := map[int]int{}
	for _, k := range s.ks[50:] {
		hist[k]++
	}
	t.Logf("%.3fx the target alone; k chosen after 50 rounds %v", speed, hist)
	if hist[1]+hist[2] < 200 {
		t.Errorf("k = 1 or 2 in %d of 250 rounds: %v", hist[1]+hist[2], hist)
	}
	if speed < 1.12 {
		t.Errorf("%.3fx the target alone, k = 1 makes 1.21x", speed)
	}
}

// BenchmarkChooserRound is the Chooser's host work in a round while
// drafting is off (Next, the timings, Accepted's choice of the next k,
// MayDraftSoon, Decision): on a launch-bound target (the demo pair on a
// GPU, 0.2 ms a round) every microsecond is half a percent of the
// target alone. It allocates nothing.
func BenchmarkChooserRound(b *testing.B) {
	clk := &fakeClock{t: time.Unix(0, 0)}
	c := NewChooser(CostOptions{Now: clk.now})
	round := func(k int) {
		if k > 0 {
			t0 := c.Now()
			clk.t = clk.t.Add(time.Duration(k) * 300 * time.Microsecond)
			c.Drafted(t0, k)
		}
		t1 := c.Now()
		clk.t = clk.t.Add(200*time.Microsecond + time.Duration(k)*10*time.Microsecond)
		c.Verified(t1, k+1)
		c.Accepted(k, 0)
	}
	for range 300 {
		round(c.Next(8))
	}
	b.ReportAllocs()
	for b.Loop() {
		round(c.Next(8))
		c.MayDraftSoon(2)
		_ = c.Decision()
	}
}

// A launch-bound target (the demo pair on a GPU: 0.21 ms a one-row pass)
// whose passes cost 80 us more while they capture states for a DFlash
// draft (0.12 ms a block, acceptance 0.5): drafting 2 tokens a round
// makes 0.83x the target alone. Timed while capturing (the engine timed
// the target alone in its first rounds with the capture on, so that the
// first draft would find its states, and again at each recalibration
// while drafting), the target alone looked 0.29 ms and drafting a gain,
// and the chooser drafted at a loss (ten runs of 700 rounds: 0.95x; the
// H200's demo pair: DFlash adaptive 0.92x). Timed apart, one-row passes
// that captured do not count as the target alone (0.985x).
func TestChooserTimesTheTargetAloneWithoutCapture(t *testing.T) {
	p := pair{step: 120 * time.Microsecond, verify: linear(200*time.Microsecond, 10*time.Microsecond), accept: 0.5, capture: 80 * time.Microsecond}
	p.stepAt = func(int) time.Duration { return p.step }
	o := CostOptions{Block: true, MaxK: 4}
	var apart, old float64
	for seed := uint64(1); seed <= 10; seed++ {
		s := newSimWith(seed, o)
		apart += s.run(p, 700) / 10
		s = newSimWith(seed, o)
		s.capturedAlone = true
		old += s.run(p, 700) / 10
	}
	t.Logf("one-row passes that captured timed apart: %.3fx the target alone; timed as the target alone: %.3fx", apart, old)
	if apart < 0.97 {
		t.Errorf("%.3fx the target alone", apart)
	}
	if old > apart-0.02 {
		t.Errorf("timing captured passes as the target alone made %.3fx, apart %.3fx: the test does not tell them apart", old, apart)
	}
}

// h200Rows is the H200's inflated 8B Q4_K_M target pass (issue 17's rows
// curve, greedy): 3.333, 3.764, 4.194, 4.367, 7.120 ms at 1, 2, 4, 8, 16
// rows, interpolated between.
func h200Rows(r int) time.Duration {
	return powersOfTwo(r, []float64{3.333, 3.764, 4.194, 4.367, 7.120})
}

// powersOfTwo interpolates a pass's cost at r rows from ms, its cost in
// milliseconds at 1, 2, 4, ... rows: linear between the two nearest, the
// last past the largest.
func powersOfTwo(r int, ms []float64) time.Duration {
	lo := 0
	for lo+1 < len(ms) && 1<<(lo+1) <= r {
		lo++
	}
	if lo+1 == len(ms) {
		return time.Duration(ms[lo] * 1e6)
	}
	w := 1 << lo
	f := float64(r-w) / float64(w)
	return time.Duration((ms[lo] + f*(ms[lo+1]-ms[lo])) * 1e6)
}

// fixedSpeedup is the closed form of drafting k every round: E(k) = 1 +
// sum over j <= k of the product of the positions' chances up to j, over
// k draft steps and a pass of k+1 rows, against one token a one-row pass.
func fixedSpeedup(p pair, k int) float64 {
	e, run := 1.0, 1.0
	for i := 1; i <= k; i++ {
		run *= p.at(i, p.accept)
		e += run
	}
	return e / float64(time.Duration(k)*p.step+p.verify(k+1)) * float64(p.verify(1))
}

// eagle3 and modelDraft are drafts on the H200's 8B Q4_K_M target
// (h200Rows), greedy: an EAGLE-3 head whose positions are accepted as
// measured there (0.45, 0.21, 0.10, 0 given those before; 0.24 ms a
// step), and a model draft whose first position is accepted less often
// than the next ones (0.65, then 0.78-0.85; 0.109 ms a step).
func eagle3() pair {
	return pair{step: 240 * time.Microsecond, verify: h200Rows, positions: []float64{0.45, 0.21, 0.10, 0}}
}

func modelDraft() pair {
	return pair{step: 109 * time.Microsecond, verify: h200Rows, positions: []float64{0.65, 0.78, 0.80, 0.82, 0.83, 0.84, 0.85}}
}

// bestFixed is the k in 1..8 with the most tokens per second by the
// closed form, and that speedup.
func bestFixed(p pair) (int, float64) {
	best := 1
	for k := 2; k <= 8; k++ {
		if fixedSpeedup(p, k) > fixedSpeedup(p, best) {
			best = k
		}
	}
	return best, fixedSpeedup(p, best)
}

// positionRuns plays 20 seeds of 50 rounds, then 200 more, and returns
// the speedup of the 200 averaged over the seeds, and the lengths they
// chose.
func positionRuns(p pair) (float64, map[int]int) {
	speed, hist := 0.0, map[int]int{}
	for seed := uint64(1); seed <= 20; seed++ {
		s := newSim(seed)
		s.run(p, 50)
		speed += s.run(p, 200) / 20
		for _, k := range s.ks[50:] {
			hist[k]++
		}
	}
	return speed, hist
}

// An EAGLE-3 head whose deeper positions are seldom accepted: k = 1 makes
// the most (1.207x by the closed form, k = 2 1.154x, k = 4 0.997x). One
// geometric rate for every position made a deep draft look as good as
// the first, and the Chooser drafted 2 or more in 56% of the rounds
// (1.158x); priced by position, it drafts 1 in 77% of the rounds, more
// in 15% (while the pooled rate is up and position 2's own evidence
// thin), 1.174x. Drafting is off in 8% (2% on the pooled rate): position
// 1 gets one trial a round, and a dip of its estimate turns drafting off
// until a probe.
func TestChooserEAGLE3DraftsOne(t *testing.T) {
	p := eagle3()
	bestK, ideal := bestFixed(p)
	if bestK != 1 {
		t.Fatalf("the closed form's best k = %d, want 1", bestK)
	}
	speed, hist := positionRuns(p)
	deeper := 4000 - hist[0] - hist[1]
	t.Logf("%.3fx the target alone (k = 1: %.3fx); k chosen %v", speed, ideal, hist)
	if hist[1] < 2800 || deeper > 800 {
		t.Errorf("k = 1 in %d of 4000 rounds, more in %d: %v", hist[1], deeper, hist)
	}
	if speed < 0.96*ideal {
		t.Errorf("%.3fx the target alone, k = 1 makes %.3fx", speed, ideal)
	}
}

// A model draft whose first position is accepted less often than the
// next ones: the Chooser settles at the best fixed length by the closed
// form (k = 7, 2.339x) and comes within 2% of it (the pooled rate
// undervalued the deep positions: 2.267x, k = 7 in 53% of the rounds).
func TestChooserModelDraftFindsBestLength(t *testing.T) {
	p := modelDraft()
	bestK, ideal := bestFixed(p)
	speed, hist := positionRuns(p)
	t.Logf("%.3fx the target alone (best fixed k = %d: %.3fx); k chosen %v", speed, bestK, ideal, hist)
	if hist[bestK] < 3200 {
		t.Errorf("k = %d in %d of 4000 rounds: %v", bestK, hist[bestK], hist)
	}
	if speed < 0.98*ideal {
		t.Errorf("%.3fx the target alone, k = %d makes %.3fx", speed, bestK, ideal)
	}
}

// A run of rejections at the first position does not hold drafting off:
// on a fresh Chooser whose first five rounds reject (the first draws 4,
// three time the target alone, the fifth drafts), and after 200 rounds of
// the model draft, five drafting rounds rejected at once; then 0.75 at
// every position. Drafting is off for no more than a recalibration's
// round after them. On the first position's evidence alone (no trials at
// the pooled rate), the fresh Chooser turned drafting off until a probe.
func TestChooserEarlyRejections(t *testing.T) {
	good := pair{step: 109 * time.Microsecond, verify: h200Rows, accept: 0.75}
	for _, tc := range []struct {
		name   string
		before int // rounds of the model draft before the rejections
		shrink float64
		most   int // rounds off in a row after them, at most
	}{
		{"fresh", 0, shrink, 1},
		{"after 200 rounds", 200, shrink, 1},
		{"fresh, first position alone", 0, 0, -1},
	} {
		worst := 0
		speed := 0.0
		for seed := uint64(1); seed <= 20; seed++ {
			s := newSim(seed)
			s.c.shrink = tc.shrink
			s.run(modelDraft(), tc.before)
			for n := 0; n < 5; {
				k := s.c.Next(8)
				if k > 0 || tc.before == 0 {
					n++
				}
				s.round(good, k, 0)
			}
			from := len(s.ks)
			speed += s.run(good, 200) / 20
			off := 0
			for _, k := range s.ks[from:] {
				if off = (off + 1) * (1 - min(k, 1)); off > worst {
					worst = off
				}
			}
		}
		t.Logf("%s: at most %d rounds off in a row after the rejections; %.3fx the target alone over 200 rounds", tc.name, worst, speed)
		if tc.most >= 0 && worst > tc.most {
			t.Errorf("%s: %d rounds off in a row", tc.name, worst)
		}
		if tc.most < 0 && worst <= 1 {
			t.Errorf("%s: at most %d round off: the test does not tell the estimates apart", tc.name, worst)
		}
	}
}

// A draft that loses (0.73x the target alone at k=1 on this CPU-like
// pair, where two rows cost 1.7 one-row passes) stays off when a quarter
// of the rounds stall for four passes' time: a stall is not a cost.
// Counted at up to twice the average, the stalls held the one-row
// estimate at 1.8-2.3 ms against 1.5, so drafting looked 1.1x and ran
// (on the CPU, 10-35% of rounds at 0.83-0.92x the target alone).
func TestChooserStallsDoNotTurnDraftingOn(t *testing.T) {
	p := pair{step: 700 * time.Microsecond, verify: linear(400*time.Microsecond, 1100*time.Microsecond), accept: 0.6,
		hiccup: 6 * time.Millisecond, hiccupEvery: 4}
	for seed := uint64(1); seed <= 5; seed++ {
		s := newSim(seed)
		s.run(p, 600)
		if n := countDrafting(s.ks[100:]); n > 25 {
			t.Errorf("seed %d: %d of 500 rounds drafted a draft that loses", seed, n)
		}
	}
}

// A head-sharing draft seeded with a target alone twice its cost drafts
// at first, and stops: its recalibration rounds time the target alone
// without the capture, where they used to capture and time nothing.
func TestChooserRecalibratesUnderCapture(t *testing.T) {
	p := pair{step: 120 * time.Microsecond, verify: linear(200*time.Microsecond, 10*time.Microsecond), accept: 0.3, capture: 20 * time.Microsecond}
	p.stepAt = func(int) time.Duration { return p.step }
	s := newSimWith(1, CostOptions{Block: true, MaxK: 4})
	s.c.Seed(Costs{Draft: []time.Duration{0, p.step, p.step, p.step, p.step}, Verify: []time.Duration{0, 2 * p.verify(1), p.verify(2), p.verify(3), p.verify(4), p.verify(5)}})
	s.run(p, 1000)
	if countDrafting(s.ks[:20]) == 0 {
		t.Fatalf("the seed too high did not turn drafting on: the test shows nothing")
	}
	if n := countDrafting(s.ks[600:]); n > 40 {
		t.Errorf("%d of the last 400 rounds drafted a draft that loses", n)
	}
}
