package main

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"
)

func TestAcceptance(t *testing.T) {
	rounds := []round{
		{drafted: 4, accepted: 4}, // 4 accepted, no rejection
		{drafted: 4, accepted: 1}, // 1 accepted, then a rejection
		{drafted: 0, accepted: 0}, // no draft: no evidence
		{drafted: 2, accepted: 0}, // a rejection
	}
	if got, want := acceptance(rounds), 5.0/7; math.Abs(got-want) > 1e-12 {
		t.Errorf("acceptance = %g, want %g", got, want)
	}
	if got := acceptance([]round{{}}); got != 0 {
		t.Errorf("acceptance without drafts = %g", got)
	}
}

func TestIdeal(t *testing.T) {
	verify := make([]time.Duration, 17)
	for r := range verify {
		verify[r] = 10*time.Millisecond + time.Duration(r)*time.Millisecond
	}
	// Two rounds of k = 2 at acceptance 0.5: E = 1 + 0.5 + 0.25 = 1.75
	// tokens for 2*2 ms + 13 ms each, against one token per 11 ms.
	out := row{Acceptance: 0.5}
	rounds := []round{{drafted: 2, accepted: 1}, {drafted: 2, accepted: 0}}
	ideal(&out, rounds, verify, 2*time.Millisecond)
	if want := 1.75 / 17 * 11; math.Abs(out.Ideal-want) > 1e-9 || out.DraftCost != "measured" {
		t.Errorf("ideal %g (%s), want %g measured", out.Ideal, out.DraftCost, want)
	}
	// Without a measured step, it is what the rounds took beyond their
	// verification, per drafted token: (20 - 13) ms / 2.
	out = row{Acceptance: 0.5}
	rounds = []round{{drafted: 2, accepted: 1, took: 20 * time.Millisecond}}
	ideal(&out, rounds, verify, 0)
	if out.DraftCost != "derived" || math.Abs(out.DraftStep-3.5) > 1e-9 {
		t.Errorf("derived step %g ms (%s), want 3.5", out.DraftStep, out.DraftCost)
	}
}

func TestParse(t *testing.T) {
	o, err := parse([]string{"-target", "t.gguf", "-temps", "0,0.7", "-sets", "jargon"})
	if err != nil || len(o.temps) != 2 || o.temps[1] != 0.7 || len(o.sets) != 1 || o.label != "cpu" {
		t.Errorf("parse: %+v %v", o, err)
	}
	o, err = parse([]string{"-target", "t.gguf", "-clock", "cpu", "-threads", "1"})
	if err != nil || o.threads != 1 || o.clock == nil {
		t.Fatalf("parse -clock cpu: %+v %v", o, err)
	}
	// The process's CPU time moves with work done.
	t0, moved := o.clock(), false
	for i := 0; i < 1<<28 && !moved; i++ {
		moved = o.clock().After(t0)
	}
	if !moved {
		t.Error("the CPU clock did not move")
	}
	o, err = parse([]string{"-target", "t.gguf", "-repeat", "5", "-fresh", "mode", "-modes", "alone,eagle3q8", "-eagle-q8", "e.gguf"})
	if m, ok := modeFor(o.modes[1], o); err != nil || o.repeat != 5 || o.fresh != "mode" || !ok || m.draft != "e.gguf" {
		t.Errorf("parse -repeat -fresh -eagle-q8: %+v %v", o, err)
	}
	if o, err := parse([]string{"-target", "t.gguf"}); err != nil || o.repeat != 3 || o.fresh != "row" {
		t.Errorf("defaults: %+v %v", o, err)
	}
	for _, bad := range [][]string{{}, {"-target", "t", "-sets", "poetry"}, {"-target", "t", "-repeat", "0"}, {"-target", "t", "-fresh", "never"}, {"-target", "t", "-modes", "alone,medusa"}, {"-target", "t", "-temps", "-1"}, {"-target", "t", "-n", "0"}, {"-target", "t", "-clock", "sundial"}} {
		if _, err := parse(bad); err == nil {
			t.Errorf("parse(%q) accepted", bad)
		}
	}
}

func TestLengths(t *testing.T) {
	ks, on := lengths([]round{{drafted: 4}, {drafted: 0}, {drafted: 4}, {drafted: 2}})
	if got := histogram(ks); got != "0:1 2:1 4:2" || on != 0.75 {
		t.Errorf("histogram %q, drafting share %g", got, on)
	}
	if ks, on := lengths(nil); len(ks) != 0 || on != 0 {
		t.Errorf("no rounds: %v %g", ks, on)
	}
}

func TestByPositionAndTrace(t *testing.T) {
	rounds := []round{{drafted: 3, accepted: 3}, {drafted: 2, accepted: 0}, {}, {drafted: 1, accepted: 1}}
	got := byPosition(rounds)
	want := []float64{2.0 / 3, 1.0 / 2, 1}
	if len(got) != len(want) {
		t.Fatalf("byPosition = %v, want %v", got, want)
	}
	for i := range want {
		if math.Abs(got[i]-want[i]) > 1e-12 {
			t.Errorf("byPosition = %v, want %v", got, want)
		}
	}
	if got, want := trace(rounds), "3/3 2/0 - 1/1"; got != want {
		t.Errorf("trace = %q, want %q", got, want)
	}
}

// TestInterleaveOrder runs fake sides that log their calls: each
// repetition runs both, the first side flips every repetition and every
// row, and each result lands on its own side whatever the order.
func TestInterleaveOrder(t *testing.T) {
	for _, c := range []struct {
		row  int
		want string
	}{{0, "AM MA AM MA"}, {1, "MA AM MA AM"}, {6, "AM MA AM MA"}} {
		var calls []string
		fake := func(name string, tokens int) func(context.Context) (setRun, error) {
			return func(context.Context) (setRun, error) {
				calls = append(calls, name)
				return setRun{tokens: tokens + len(calls), secs: 1}, nil
			}
		}
		pairs, err := interleave(context.Background(), c.row, 4, fake("A", 100), fake("M", 200))
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for i := 0; i < len(calls); i += 2 {
			got = append(got, calls[i]+calls[i+1])
		}
		if strings.Join(got, " ") != c.want {
			t.Errorf("row %d: order %v, want %s", c.row, got, c.want)
		}
		for i, p := range pairs {
			// The alone side's tokens are 100 plus the call count at its
			// run, the mode's 200 plus its own: each ran where modeFirst says.
			aloneCall, modeCall := 2*i+1, 2*i+2
			if p.modeFirst {
				aloneCall, modeCall = modeCall, aloneCall
			}
			if p.alone.tokens != 100+aloneCall || p.mode.tokens != 200+modeCall || p.modeFirst != (got[i] == "MA") {
				t.Errorf("row %d repetition %d: %+v", c.row, i, p)
			}
		}
	}
}

func TestInterleaveStopsOnError(t *testing.T) {
	calls := 0
	ok := func(context.Context) (setRun, error) { calls++; return setRun{tokens: 1, secs: 1}, nil }
	bad := func(context.Context) (setRun, error) { calls++; return setRun{}, errors.New("out of memory") }
	if _, err := interleave(context.Background(), 0, 3, ok, bad); err == nil || calls != 2 {
		t.Errorf("err %v after %d calls, want an error after 2", err, calls)
	}
}

// TestSummarize checks that the speedup is the ratio of the sums, not the
// mean of the repetitions' ratios (1.1 here): a repetition weighs by its
// time.
func TestSummarize(t *testing.T) {
	pairs := []pair{
		{alone: setRun{tokens: 100, secs: 1}, mode: setRun{tokens: 100, secs: 0.5}}, // 2x
		{alone: setRun{tokens: 100, secs: 1}, mode: setRun{tokens: 100, secs: 2}},   // 0.5x
		{alone: setRun{tokens: 100, secs: 2}, mode: setRun{tokens: 100, secs: 2.5}}, // 0.8x
	}
	s := summarize(pairs)
	// The mode's 300 tokens in 5 s against the target alone's 300 in 4 s.
	if math.Abs(s.speedup-0.8) > 1e-12 || s.aloneTokS != 75 || s.modeTokS != 60 {
		t.Errorf("speedup %g (%g / %g tok/s), want 0.8 (60 / 75)", s.speedup, s.modeTokS, s.aloneTokS)
	}
	want := []float64{2, 0.5, 0.8}
	for i := range want {
		if math.Abs(s.ratios[i]-want[i]) > 1e-12 {
			t.Errorf("ratios %v, want %v", s.ratios, want)
		}
	}
	if s.min != 0.5 || s.max != 2 {
		t.Errorf("range %g-%g, want 0.5-2", s.min, s.max)
	}
	if z := summarize([]pair{{alone: setRun{tokens: 5}, mode: setRun{tokens: 5, secs: 1}}}); z.speedup != 0 || z.ratios[0] != 0 {
		t.Errorf("alone side without time: %+v", z)
	}
}

func TestMergedAndSameOutput(t *testing.T) {
	gen := func(ids ...int32) []round { return []round{{drafted: 1, accepted: 1, ids: ids[:1]}, {ids: ids[1:]}} }
	run := func(gens ...[]round) setRun {
		s := setRun{tokens: 2 * len(gens), secs: 1, engine: 2, engineTokens: 2, drafted: len(gens), accepted: len(gens), steps: 2 * len(gens)}
		for _, g := range gens {
			s.gens = append(s.gens, g)
			s.rounds = append(s.rounds, g...)
		}
		return s
	}
	a, b := gen(1, 2, 3), gen(4, 5)
	pairs := []pair{{alone: run(a, b), mode: run(a, b)}, {alone: run(a, b), mode: run(a, b)}}
	m := merged(pairs)
	if m.tokens != 8 || m.secs != 2 || m.engineTokens != 4 || m.steps != 8 || len(m.rounds) != 8 || len(m.gens) != 4 {
		t.Errorf("merged %+v", m)
	}
	if !sameOutput(pairs) {
		t.Error("same tokens read as different")
	}
	// The same tokens cut into other rounds are the same output.
	pairs[1].mode = run([]round{{ids: []int32{1}}, {ids: []int32{2, 3}}}, b)
	if !sameOutput(pairs) {
		t.Error("same tokens in other rounds read as different")
	}
	for _, bad := range []setRun{run(a, gen(4, 6)), run(a), run(b, a)} {
		pairs[1].mode = bad
		if sameOutput(pairs) {
			t.Errorf("different output %v read as the same", bad.gens)
		}
	}
	pairs[1].mode = run(a, b)
	pairs[1].alone = run(a, gen(4, 6)) // the target alone itself moved
	if sameOutput(pairs) || sameOutput(nil) {
		t.Error("a changed target alone, or no repetitions, read as the same")
	}
}

// TestRowOfPairs checks the row a mode's repetitions make: both sides'
// tok/s from the sums, the per-repetition ratios and orders, each
// repetition's seconds by prompt, and the mode's rounds in order with a
// "|" between generations.
func TestRowOfPairs(t *testing.T) {
	gen := func(took time.Duration, drafted, accepted int) []round {
		return []round{{ids: []int32{1}}, {drafted: drafted, accepted: accepted, took: took, ids: make([]int32, accepted+1), speedup: 1.5, expected: 1.2}}
	}
	side := func(secs ...float64) setRun {
		s := setRun{engine: 3, engineTokens: 2, steps: 2 * len(secs)}
		for _, v := range secs {
			g := gen(2*time.Millisecond, 2, 1)
			s.gens, s.genSecs = append(s.gens, g), append(s.genSecs, v)
			s.rounds = append(s.rounds, g...)
			s.tokens += 3
			s.secs += v
			s.drafted += 2
			s.accepted++
		}
		return s
	}
	b := &bench{o: options{label: "CPU", target: "/m/t.gguf", fresh: "row"}}
	pairs := []pair{
		{alone: side(0.1, 0.1), mode: side(0.05, 0.05)},
		{alone: side(0.1, 0.1), mode: side(0.1, 0.1), modeFirst: true},
	}
	out := b.summarize(mode{name: "draft adaptive", draft: "d.gguf"}, "known", 0.7, pairs)
	// 12 tokens in 0.4 s alone, in 0.3 s drafting.
	if out.Target != "t" || math.Abs(out.AloneTokS-30) > 1e-9 || math.Abs(out.TokS-40) > 1e-9 || math.Abs(out.Speedup-4.0/3) > 1e-9 {
		t.Errorf("row %s: %g tok/s against %g, x %g; want t, 40 against 30", out.Target, out.TokS, out.AloneTokS, out.Speedup)
	}
	if len(out.SpeedupReps) != 2 || math.Abs(out.SpeedupReps[0]-2) > 1e-9 || math.Abs(out.SpeedupReps[1]-1) > 1e-9 || out.SpeedupMin != 1 || out.SpeedupMax != 2 {
		t.Errorf("repetitions %v (%g-%g), want [2 1]", out.SpeedupReps, out.SpeedupMin, out.SpeedupMax)
	}
	if len(out.ModeFirst) != 2 || out.ModeFirst[0] || !out.ModeFirst[1] || out.Fresh != "row" {
		t.Errorf("orders %v, fresh %q", out.ModeFirst, out.Fresh)
	}
	if len(out.ModeSeconds) != 2 || out.ModeSeconds[0][1] != 0.05 || out.AloneSeconds[1][0] != 0.1 {
		t.Errorf("seconds by prompt: alone %v, mode %v", out.AloneSeconds, out.ModeSeconds)
	}
	if want := "- 2/1 | - 2/1 | - 2/1 | - 2/1"; out.Trace != want {
		t.Errorf("trace %q, want %q", out.Trace, want)
	}
	if len(out.RoundMS) != 8 || out.RoundMS[1] != 2 || len(out.RoundSpeedup) != 8 || out.RoundExpected[1] != 1.2 {
		t.Errorf("rounds: ms %v, engine %v, expected %v", out.RoundMS, out.RoundSpeedup, out.RoundExpected)
	}
	// 8 drafted in 8 steps; half the positions kept, each rejection after one.
	if out.MeanK != 1 || out.Engine != 1.5 || math.Abs(out.Acceptance-0.5) > 1e-12 || out.On != 0.5 {
		t.Errorf("mean k %g, engine %g, acceptance %g, drafting %g", out.MeanK, out.Engine, out.Acceptance, out.On)
	}
}

// TestLosses checks the split of the mode's time beyond the target
// alone's rate against sums made by hand, and that the parts add up to
// the whole.
func TestLosses(t *testing.T) {
	ms := time.Millisecond
	// The target alone: 10 tokens in 10 ms, 1 ms a token.
	alone := setRun{tokens: 10, secs: 0.010}
	// The mode: a first round of 1 token, a drafting round of 3 tokens in
	// 2 ms, an undrafted round of 1 token in 1.5 ms; 12 ms in all, so the
	// first round took 12 - 3.5 = 8.5 ms for its 1 token.
	g := []round{{ids: []int32{1}}, {drafted: 2, accepted: 2, took: 2 * ms, ids: []int32{2, 3, 4}}, {took: 1500 * time.Microsecond, ids: []int32{5}}}
	mode := setRun{tokens: 5, secs: 0.012, gens: [][]round{g}, genSecs: []float64{0.012}}
	l := losses([]pair{{alone: alone, mode: mode}})
	want := loss{First: 0.0075, Drafted: -0.001, Undrafted: 0.0005}
	for _, c := range []struct{ got, want float64 }{{l.First, want.First}, {l.Drafted, want.Drafted}, {l.Undrafted, want.Undrafted}} {
		if math.Abs(c.got-c.want) > 1e-12 {
			t.Fatalf("losses %+v, want %+v", l, want)
		}
	}
	if whole := mode.secs - 5*0.001; math.Abs(l.First+l.Drafted+l.Undrafted-whole) > 1e-12 {
		t.Errorf("parts add to %g, the whole is %g", l.First+l.Drafted+l.Undrafted, whole)
	}
	if z := losses([]pair{{mode: mode}}); z != (loss{}) {
		t.Errorf("no alone tokens: %+v", z)
	}
}
