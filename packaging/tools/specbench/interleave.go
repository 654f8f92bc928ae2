package main

// Interleaving. A 5% line cannot be drawn from the target alone timed
// once at the start of a run and each mode later: on a GPU the same row
// run twice moved by 5%, and on the shared CPU the target alone ranged
// 688-840 tok/s across five runs. So each row times the target alone
// beside the mode, alternating, and reports the ratio of the sums with
// the per-repetition ratios' spread.

import (
	"context"
	"slices"
)

// setRun is one run of a prompt set on one runner: the sums over its
// prompts.
type setRun struct {
	tokens int
	secs   float64 // decode seconds, on the run's clock
	// engine is the engine's own speedup (Stats.Speedup) weighted by the
	// tokens of the generations that report one; engineTokens their sum.
	engine       float64
	engineTokens int
	drafted      int
	accepted     int
	steps        int
	rounds       []round
	// gens is the rounds of each generation, in prompt order (for the
	// trace, and the tokens for the greedy identity check), genSecs
	// their decode seconds.
	gens    [][]round
	genSecs []float64
}

// tokS is the run's decode tokens per second.
func (s setRun) tokS() float64 {
	if s.secs <= 0 {
		return 0
	}
	return float64(s.tokens) / s.secs
}

// pair is one repetition of a row: the prompt set on the target alone
// and on the mode, and which ran first.
type pair struct {
	alone, mode setRun
	modeFirst   bool
}

// ratio is the repetition's speedup: the mode's tokens per second over
// the alone run's.
func (p pair) ratio() float64 {
	if a := p.alone.tokS(); a > 0 {
		return p.mode.tokS() / a
	}
	return 0
}

// modeFirst says whether repetition rep of the row-th row runs the mode
// before the target alone: the order flips every repetition and every
// row, so that over a row (an even number of repetitions) and over rows
// each side goes first as often, and a drift in the machine's speed
// during a row weighs on both.
func modeFirst(row, rep int) bool { return (row+rep)%2 == 1 }

// interleave runs reps repetitions of the row-th row, each the target
// alone and the mode in modeFirst's order, and returns them in order.
func interleave(ctx context.Context, row, reps int, alone, mode func(context.Context) (setRun, error)) ([]pair, error) {
	pairs := make([]pair, 0, reps)
	for rep := range reps {
		p := pair{modeFirst: modeFirst(row, rep)}
		first, second := alone, mode
		a, b := &p.alone, &p.mode
		if p.modeFirst {
			first, second, a, b = mode, alone, b, a
		}
		var err error
		if *a, err = first(ctx); err != nil {
			return nil, err
		}
		if *b, err = second(ctx); err != nil {
			return nil, err
		}
		pairs = append(pairs, p)
	}
	return pairs, nil
}

// spread is what a row's repetitions say: the speedup of the summed
// tokens and seconds of each side, the per-repetition ratios, their
// range, and the summed tokens per second of each side.
type spread struct {
	speedup, min, max float64
	ratios            []float64
	modeTokS          float64
	aloneTokS         float64
}

// summarize sums each side of pairs and sets the ratio of the sums beside
// the per-repetition ratios. A side with no time reads 0 tok/s.
func summarize(pairs []pair) spread {
	var a, m setRun
	var s spread
	for _, p := range pairs {
		a.tokens += p.alone.tokens
		a.secs += p.alone.secs
		m.tokens += p.mode.tokens
		m.secs += p.mode.secs
		s.ratios = append(s.ratios, p.ratio())
	}
	s.aloneTokS, s.modeTokS = a.tokS(), m.tokS()
	if s.aloneTokS > 0 {
		s.speedup = s.modeTokS / s.aloneTokS
	}
	if len(s.ratios) > 0 {
		s.min, s.max = slices.Min(s.ratios), slices.Max(s.ratios)
	}
	return s
}

// merged is the mode's samples of a row as one: every sum, and the rounds
// of all repetitions in order.
func merged(pairs []pair) setRun {
	var m setRun
	for _, p := range pairs {
		s := p.mode
		m.tokens += s.tokens
		m.secs += s.secs
		m.engine += s.engine
		m.engineTokens += s.engineTokens
		m.drafted += s.drafted
		m.accepted += s.accepted
		m.steps += s.steps
		m.rounds = append(m.rounds, s.rounds...)
		m.gens = append(m.gens, s.gens...)
	}
	return m
}

// sameOutput says whether every repetition of both sides generated the
// same tokens for each prompt as the target alone's first repetition: a
// greedy row's check that drafting leaves the output the target's (and
// that the target alone is deterministic).
func sameOutput(pairs []pair) bool {
	if len(pairs) == 0 {
		return false
	}
	want := pairs[0].alone.gens
	for _, p := range pairs {
		for _, s := range []setRun{p.alone, p.mode} {
			if len(s.gens) != len(want) {
				return false
			}
			for i, g := range s.gens {
				if !slices.Equal(tokensOf(g), tokensOf(want[i])) {
					return false
				}
			}
		}
	}
	return true
}

// loss is where a row's mode spent its time beyond the target alone's
// rate in the same row (its summed decode seconds over its tokens), in
// seconds: each generation's first round (untimed by the rounds: the
// rest of its decode time), the rounds that drafted, and the others.
// The three add up to the mode's decode seconds less its tokens at the
// target alone's rate.
type loss struct {
	First     float64 `json:"first_rounds"`
	Drafted   float64 `json:"drafted_rounds"`
	Undrafted float64 `json:"undrafted_rounds"`
}

// losses sums loss over pairs.
func losses(pairs []pair) loss {
	var l loss
	rate := summarize(pairs).aloneTokS
	if rate == 0 {
		return l
	}
	perToken := 1 / rate
	for _, p := range pairs {
		for i, g := range p.mode.gens {
			rest := p.mode.genSecs[i]
			for j, r := range g {
				if j == 0 {
					continue
				}
				extra := r.took.Seconds() - float64(len(r.ids))*perToken
				rest -= r.took.Seconds()
				if r.drafted > 0 {
					l.Drafted += extra
				} else {
					l.Undrafted += extra
				}
			}
			if len(g) > 0 {
				l.First += rest - float64(len(g[0].ids))*perToken
			}
		}
	}
	return l
}
