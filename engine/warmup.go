package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/tandem-run/tandem/engine/sample"
	"github.com/tandem-run/tandem/engine/spec"
	"github.com/tandem-run/tandem/engine/tokenizer"
	"github.com/tandem-run/tandem/kernels/cpu"
)

// The warm-up of a pair at load: its Choosers learn what each program they
// may choose costs before a request's first round, instead of drafting
// StartK blind and exploring lengths in the first rounds of a request.
// On the CPU that exploration was most of what adaptive drafting lost on
// the demo pair (round 1 drafted 4, rounds 5-7 drafted 1, each with the
// draft's catch-up; 5-9% of a 192-round request); on a GPU every first
// run of a draft length, a row count, a paused-capture or a sampled
// variant also compiles and captures its program, milliseconds against
// the demo target's 0.2 ms step.
//
// warmBudget bounds it. A second is about what loading the weights of a
// small pair takes and well under a large one's, and on a GPU the whole
// sweep fits in it many times over (each size compiles in milliseconds and
// then runs in a fraction of one); on this CPU the demo pair warms every
// length of both kinds in about half of it. A pair too slow to warm in it
// (an 8B target on the CPU, a second a pass) stops at the budget with the
// sizes it timed: the Choosers estimate the others from them (spec's
// curves), and a kind that did not time both the target alone and a
// one-token draft is left unseeded, to measure itself in its first
// rounds as before.
const warmBudget = time.Second

// warmRuns is how many runs of each size are timed; the fastest counts,
// as the Chooser keeps a size's fastest first runs. On a GPU warmSkip
// runs come before them: the first compiles the size's program and the
// second captures it. With three runs in all, one of two H200 runs
// seeded a DFlash pair whose drafting then ran at 0.84-0.97x the target
// alone while the engine put it at 1.55-1.79x and kept it on (while a
// head-sharing draft drafts, no pass re-times the target alone): its
// target alone was priced about 1.8 times too high, we think by a
// one-row pass whose fastest timed run was its first graph replay.
const (
	warmRuns = 3
	warmSkip = 2
)

// warmText is what the warm-up drafts after and verifies: its tokens
// matter only as far as they set how much the draft catches up a round.
const warmText = "In the beginning God created the heaven and the earth. And the earth was without form, and void."

// warmer is the state of a warm-up: the history its rounds extend, and
// the costs measured by kind (greedy on the device, or through the host).
type warmer struct {
	r       *Runner
	prompt  int     // the prompt's length in hist: rounds roll back to it
	skip    int     // the first runs of each size not timed (warmSkip on a GPU)
	hist    []int32 // the prompt and what the rounds accepted
	drafted int     // the last round's drafted tokens (a catch-up past them is no round's cost)
	gen     map[bool]*generation
	draft   map[bool][][]time.Duration // by kind, size: the timed runs
	verify  map[bool][][]time.Duration
}

// warmUp runs and times every program the Choosers may choose on the
// loaded pair, for draft lengths up to the default request's most: draft
// calls of 1..k steps (a block drafter's blocks of 1..k), target passes
// of 1..k+1 rows, greedy on the device and sampled through the host (on
// the head's softmax where it computes one), the one-row pass paused for
// a head-sharing draft as a round without a draft runs it. Each
// Chooser is then seeded with what was timed (spec.Chooser.Seed). The
// KV caches and the draft's state are left as a fresh load leaves them:
// the next request computes everything from its first token. budget
// bounds it on the Runner's clock; cancelling ctx stops it within a pass.
func (r *Runner) warmUp(ctx context.Context, budget time.Duration, progress func(Progress)) (err error) {
	if r.draft == nil || r.batch != nil || r.cfg.Draft == "" {
		return nil // prompt lookup costs nothing to draft
	}
	prompt, err := r.tok.Encode(warmText, tokenizer.EncodeOptions{AddSpecial: r.tok.AddBOS()})
	if err != nil {
		return fmt.Errorf("engine: warm-up: %w", err)
	}
	maxK := DefaultDrafting().Max
	if b, ok := r.draft.(blockDrafter); ok {
		maxK = min(maxK, max(1, b.blockMax()))
	}
	if n := r.target.m.Context(); len(prompt)+2*(maxK+1) > n {
		return nil // no room for a round past the prompt: nothing to time
	}
	w := &warmer{r: r, prompt: len(prompt), hist: prompt, gen: map[bool]*generation{},
		draft: map[bool][][]time.Duration{}, verify: map[bool][][]time.Duration{}}
	for _, be := range r.placed.backends {
		if _, ok := be.(*cpu.Backend); !ok {
			w.skip = warmSkip
		}
	}
	kinds := []bool{true, false}
	for _, greedy := range kinds {
		req := Request{Sampling: Sampling{Temperature: 0.7, Seed: 1}}
		if greedy {
			req.Sampling = Sampling{}
		}
		w.gen[greedy] = &generation{r: r, req: req, sampler: sample.NewSeeded(req.Sampling)}
		w.draft[greedy] = make([][]time.Duration, maxK+1)
		w.verify[greedy] = make([][]time.Duration, maxK+2)
	}
	defer func() {
		if e := r.forgetWarmUp(); err == nil {
			err = e
		}
		if err != nil {
			err = fmt.Errorf("engine: warm-up: %w", err)
		}
	}()
	report := func(done int) {
		if progress != nil {
			progress(Progress{Model: "warm-up", TensorsDone: done, Tensors: maxK + 1})
		}
	}
	report(0)
	start := r.now()
	// A round whose logits are not finite ends the warm-up, not the load:
	// such a model still serves greedy requests, and each sampled request
	// reports its own error. Any other failure (a device's, ctx's) fails
	// the load: a load that hid a failed launch would hand back a
	// context that fails every later call.
	failed := func(err error) error {
		if ctx.Err() != nil || !errors.Is(err, sample.ErrNonFinite) {
			return err
		}
		w.seed()
		return nil
	}
	if err := w.prefill(ctx); err != nil {
		return failed(err)
	}
	// Short lengths first: they are what a first round chooses at the
	// prior acceptance, and what the curves estimate longer ones from
	// when the budget stops the sweep.
	for k := 0; k <= maxK; k++ {
		for _, greedy := range kinds {
			for try := 0; try < w.skip+warmRuns+2 && !w.timed(greedy, k); try++ {
				if r.now().Sub(start) >= budget {
					w.seed()
					return nil
				}
				if err := w.round(ctx, greedy, k); err != nil {
					return failed(err)
				}
			}
		}
		report(k + 1)
	}
	w.seed()
	return nil
}

// prefill runs the prompt as a request's does: the target on all but its
// last token (capturing for a head-sharing draft), then the draft.
func (w *warmer) prefill(ctx context.Context) error {
	r := w.r
	if r.sharesHead() {
		r.target.m.PauseCapture(false)
	}
	if _, err := r.target.run(ctx, w.hist[:len(w.hist)-1], 1); err != nil {
		return err
	}
	return r.draft.prefill(ctx, w.hist)
}

// timed reports whether length k of a kind has warmRuns timed runs of
// its draft call and its verification past the skipped ones.
func (w *warmer) timed(greedy bool, k int) bool {
	n := w.skip + warmRuns
	return (k == 0 || len(w.draft[greedy][k]) >= n) && len(w.verify[greedy][k+1]) >= n
}

// round is one round of a request of the kind (greedy or sampled) that
// drafts k tokens, timed as generation.step times it: the draft call,
// then the target's pass with the host's accepting or sampling. A round
// without a draft pauses a head-sharing draft's capture, as the engine
// does while drafting is off.
func (w *warmer) round(ctx context.Context, greedy bool, k int) error {
	r, g := w.r, w.gen[greedy]
	if len(w.hist)+k+1 >= r.target.m.Context() {
		w.hist = w.hist[:w.prompt] // roll back, as a rejected draft does
	}
	g.history = w.hist
	start := r.now()
	var drafted []int32
	var dists [][]float32
	if k > 0 {
		p, err := r.draft.draft(ctx, w.hist, k, -1, g.sampler, nil)
		if err != nil {
			return err
		}
		end := r.now()
		drafted, dists = p.tokens, p.dists
		size := p.passes
		if p.block > 0 {
			size = p.block
		}
		// A call that caught up on rounds it sat out, or had no current
		// states to draft on (after paused passes), is no round's cost.
		if size > 0 && size <= k && p.behind <= w.drafted+1 && len(drafted) > 0 {
			w.draft[greedy][size] = append(w.draft[greedy][size], end.Sub(start))
		}
		start = end
	}
	capturing := r.sharesHead() && k > 0
	if r.sharesHead() {
		r.target.m.PauseCapture(!capturing)
	}
	rows := len(drafted) + 1
	out, err := g.verifyPass(ctx, drafted, dists, nil)
	if err != nil {
		return err
	}
	took := r.now().Sub(start)
	// A one-row pass that captured is not the target alone's cost
	// (spec.Chooser.VerifiedCapturing).
	if !(capturing && rows == 1) {
		w.verify[greedy][rows] = append(w.verify[greedy][rows], took)
	}
	w.hist = append(w.hist, out...)
	w.drafted = len(drafted)
	return nil
}

// seed gives each kind's Chooser the fastest timed run of every size
// timed warmRuns times past the skipped runs; a kind whose target alone or
// one-token draft was not timed so is left to measure itself
// (spec.Chooser.Seed).
func (w *warmer) seed() {
	fastest := func(runs [][]time.Duration) []time.Duration {
		out := make([]time.Duration, len(runs))
		for size, ds := range runs {
			if len(ds) >= w.skip+warmRuns {
				out[size] = slices.Min(ds[w.skip:])
			}
		}
		return out
	}
	for greedy, g := range w.gen {
		c := spec.Costs{Draft: fastest(w.draft[greedy]), Verify: fastest(w.verify[greedy])}
		if c.Verify[1] == 0 || c.Draft[1] == 0 {
			continue
		}
		w.r.chooser(g.req).Seed(c)
	}
}

// forgetWarmUp leaves the caches and the draft as a fresh load does: no
// tokens cached (the next request runs from its first), the capture on.
func (r *Runner) forgetWarmUp() error {
	r.target.cached = nil
	if r.sharesHead() {
		r.target.m.PauseCapture(false)
	}
	switch d := r.draft.(type) {
	case *modelDrafter:
		d.seq.cached = nil
	case *eagle3Drafter:
		d.fed = d.fed[:0]
		return d.m.Truncate(0)
	case *dflashDrafter:
		return d.m.Truncate(0)
	}
	return nil
}
