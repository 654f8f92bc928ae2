// Command specbench measures what speculative decoding gains over the
// target alone, mode by mode, and sets beside each measured speedup the
// ideal one: what the measured acceptance and costs promise. It prints
// Markdown table rows (packaging/bench-spec.sh gathers them):
//
//	specbench -target t.gguf -draft d.gguf -eagle e.gguf -backend cuda -label H200 -header
//
// Modes: the target alone, a model draft drafting exactly 4 tokens a
// round, the same draft adaptive (the engine's own choice of length: the
// Runner's spec.Chooser, from the costs and acceptance it measures, down
// to the target alone where drafting does not pay), prompt lookup, an
// EAGLE-3 draft (and, given -eagle-q8, a second, Q8_0 one) and, asked for,
// a DFlash draft (-dflash), all adaptive (a DFlash draft's block is also
// timed alone for every length: dflash.go). Each runs chat prompts the
// demo drafts know (scripture, fortunes) and prompts they do not
// (technical jargon), greedy and at temperature 0.7, for -n tokens each.
// Beside the speedups, a row gives the engine's own measured speedup
// (engine.Stats.Speedup), the share of rounds that drafted and how many
// rounds drafted each length ("k:rounds"); a greedy row also says whether
// its output is the target alone's.
//
// How a row is timed (interleave.go). The target alone stays loaded, and
// warmed, for the whole run, beside the runner of the mode being
// measured: a row runs its whole prompt set -repeat times on each, the
// two alternating, the order flipping every repetition and every row
// (alone first, then the mode; then the mode first; ...), so that a
// machine getting slower or faster during a row weighs on both sides
// alike. The speedup is the mode's summed tokens over its summed decode
// seconds against the same sums of the alone runs of that row; the
// per-repetition ratios give its spread (min-max) and the first one is
// also reported apart. The mode "alone" is the same measurement of a
// second load of the target alone against the first: its spread is the
// method's noise floor. Each row also says (a stderr line, and loss_ms
// in the JSON) where the mode's time went beyond the target alone's rate
// in that row: its generations' first rounds (a fresh load's first
// request, a draft's prompt catch-up), the rounds that drafted, and the
// others; the JSON keeps every round's time and the engine's own
// estimates after it, to follow a row that lost round by round.
//
// The first request on a freshly loaded pair counts: users meet it (the
// Chooser knows nothing of a new pair's costs until it measured some, and
// on a GPU the first run of each program compiles it). So with -fresh row
// (the default) every row loads its mode afresh and its first repetition
// is the first request on that load; with -fresh mode a mode is loaded
// once for all its rows (a big target's load on a GPU takes seconds) and
// only its first greedy and its first sampled row meet a fresh Chooser
// (the Runner keeps one for each). Either way the mode's target, like the
// target alone, first ran every verification pass size once (passCosts),
// so that neither side pays for compiling target passes the other
// already compiled; the draft's own programs are the mode's to pay.
//
// The ideal speedup of a row: with a the acceptance rate (the geometric
// model's estimate, accepted / (accepted + rounds that rejected one)), a
// round drafting k tokens yields E(k) = (1 - a^(k+1)) / (1 - a) tokens and
// costs k*draft + verify(k+1); summed over the row's rounds (their k as
// drafted) against one token per verify(1). verify(r) is the median time
// of a target pass of r rows (Runner.Forward); draft is a model draft's
// one-token pass timed the same way, or, for EAGLE-3 and lookup (which
// cannot run alone), the rounds' time beyond their verification divided
// by their drafted tokens ("derived").
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tandem-run/tandem/engine"
	"github.com/tandem-run/tandem/packaging/tools/internal/cpuclock"
)

// The prompt sets.
var promptSets = map[string][]string{
	"known": {"Quote Genesis 1:3.", "Tell me a fortune.", "Quote Psalms 23:1."},
	"jargon": {
		"Explain how TCP congestion control recovers from packet loss.",
		"Write a Kubernetes readiness probe for a gRPC service.",
		"What does a B-tree index cost on writes in PostgreSQL?",
	},
}

func main() {
	if err := run(context.Background(), os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "specbench:", err)
		os.Exit(1)
	}
}

type options struct {
	target, draft, eagle, eagleQ8, dflash, backend, label string
	n, reps, repeat, threads                              int
	fresh                                                 string           // "row" or "mode": how often a mode is loaded
	clock                                                 func() time.Time // what every time is read on
	modes, sets                                           []string
	temps                                                 []float64
	seed                                                  uint64
	header                                                bool
	jsonOut                                               string
}

// modeNames are the modes -modes may name (modeFor).
var modeNames = []string{"alone", "fixed4", "adaptive", "lookup", "eagle3", "eagle3k1", "eagle3q8", "dflash"}

func parse(args []string) (options, error) {
	var o options
	fs := flag.NewFlagSet("specbench", flag.ContinueOnError)
	fs.StringVar(&o.target, "target", "", "target GGUF (required)")
	fs.StringVar(&o.draft, "draft", "", "model draft GGUF (modes fixed4, adaptive)")
	fs.StringVar(&o.eagle, "eagle", "", "EAGLE-3 draft GGUF (modes eagle3, eagle3k1)")
	fs.StringVar(&o.eagleQ8, "eagle-q8", "", "a Q8_0 EAGLE-3 draft GGUF (mode eagle3q8, not in the default modes)")
	fs.StringVar(&o.dflash, "dflash", "", "DFlash draft GGUF (mode dflash, not in the default modes)")
	fs.StringVar(&o.backend, "backend", "cpu", "cpu or cuda")
	fs.StringVar(&o.label, "label", "", "device label in the table (default: the backend)")
	fs.IntVar(&o.n, "n", 64, "tokens generated per prompt")
	fs.IntVar(&o.reps, "reps", 5, "timed repetitions of each pass size")
	fs.IntVar(&o.repeat, "repeat", 3, "repetitions of each row's prompt set, alternating the target alone and the mode")
	fs.StringVar(&o.fresh, "fresh", "row", "load each mode afresh for every row (row) or once for all its rows (mode)")
	modes := fs.String("modes", "alone,fixed4,adaptive,lookup,eagle3", "modes to run: "+strings.Join(modeNames, ","))
	sets := fs.String("sets", "known,jargon", "prompt sets")
	temps := fs.String("temps", "0,0.7", "sampling temperatures (0: greedy)")
	fs.Uint64Var(&o.seed, "seed", 1, "sampling seed")
	fs.IntVar(&o.threads, "threads", 0, "CPU worker threads (0: all cores)")
	clock := fs.String("clock", "wall", "wall, or cpu: the process's CPU time (a CPU run on a machine others load, with -threads 1)")
	fs.BoolVar(&o.header, "header", false, "print the table header first")
	fs.StringVar(&o.jsonOut, "json", "", "also write the rows as JSON to this file")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if o.target == "" || o.n <= 0 || o.reps <= 0 || o.repeat <= 0 {
		return o, errors.New("need -target, and -n, -reps and -repeat above 0")
	}
	if o.fresh != "row" && o.fresh != "mode" {
		return o, fmt.Errorf("-fresh %q (row, mode)", o.fresh)
	}
	if o.label == "" {
		o.label = o.backend
	}
	switch *clock {
	case "wall":
		o.clock = time.Now
	case "cpu":
		if o.clock = cpuclock.Process(); o.clock == nil {
			return o, errors.New("-clock cpu: no process CPU time on this system")
		}
	default:
		return o, fmt.Errorf("clock %q (wall, cpu)", *clock)
	}
	o.modes, o.sets = strings.Split(*modes, ","), strings.Split(*sets, ",")
	for _, m := range o.modes {
		if !slices.Contains(modeNames, m) {
			return o, fmt.Errorf("mode %q (%s)", m, strings.Join(modeNames, ", "))
		}
	}
	for _, s := range o.sets {
		if _, ok := promptSets[s]; !ok {
			return o, fmt.Errorf("prompt set %q (known, jargon)", s)
		}
	}
	for _, t := range strings.Split(*temps, ",") {
		v, err := strconv.ParseFloat(t, 64)
		if err != nil || v < 0 {
			return o, fmt.Errorf("temperature %q", t)
		}
		o.temps = append(o.temps, v)
	}
	return o, nil
}

// row is one line of the table.
type row struct {
	Device  string  `json:"device"`
	Target  string  `json:"target"`
	Mode    string  `json:"mode"`
	Prompts string  `json:"prompts"`
	Temp    float64 `json:"temperature"`
	TokS    float64 `json:"tok_s"`
	// AloneTokS is the target alone's over the same row's interleaved
	// runs; Speedup is TokS over it, from the summed tokens and seconds of
	// each side. SpeedupReps is each repetition's own ratio (the first on
	// a fresh load of the mode with -fresh row), and ModeFirst which side
	// ran first in it.
	AloneTokS   float64   `json:"alone_tok_s"`
	Speedup     float64   `json:"speedup"`
	SpeedupReps []float64 `json:"speedup_by_repetition"`
	SpeedupMin  float64   `json:"speedup_min"`
	SpeedupMax  float64   `json:"speedup_max"`
	ModeFirst   []bool    `json:"mode_first"`
	// AloneSeconds and ModeSeconds are each repetition's decode seconds
	// by prompt, on each side.
	AloneSeconds [][]float64 `json:"alone_seconds"`
	ModeSeconds  [][]float64 `json:"mode_seconds"`
	Fresh        string      `json:"fresh"` // "row" or "mode" (-fresh)
	Acceptance   float64     `json:"acceptance"`
	MeanK        float64     `json:"mean_k"`
	Ideal        float64     `json:"ideal_speedup"`
	DraftCost    string      `json:"draft_cost"` // "measured" or "derived"
	DraftStep    float64     `json:"draft_step_ms"`
	// KDrafted counts the rounds by the tokens they drafted (the engine's
	// chosen length, or the fixed one, where the request had room); On is
	// the share of rounds that drafted.
	KDrafted map[int]int `json:"k_drafted"`
	On       float64     `json:"drafting_share"`
	// Engine is the speedup the engine measured on its own steps against
	// its measured one-row pass (engine.Stats.Speedup), over the row's
	// generations that report one, weighted by their tokens.
	Engine float64 `json:"engine_speedup"`
	// Identical says, for a greedy row, whether its tokens are the target
	// alone's; BlockMS is a DFlash row's block time by drafted tokens.
	Identical *bool           `json:"identical_to_alone,omitempty"`
	BlockMS   map[int]float64 `json:"block_ms,omitempty"`
	// ByPosition is the acceptance at each drafted position i+1 among the
	// rounds that drafted that far (the chooser prices the first apart);
	// Trace is the rounds in order as "drafted/accepted" ("-" for a
	// round without a draft), each generation's after a "|", to see
	// where an adaptive row went off; RoundMS is each round's time in
	// the same order (its first is 0: timed from the round before), and
	// RoundSpeedup and RoundExpected the engine's measured speedup of the
	// generation so far and its chooser's expectation of the next round,
	// as the statistics said after each round (to see where the engine's
	// own estimate parts from the row's measured speedup).
	ByPosition    []float64 `json:"acceptance_by_position,omitempty"`
	Trace         string    `json:"trace,omitempty"`
	RoundMS       []float64 `json:"round_ms,omitempty"`
	RoundSpeedup  []float64 `json:"round_engine_speedup,omitempty"`
	RoundExpected []float64 `json:"round_expected_speedup,omitempty"`
	// Loss is where the mode's time went beyond the target alone's rate
	// (interleave.go), in ms.
	Loss loss `json:"loss_ms"`
}

// bench is a run's state across its modes: the target alone, loaded and
// warmed for the whole run, its pass costs, the model draft's step, and
// the rows measured so far (whose count orders each row's repetitions).
type bench struct {
	o         options
	alone     *engine.Runner
	verify    []time.Duration
	draftStep time.Duration
	curves    map[string][]time.Duration // DFlash block times by draft (dflash.go)
	rows      []row
}

func run(ctx context.Context, args []string) error {
	o, err := parse(args)
	if err != nil {
		return err
	}
	if o.header {
		fmt.Println("| device | target | mode | prompts | sampling | tok/s | alone tok/s | x alone | x range | x first | accept | mean k | ideal x | measured/ideal | draft step | engine x | drafting | k drafted (rounds) |")
		fmt.Println("|---|---|---|---|---|---:|---:|---:|---|---:|---:|---:|---:|---:|---|---:|---:|---|")
	}
	// The target alone: its pass costs, and the baseline of every row.
	alone, err := loadMode(ctx, o, o.target, mode{name: "alone", alone: true})
	if err != nil {
		return err
	}
	defer alone.Close()
	b := &bench{o: o, alone: alone, curves: map[string][]time.Duration{}}
	if b.verify, err = passCosts(ctx, alone, promptSets["known"][0], 16, o.reps, o.clock); err != nil {
		return err
	}
	var curve []string
	for _, r := range []int{1, 2, 4, 8, 16} {
		curve = append(curve, fmt.Sprintf("%d: %.3f", r, float64(b.verify[r])/1e6))
	}
	fmt.Fprintf(os.Stderr, "specbench: %s on %s: target pass ms by rows %s\n", filepath.Base(o.target), o.label, strings.Join(curve, ", "))

	// One untimed run of every row on the target alone: a process's
	// first generations pay once for what later ones reuse (its heap
	// growing, the first sampled rows' buffers), and the first row's
	// repetitions would charge that to the target alone (on the CPU, the
	// first row of the target alone's second load against the first read
	// 1.06-1.10x in three of five runs, 0.98-1.02x in the other two).
	// Each mode's first request on its own load still counts.
	for _, set := range o.sets {
		for _, temp := range o.temps {
			if _, err := measure(ctx, alone, engine.Drafting{}, o, set, temp); err != nil {
				return err
			}
		}
	}

	// A model draft's step, timed alone.
	if o.draft != "" {
		d, err := loadMode(ctx, o, o.draft, mode{alone: true})
		if err != nil {
			return err
		}
		c, err := passCosts(ctx, d, promptSets["known"][0], 1, o.reps, o.clock)
		d.Close()
		if err != nil {
			return err
		}
		b.draftStep = c[1]
	}
	for _, name := range o.modes {
		m, ok := modeFor(name, o)
		if !ok {
			continue
		}
		if err := b.mode(ctx, m); err != nil {
			return fmt.Errorf("%s: %w", m.name, err)
		}
	}
	if o.jsonOut != "" {
		data, err := json.MarshalIndent(b.rows, "", " ")
		if err != nil {
			return err
		}
		return os.WriteFile(o.jsonOut, data, 0o644)
	}
	return nil
}

// mode measures every row of m, each interleaved with the target alone,
// loading m afresh for every row or once (-fresh).
func (b *bench) mode(ctx context.Context, m mode) error {
	o := b.o
	var r *engine.Runner
	defer func() {
		if r != nil {
			r.Close()
		}
	}()
	for _, set := range o.sets {
		for _, temp := range o.temps {
			if r == nil || o.fresh == "row" {
				if r != nil {
					r.Close()
				}
				var err error
				if r, err = loadWarm(ctx, o, m); err != nil {
					return err
				}
			}
			pairs, err := interleave(ctx, len(b.rows), o.repeat,
				func(ctx context.Context) (setRun, error) {
					return measure(ctx, b.alone, engine.Drafting{}, o, set, temp)
				},
				func(ctx context.Context) (setRun, error) { return measure(ctx, r, m.drafting(), o, set, temp) })
			if err != nil {
				return err
			}
			out := b.summarize(m, set, temp, pairs)
			if temp == 0 {
				same := sameOutput(pairs)
				out.Identical = &same
				fmt.Fprintf(os.Stderr, "specbench: %s, %s, greedy: output identical to the target alone: %v\n", m.name, set, same)
			}
			rounds := merged(pairs).rounds
			switch {
			case m.alone:
				out.Ideal = 1
			case m.name == dflashMode:
				blocks, err := dflashBlocks(ctx, r, o, b.curves)
				if err != nil {
					return err
				}
				idealBlocks(&out, rounds, b.verify, blocks)
			default:
				step := time.Duration(0)
				if m.draft == o.draft && !m.lookup {
					step = b.draftStep
				}
				ideal(&out, rounds, b.verify, step)
			}
			if !m.alone {
				fmt.Fprintf(os.Stderr, "specbench: %s, %s, T=%g: x %.2f; ms beyond the target alone's rate: first rounds %+.1f, drafting rounds %+.1f (%.0f%% of rounds), other rounds %+.1f\n",
					m.name, set, temp, out.Speedup, out.Loss.First, out.Loss.Drafted, 100*out.On, out.Loss.Undrafted)
			}
			b.rows = append(b.rows, emit(o, out))
		}
	}
	return nil
}

// loadWarm loads m's runner and runs its target's pass sizes once, as
// the target alone's were before it was measured (passCosts); else its
// rows would pay for compiling and capturing them on a GPU (milliseconds
// each, against 0.2 ms a token on the demo target) and the target alone
// would not.
func loadWarm(ctx context.Context, o options, m mode) (*engine.Runner, error) {
	r, err := loadMode(ctx, o, o.target, m)
	if err != nil {
		return nil, err
	}
	if _, err := passCosts(ctx, r, promptSets["known"][0], 16, 1, o.clock); err != nil {
		r.Close()
		return nil, err
	}
	return r, nil
}

// summarize is the row of m's repetitions pairs.
func (b *bench) summarize(m mode, set string, temp float64, pairs []pair) row {
	o := b.o
	sp := summarize(pairs)
	s := merged(pairs)
	out := row{Device: o.label, Target: strings.TrimSuffix(filepath.Base(o.target), ".gguf"), Mode: m.name, Prompts: set, Temp: temp,
		TokS: sp.modeTokS, AloneTokS: sp.aloneTokS, Speedup: sp.speedup, SpeedupReps: sp.ratios, SpeedupMin: sp.min, SpeedupMax: sp.max, Fresh: o.fresh}
	l := losses(pairs)
	out.Loss = loss{First: 1e3 * l.First, Drafted: 1e3 * l.Drafted, Undrafted: 1e3 * l.Undrafted}
	for _, p := range pairs {
		out.ModeFirst = append(out.ModeFirst, p.modeFirst)
		out.AloneSeconds = append(out.AloneSeconds, p.alone.genSecs)
		out.ModeSeconds = append(out.ModeSeconds, p.mode.genSecs)
	}
	if s.steps > 0 {
		out.MeanK = float64(s.drafted) / float64(s.steps)
	}
	if s.engineTokens > 0 {
		out.Engine = s.engine / float64(s.engineTokens)
	}
	out.Acceptance = acceptance(s.rounds)
	out.KDrafted, out.On = lengths(s.rounds)
	out.ByPosition = byPosition(s.rounds)
	traces := make([]string, len(s.gens))
	for i, g := range s.gens {
		traces[i] = trace(g)
	}
	out.Trace = strings.Join(traces, " | ")
	for _, r := range s.rounds {
		out.RoundMS = append(out.RoundMS, float64(r.took)/1e6)
		if !m.alone {
			out.RoundSpeedup = append(out.RoundSpeedup, r.speedup)
			out.RoundExpected = append(out.RoundExpected, r.expected)
		}
	}
	return out
}

// modeFor is the mode a name selects, when the flags give what it needs.
func modeFor(name string, o options) (mode, bool) {
	switch name {
	case "alone":
		return mode{name: aloneMode, alone: true}, true
	case "fixed4":
		return mode{name: "draft k=4", draft: o.draft, fixedK: 4}, o.draft != ""
	case "adaptive":
		return mode{name: "draft adaptive", draft: o.draft}, o.draft != ""
	case "lookup":
		return mode{name: "lookup", lookup: true}, true
	case "eagle3":
		return mode{name: "EAGLE-3 adaptive", draft: o.eagle}, o.eagle != ""
	case "eagle3k1":
		return mode{name: "EAGLE-3 k=1", draft: o.eagle, fixedK: 1}, o.eagle != ""
	case "eagle3q8":
		return mode{name: "EAGLE-3 (Q8_0) adaptive", draft: o.eagleQ8}, o.eagleQ8 != ""
	case "dflash":
		return mode{name: dflashMode, draft: o.dflash}, o.dflash != ""
	}
	return mode{}, false
}

// aloneMode is the name of the rows of a second load of the target alone
// against the first (modeFor).
const aloneMode = "target alone"

// measure generates every prompt of set at temp on r and totals them.
func measure(ctx context.Context, r *engine.Runner, d engine.Drafting, o options, set string, temp float64) (setRun, error) {
	var s setRun
	for i, p := range promptSets[set] {
		st, rounds, err := generate(ctx, r, d, p, o.n, temp, o.seed+uint64(i), o.clock)
		if err != nil {
			return s, err
		}
		s.tokens += st.GeneratedTokens
		s.secs += st.DecodeSeconds
		s.drafted += st.Drafted
		s.accepted += st.Accepted
		s.steps += st.Steps
		if st.Speedup > 0 { // 0 until the target alone was timed past its first runs
			s.engine += st.Speedup * float64(st.GeneratedTokens)
			s.engineTokens += st.GeneratedTokens
		}
		s.rounds = append(s.rounds, rounds...)
		s.gens = append(s.gens, rounds)
		s.genSecs = append(s.genSecs, st.DecodeSeconds)
	}
	return s, nil
}

// byPosition is the acceptance at each drafted position among the rounds
// that drafted a token there.
func byPosition(rounds []round) []float64 {
	var tried, kept []int
	for _, r := range rounds {
		for len(tried) < r.drafted {
			tried, kept = append(tried, 0), append(kept, 0)
		}
		for i := range r.drafted {
			tried[i]++
			if i < r.accepted {
				kept[i]++
			}
		}
	}
	out := make([]float64, len(tried))
	for i := range tried {
		out[i] = float64(kept[i]) / float64(tried[i])
	}
	return out
}

// trace writes the rounds as "drafted/accepted", "-" for no draft.
func trace(rounds []round) string {
	parts := make([]string, len(rounds))
	for i, r := range rounds {
		parts[i] = "-"
		if r.drafted > 0 {
			parts[i] = fmt.Sprintf("%d/%d", r.drafted, r.accepted)
		}
	}
	return strings.Join(parts, " ")
}

// lengths counts rounds by the tokens they drafted, and the share that
// drafted any.
func lengths(rounds []round) (map[int]int, float64) {
	ks := map[int]int{}
	on := 0
	for _, r := range rounds {
		ks[r.drafted]++
		if r.drafted > 0 {
			on++
		}
	}
	if len(rounds) == 0 {
		return ks, 0
	}
	return ks, float64(on) / float64(len(rounds))
}

// histogram writes a length count as "k:rounds" pairs, k ascending.
func histogram(ks map[int]int) string {
	keys := slices.Sorted(maps.Keys(ks))
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%d:%d", k, ks[k])
	}
	return strings.Join(parts, " ")
}

// acceptance is the geometric model's estimate over rounds that drafted:
// accepted tokens over accepted tokens plus rejections.
func acceptance(rounds []round) float64 {
	var acc, fail int
	for _, r := range rounds {
		if r.drafted > 0 {
			acc += r.accepted
			if r.accepted < r.drafted {
				fail++
			}
		}
	}
	if acc+fail == 0 {
		return 0
	}
	return float64(acc) / float64(acc+fail)
}

// ideal sets the row's ideal speedup from its rounds, the target's pass
// costs verify[rows] and the draft step (0: derive it from the rounds).
func ideal(out *row, rounds []round, verify []time.Duration, step time.Duration) {
	v := func(rows int) float64 { return float64(verify[min(rows, len(verify)-1)]) }
	out.DraftCost = "measured"
	if step == 0 {
		out.DraftCost = "derived"
		var extra float64
		var n int
		for _, r := range rounds {
			if r.took > 0 && r.drafted > 0 {
				extra += float64(r.took) - v(r.drafted+1)
				n += r.drafted
			}
		}
		if n > 0 {
			step = time.Duration(max(0, extra/float64(n)))
		}
	}
	out.DraftStep = float64(step) / 1e6
	a := out.Acceptance
	var tokens, cost float64
	for _, r := range rounds {
		k := r.drafted
		if a >= 1 {
			tokens += float64(k + 1)
		} else {
			tokens += (1 - math.Pow(a, float64(k+1))) / (1 - a)
		}
		cost += float64(k)*float64(step) + v(k+1)
	}
	if cost > 0 {
		out.Ideal = tokens / cost * v(1)
	}
}

// emit prints r as a table line and returns it.
func emit(o options, r row) row {
	sampling := "greedy"
	if r.Temp > 0 {
		sampling = fmt.Sprintf("T=%g", r.Temp)
	}
	first := "-"
	if len(r.SpeedupReps) > 0 {
		first = fmt.Sprintf("%.2f", r.SpeedupReps[0])
	}
	accept, meanK, ideal, ratio, step, engine, on, ks := "-", "-", "-", "-", "-", "-", "-", "-"
	if r.Mode != aloneMode {
		accept, meanK = fmt.Sprintf("%.0f%%", 100*r.Acceptance), fmt.Sprintf("%.2f", r.MeanK)
		ideal, step = fmt.Sprintf("%.2f", r.Ideal), fmt.Sprintf("%.3f ms (%s)", r.DraftStep, r.DraftCost)
		if r.Ideal > 0 {
			ratio = fmt.Sprintf("%.2f", r.Speedup/r.Ideal)
		}
		engine, on, ks = fmt.Sprintf("%.2f", r.Engine), fmt.Sprintf("%.0f%%", 100*r.On), histogram(r.KDrafted)
	}
	fmt.Printf("| %s | %s | %s | %s | %s | %.1f | %.1f | %.2f | %.2f-%.2f | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n",
		r.Device, r.Target, r.Mode, r.Prompts, sampling, r.TokS, r.AloneTokS, r.Speedup, r.SpeedupMin, r.SpeedupMax, first,
		accept, meanK, ideal, ratio, step, engine, on, ks)
	return r
}

// median of ds (which it sorts).
func median(ds []time.Duration) time.Duration {
	slices.Sort(ds)
	return ds[len(ds)/2]
}
