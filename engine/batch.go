package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/tandem-run/tandem/engine/model"
)

// ReasonBatched is why drafting is off on a runner that decodes several
// requests together (Config.Parallel > 1).
const ReasonBatched = "requests are decoded together in one batch (--parallel), without a draft"

// batch decodes the generations of concurrent Generate calls together:
// each holds one of the target's KV slots, and each step is one target
// pass over one row of every active sequence (continuous batching: a
// sequence that ends frees its slot at once and the next caller joins
// at the following step).
//
// No goroutine of its own runs the steps: the callers take turns. Whoever
// holds turn may use the models, and runs a step for all (or its own
// prefill); each caller emits its own sequence's events on its own
// goroutine as they come, so a slow client delays no one else's tokens.
type batch struct {
	slots chan int      // free KV slots
	turn  chan struct{} // holds one token: the right to run the models
	// active are the sequences decoding, in the order they joined; only
	// the holder of turn reads or changes it.
	active []*batchSeq
}

func newBatch(slots int) *batch {
	b := &batch{slots: make(chan int, slots), turn: make(chan struct{}, 1)}
	for s := range slots {
		b.slots <- s
	}
	b.turn <- struct{}{}
	return b
}

// batchSeq is one generation in the batch.
type batchSeq struct {
	g      *generation
	slot   int
	cached int // positions the slot holds: history[:cached]

	mu       sync.Mutex
	events   []Event       // emitted by the step, not yet handed to the caller
	finished bool          // the last event is in events (or err is set)
	err      error         // the step's error that ended the sequence
	wake     chan struct{} // signalled (without blocking) when events or finished change
}

// push is the generation's emit inside a step: the event waits for the
// caller's goroutine.
func (s *batchSeq) push(e Event) {
	s.mu.Lock()
	s.events = append(s.events, e)
	s.mu.Unlock()
	s.signal()
}

func (s *batchSeq) finish(err error) {
	s.mu.Lock()
	s.finished, s.err = true, err
	s.mu.Unlock()
	s.signal()
}

func (s *batchSeq) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// take returns the events waiting and whether the sequence is finished.
func (s *batchSeq) take() ([]Event, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ev := s.events
	s.events = nil
	return ev, s.finished, s.err
}

// generateBatched is Generate on a runner of several slots: g joins the
// batch once a slot is free, and its caller takes part in running the
// steps until g ends.
func (r *Runner) generateBatched(ctx context.Context, g *generation) error {
	b := r.batch
	var slot int
	select {
	case slot = <-b.slots:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { b.slots <- slot }()
	s := &batchSeq{g: g, slot: slot, wake: make(chan struct{}, 1)}
	emit := g.emit
	g.emit = s.push
	select {
	case <-b.turn:
	case <-ctx.Done():
		return ctx.Err()
	}
	joined, err := r.join(ctx, s)
	b.turn <- struct{}{}
	if err != nil || !joined {
		return err
	}
	start := r.now()
	defer func() { g.stats.DecodeSeconds = r.now().Sub(start).Seconds() }()
	for {
		events, finished, err := s.take()
		for _, e := range events {
			emit(e)
		}
		if finished {
			return err
		}
		select {
		case <-s.wake:
		case <-b.turn:
			r.step(b)
			b.turn <- struct{}{}
		case <-ctx.Done():
			// The sequence leaves between steps, as a step may be
			// using it now; its slot is free once this returns.
			<-b.turn
			b.leave(s)
			b.turn <- struct{}{}
			events, _, _ := s.take()
			for _, e := range events {
				emit(e)
			}
			return ctx.Err()
		}
	}
}

// join prefills all but the last token of g's prompt into its slot and
// adds it to the active sequences; false when the generation has nothing
// to decode (a grammar of the empty text). The caller holds turn.
func (r *Runner) join(ctx context.Context, s *batchSeq) (bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.target == nil {
		return false, errors.New("engine: runner is closed")
	}
	g, m := s.g, r.target.m
	start := r.now()
	for s.cached < len(g.history)-1 {
		if err := ctx.Err(); err != nil {
			return false, err
		}
		n := min(r.placed.plan.Batch, len(g.history)-1-s.cached)
		seq := model.Seq{Slot: s.slot, Pos: s.cached, Tokens: g.history[s.cached : s.cached+n]}
		if _, err := m.ForwardSeqs(ctx, []model.Seq{seq}); err != nil {
			return false, err
		}
		s.cached += n
	}
	g.stats.PrefillSeconds = r.now().Sub(start).Seconds()
	if g.grammarComplete() {
		g.stats.FinishReason = "stop"
		return false, nil
	}
	r.batch.active = append(r.batch.active, s)
	return true, nil
}

// leave takes s out of the active sequences. The caller holds turn.
func (b *batch) leave(s *batchSeq) {
	for i, a := range b.active {
		if a == s {
			b.active = append(b.active[:i], b.active[i+1:]...)
			return
		}
	}
}

// step runs one target pass over the next row of every active sequence,
// in groups of at most a batch of rows, and accepts each sequence's token
// under its own sampling and grammar. A pass does not stop for one
// caller's cancelled context: the others' tokens are in it. The caller
// holds turn.
func (r *Runner) step(b *batch) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.target == nil {
		for _, s := range b.active {
			s.finish(errors.New("engine: runner is closed"))
		}
		b.active = nil
		return
	}
	all := b.active
	for len(all) > 0 {
		n := min(len(all), r.placed.plan.Batch)
		r.stepGroup(all[:n])
		all = all[n:]
	}
	b.active = slices.DeleteFunc(b.active, (*batchSeq).done)
}

// stepGroup is step's pass over seqs, whose rows fit one batch.
func (r *Runner) stepGroup(seqs []*batchSeq) {
	ctx := context.Background()
	m := r.target.m
	rows := make([]model.Seq, len(seqs))
	argmax := true // every sequence picks by argmax, so only ids cross to the host
	for i, s := range seqs {
		rows[i] = model.Seq{Slot: s.slot, Pos: s.cached, Tokens: s.g.history[s.cached:], Out: 1}
		argmax = argmax && onDevice(s.g.req)
	}
	var ids []int32
	var logits []float32
	var err error
	if argmax {
		ids, err = m.ForwardSeqsArgmax(ctx, rows)
	} else {
		logits, err = m.ForwardSeqs(ctx, rows)
	}
	if err != nil {
		for _, s := range seqs {
			s.finish(fmt.Errorf("engine: a pass over %d sequences: %w", len(seqs), err))
		}
		return
	}
	vocab := m.Params().Vocab
	for i, s := range seqs {
		g := s.g
		var out []int32
		if argmax {
			out = []int32{ids[i]}
		} else {
			row := logits[i*vocab : (i+1)*vocab]
			_, _, masks, err := g.speculate(nil, nil)
			if err == nil {
				maskRows(row, masks)
				out, err = g.verify(row, nil, nil)
			}
			if err != nil {
				s.finish(err)
				continue
			}
		}
		s.cached = len(g.history)
		g.stats.Steps++
		out, err := g.advanceGrammar(out)
		if err != nil {
			s.finish(err)
			continue
		}
		if g.accept(out) {
			s.finish(nil)
		}
	}
}

// done reports whether s is finished.
func (s *batchSeq) done() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.finished
}
