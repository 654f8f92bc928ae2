package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/tandem-run/tandem/engine/model"
	"github.com/tandem-run/tandem/engine/spec"
)

// Why drafting is off for a request on a runner that decodes several
// together (Config.Parallel > 1): only a draft model drafts for a batch
// (prompt lookup and head-sharing drafts serve one sequence), and only for
// greedy, unconstrained requests (the others' tokens are picked on the
// host, where the drafts' rows would cost more than they bring).
const (
	ReasonBatched       = "requests decoded together (--parallel) are drafted by a draft model only"
	ReasonBatchedSample = "sampled, penalised or constrained requests decoded together (--parallel) are not drafted"
	// On an H200 with the Q4_K_M demo pair a drafted batch of 8 runs
	// slower than an undrafted one (32 streams of 128 tokens: 6,935 and
	// 5,133 tok/s against 8,311 and 8,533), its verification passes of
	// more than 16 rows round on other kernels than decode, so greedy
	// text turns at near ties (16-19 of 32 streams; none follows another
	// request's text, and each row of such passes is within 2% of its
	// sequence's solo logits, TestForwardSeqsPaddedIsSolo): batches on a
	// GPU are not drafted.
	ReasonBatchedGPU = "requests decoded together (--parallel) on a GPU are not drafted"
)

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
	// active are the sequences decoding, in the order they joined, and
	// chooser the draft length of their steps; only the holder of turn
	// reads or changes them.
	active  []*batchSeq
	chooser batchChooser
	padded  bool // every step runs every slot (paddedWidth): the target runs on a GPU
	// gpu: the target runs on a GPU, where a batch is not drafted
	// (ReasonBatchedGPU).
	gpu bool
}

func newBatch(slots int, padded, gpu bool) *batch {
	b := &batch{slots: make(chan int, slots), turn: make(chan struct{}, 1), padded: padded, gpu: gpu}
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
	cached int // positions the target's slot holds: history[:cached]
	// draftCached are the positions the draft model's slot holds; k and
	// drafted this step's draft length and proposals.
	draftCached int
	k           int
	drafted     []int32

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
	g := s.g
	start := r.now()
	prompt := g.history[:len(g.history)-1]
	next := func(o *batchSeq) int { return o.cached }
	if err := r.prefill(ctx, r.target.m, s, prompt, next); err != nil {
		return false, err
	}
	s.cached = len(g.history) - 1
	// The draft reads the prompt too, unless the request will not draft.
	if s.canDraft() {
		next := func(o *batchSeq) int { return o.draftCached }
		if err := r.prefill(ctx, r.batchDraft(), s, prompt, next); err != nil {
			return false, err
		}
		s.draftCached = len(g.history) - 1
	}
	g.stats.PrefillSeconds = r.now().Sub(start).Seconds()
	if g.grammarComplete() {
		g.stats.FinishReason = "stop"
		return false, nil
	}
	r.batch.active = append(r.batch.active, s)
	return true, nil
}

// prefill runs prompt into s's slot of m (the target or the draft model).
// Padded (paddedWidth), each pass runs every slot with as many rows as the
// chunk, a power of two, so a prompt's passes share the programs of the
// steps: the other active sequences' slots get filler rows from next(o),
// the position the sequence writes next, which its own rows overwrite
// before any row reads them.
func (r *Runner) prefill(ctx context.Context, m *model.Model, s *batchSeq, prompt []int32, next func(*batchSeq) int) error {
	b, batch := r.batch, r.placed.plan.Batch
	if !b.padded || len(prompt) == 0 {
		return runPending(ctx, m, batch, []pending{{slot: s.slot, tokens: prompt}})
	}
	most := 1 // the widest chunk: a power of two with every slot in a batch
	for 2*most*m.Slots() <= batch {
		most *= 2
	}
	for pos := 0; pos < len(prompt); {
		if err := ctx.Err(); err != nil {
			return err
		}
		width := 1
		for width < min(len(prompt)-pos, most) {
			width *= 2
		}
		width = min(width, most)
		rows := make([]model.Seq, m.Slots())
		for i := range rows {
			rows[i] = model.Seq{Slot: i, Tokens: make([]int32, width)}
		}
		fits := pos+width <= m.Context()
		for _, o := range b.active {
			rows[o.slot].Pos = next(o)
			fits = fits && next(o)+width <= m.Context()
		}
		n := min(width, len(prompt)-pos)
		own := model.Seq{Slot: s.slot, Pos: pos, Tokens: rows[s.slot].Tokens}
		copy(own.Tokens, prompt[pos:pos+n])
		for i := n; i < width; i++ {
			own.Tokens[i] = prompt[pos+n-1]
		}
		rows[s.slot] = own
		if !fits { // near the end of a context: this chunk alone
			own.Tokens = own.Tokens[:n]
			rows = []model.Seq{own}
		}
		if _, err := m.ForwardSeqs(ctx, rows); err != nil {
			return err
		}
		pos += n
	}
	return nil
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

// step runs one target pass over the rows of every active sequence, in
// groups of at most a batch of rows: for a greedy sequence, when the
// runner has a draft model and drafting pays (batchChooser), the draft's
// proposals after its last token, else that token alone; each sequence
// accepts its tokens under its own sampling and grammar. A pass does not
// stop for one caller's cancelled context: the others' tokens are in it.
// The caller holds turn.
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
	k := 0
	if r.batchDraft() != nil {
		k = b.chooser.next()
	}
	start, made := r.now(), 0
	for _, s := range b.active {
		s.k = s.draftLength(k)
	}
	if width := r.paddedWidth(b); width > 0 {
		made = r.stepGroup(b.active, width)
		if r.batchDraft() != nil {
			b.chooser.record(k, made, r.now().Sub(start))
		}
		b.active = slices.DeleteFunc(b.active, (*batchSeq).done)
		return
	}
	group, rows := []*batchSeq(nil), 0
	for _, s := range b.active {
		if n := len(s.g.history) - s.cached + s.k; rows+n > r.placed.plan.Batch && len(group) > 0 {
			made += r.stepGroup(group, 0)
			group, rows = nil, 0
		}
		group = append(group, s)
		rows += len(s.g.history) - s.cached + s.k
	}
	if len(group) > 0 {
		made += r.stepGroup(group, 0)
	}
	if r.batchDraft() != nil {
		b.chooser.record(k, made, r.now().Sub(start))
	}
	b.active = slices.DeleteFunc(b.active, (*batchSeq).done)
}

// batchDraft is the draft model of a runner that decodes several
// sequences at once, with a slot for each; nil when there is none.
func (r *Runner) batchDraft() *model.Model {
	if r.batch != nil && r.batch.gpu {
		return nil
	}
	d, ok := r.draft.(*modelDrafter)
	if !ok || d.seq.m.Slots() != r.target.m.Slots() {
		return nil
	}
	return d.seq.m
}

// draftLength is how many tokens s drafts this step when the batch drafts
// k: a fixed length the request asked for, else k, for greedy requests
// that allow drafting, within the tokens left.
func (s *batchSeq) draftLength(k int) int {
	g := s.g
	if !s.canDraft() {
		return 0
	}
	if g.drafting.Fixed() {
		k = g.drafting.Max
	}
	return max(0, min(k, g.remaining()-1))
}

// canDraft reports whether s's steps may draft: a draft model drafts for
// the batch and s is greedy and unconstrained and allows it.
func (s *batchSeq) canDraft() bool {
	g := s.g
	return g.r.batchDraft() != nil && !g.req.NoDraft && onDevice(g.req)
}

// paddedWidth is the rows every slot runs in a step of b when the
// target's passes keep one shape, or 0 when they follow the sequences.
//
// A pass's program is compiled for its slots and rows, and on a GPU
// compiling (capturing a CUDA graph) costs many passes while a row more
// costs next to nothing: there every step runs every slot, free ones too,
// with as many rows as the widest sequence needs, the others' filled up
// after their own rows, so a batch compiles one program a draft length
// however its sequences come and go. A filler row writes its slot's cache
// past what the slot holds, where the sequence's own rows land before any
// row reads them. On a CPU each row costs its work: the passes follow the
// sequences.
func (r *Runner) paddedWidth(b *batch) int {
	if !b.padded || len(b.active) == 0 {
		return 0
	}
	width := 0
	for _, s := range b.active {
		width = max(width, len(s.g.history)-s.cached+s.k)
	}
	m := r.target.m
	if m.Slots()*width > r.placed.plan.Batch {
		return 0
	}
	for _, s := range b.active {
		if s.cached+width > m.Context() {
			return 0
		}
	}
	return width
}

// stepGroup is step's passes over seqs, whose rows fit one batch: the
// draft's, then the target's, each over every slot with width rows when
// width > 0 (paddedWidth). It returns the tokens the sequences made.
func (r *Runner) stepGroup(seqs []*batchSeq, width int) int {
	ctx := context.Background()
	fail := func(err error) int {
		for _, s := range seqs {
			s.finish(fmt.Errorf("engine: a pass over %d sequences: %w", len(seqs), err))
		}
		return 0
	}
	if err := r.draftAll(ctx, seqs, width > 0); err != nil {
		return fail(err)
	}
	m := r.target.m
	rows := make([]model.Seq, len(seqs))
	first := make([]int, len(seqs)) // each sequence's first wanted row in the results
	argmax := true                  // every sequence picks by argmax, so only ids cross to the host
	out := 0
	for i, s := range seqs {
		toks := append(s.g.history[s.cached:len(s.g.history):len(s.g.history)], s.drafted...)
		rows[i] = model.Seq{Slot: s.slot, Pos: s.cached, Tokens: toks, Out: len(s.drafted) + 1}
		argmax = argmax && onDevice(s.g.req)
		first[i] = out
		out += rows[i].Out
	}
	if width > 0 {
		rows = padded(rows, m.Slots(), width)
		for i, s := range seqs { // every row of every slot is a result
			first[i] = s.slot*width + len(s.g.history) - s.cached - 1
		}
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
		return fail(err)
	}
	vocab, made := m.Params().Vocab, 0
	for i, s := range seqs {
		g, n, row := s.g, len(s.drafted)+1, first[i]
		var out []int32
		if argmax {
			mine := ids[row : row+n]
			a := spec.GreedyAccepted(s.drafted, mine)
			out = append(s.drafted[:a:a], mine[a])
		} else {
			mine := logits[row*vocab : (row+n)*vocab]
			_, _, masks, err := g.speculate(s.drafted, nil)
			if err == nil {
				maskRows(mine, masks)
				out, err = g.verify(mine, s.drafted, nil)
			}
			if err != nil {
				s.finish(err)
				continue
			}
		}
		made += len(out)
		s.accepted(out)
	}
	return made
}

// padded lays rows over all slots in slot order, width rows each, every
// row's result wanted: a sequence's rows filled up after its own with its
// last token, a free slot's with token 0 from position 0.
func padded(rows []model.Seq, slots, width int) []model.Seq {
	out := make([]model.Seq, slots)
	for s := range out {
		out[s] = model.Seq{Slot: s, Tokens: make([]int32, width), Out: width}
	}
	for _, r := range rows {
		t := out[r.Slot].Tokens
		n := copy(t, r.Tokens)
		for i := n; i < width; i++ {
			t[i] = r.Tokens[n-1]
		}
		out[r.Slot].Pos = r.Pos
	}
	return out
}

// accepted takes out, the drafted tokens the target kept and its own
// next one, into s's generation, and finishes s when it is done.
func (s *batchSeq) accepted(out []int32) {
	g, n := s.g, len(s.g.history)
	kept := len(out) - 1
	s.cached = n + kept // the rows of the tokens kept are the target's own
	if len(s.drafted) > 0 {
		// The draft ran the drafted tokens but the last; those kept stay.
		s.draftCached = min(s.draftCached, n+min(kept, len(s.drafted)-1))
		g.stats.Drafted += len(s.drafted)
		g.stats.Accepted += kept
		for len(g.stats.AcceptedAt) < len(s.drafted) {
			g.stats.AcceptedAt = append(g.stats.AcceptedAt, 0)
		}
		for i := range kept {
			g.stats.AcceptedAt[i]++
		}
	}
	g.stats.Steps++
	if s.canDraft() {
		g.stats.DraftK, g.stats.Drafting, g.stats.DraftOff = s.k, s.k > 0, ""
		if s.k == 0 {
			g.stats.DraftOff = spec.ReasonCosts
		}
	}
	out, err := g.advanceGrammar(out)
	if err != nil {
		s.finish(err)
		return
	}
	if g.accept(out) {
		s.finish(nil)
	}
}

// draftAll drafts s.k tokens greedily for each of seqs with the draft
// model, all sequences in each pass: the first pass runs, for each
// sequence, what its draft slot lacks of its history (the last draft
// token of a step whose drafts were all kept) and its last token, each
// later pass one row a sequence, its last drafted token. Padded, every
// pass runs every slot with the same rows, so the passes keep two shapes
// (one row a slot, or two where the first lacks one) whichever sequences
// lag: a shape of its own for each set of lagging sequences would make
// the draft compile (capture) a new program most steps. A lag of more
// (after steps that did not draft) is run first.
func (r *Runner) draftAll(ctx context.Context, seqs []*batchSeq, pad bool) error {
	var drafting []*batchSeq
	for _, s := range seqs {
		s.drafted = s.drafted[:0]
		if s.k > 0 {
			drafting = append(drafting, s)
		}
	}
	if len(drafting) == 0 {
		return nil
	}
	dm := r.batchDraft()
	forget := func() {
		for _, s := range drafting {
			s.draftCached = 0 // what the slot holds is unknown
		}
	}
	var behind []pending
	for _, s := range drafting {
		if h := s.g.history; s.draftCached < len(h)-2 {
			behind = append(behind, pending{slot: s.slot, pos: s.draftCached, tokens: h[s.draftCached : len(h)-2]})
			s.draftCached = len(h) - 2
		}
	}
	if err := runPending(ctx, dm, r.placed.plan.Batch, behind); err != nil {
		forget()
		return err
	}
	for j := 0; len(drafting) > 0; j++ {
		own := make([][]int32, len(drafting)) // each drafting sequence's rows
		width := 1
		for i, s := range drafting {
			if h := s.g.history; j == 0 {
				own[i] = h[s.draftCached:]
			} else {
				own[i] = s.drafted[j-1 : j]
			}
			width = max(width, len(own[i]))
		}
		// Padded, a slot not drafting now runs filler rows from the next
		// position its draft cache would write.
		var rows []model.Seq
		if pad {
			rows = make([]model.Seq, dm.Slots())
			for i := range rows {
				rows[i] = model.Seq{Slot: i, Tokens: make([]int32, width), Out: width}
			}
			for _, s := range seqs {
				rows[s.slot].Pos = s.draftCached
			}
		}
		at := make([]int, len(drafting)) // each drafting sequence's result
		for i, s := range drafting {
			if !pad {
				rows, at[i] = append(rows, model.Seq{Slot: s.slot, Pos: s.draftCached, Tokens: own[i], Out: 1}), i
				continue
			}
			t := rows[s.slot].Tokens
			n := copy(t, own[i])
			for c := n; c < width; c++ {
				t[c] = own[i][n-1]
			}
			at[i] = s.slot*width + n - 1
		}
		ids, err := dm.ForwardSeqsArgmax(ctx, rows)
		if err != nil {
			forget()
			return err
		}
		for i, s := range drafting {
			s.draftCached += len(own[i])
			s.drafted = append(s.drafted, ids[at[i]])
		}
		drafting = slices.DeleteFunc(drafting, func(s *batchSeq) bool { return len(s.drafted) >= s.k })
	}
	return nil
}

// pending is tokens to run into a slot with no results wanted (a prompt,
// or what a draft lacks of a history).
type pending struct {
	slot, pos int
	tokens    []int32
}

// runPending runs the pending tokens on m in passes of at most batch rows.
func runPending(ctx context.Context, m *model.Model, batch int, work []pending) error {
	var rows []model.Seq
	n := 0
	flush := func() error {
		if len(rows) == 0 {
			return nil
		}
		_, err := m.ForwardSeqs(ctx, rows)
		rows, n = rows[:0], 0
		return err
	}
	for _, w := range work {
		for len(w.tokens) > 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
			take := min(len(w.tokens), batch-n)
			rows = append(rows, model.Seq{Slot: w.slot, Pos: w.pos, Tokens: w.tokens[:take]})
			w.pos, w.tokens, n = w.pos+take, w.tokens[take:], n+take
			if n == batch {
				if err := flush(); err != nil {
					return err
				}
			}
		}
	}
	return flush()
}

// done reports whether s is finished.
func (s *batchSeq) done() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.finished
}

// batchLengths are the draft lengths a batch's steps choose from, and
// batchRound the steps each choice is measured over.
var batchLengths = [...]int{0, 2, 4, 6}

const (
	batchRound   = 16
	batchExplore = 8 // every batchExplore-th round measures another length again
)

// batchChooser picks the draft length of a batch's steps by the tokens per
// second the steps made at each: a draft pass over every sequence costs
// what it costs on the loaded pair and batch (little on a GPU, nearly a
// target pass's rows on a CPU), which the measurement weighs against the
// tokens the drafts bring. Each length is measured once, the best is used,
// and now and then another is measured again, as the batch's sequences
// change.
type batchChooser struct {
	rate    [len(batchLengths)]float64 // tokens per second, 0 until measured
	cur     int                        // index of the length in use
	left    int                        // steps of the round left
	rounds  int
	explore int // the next length to measure again
	made    int
	took    time.Duration
}

// next is the draft length of the next step.
func (c *batchChooser) next() int {
	if c.left == 0 {
		c.decide()
	}
	c.left--
	return batchLengths[c.cur]
}

// decide chooses the length of the next round.
func (c *batchChooser) decide() {
	c.rounds++
	c.left = batchRound
	for i, r := range c.rate {
		if r == 0 {
			c.cur = i
			return
		}
	}
	best := 0
	for i, r := range c.rate {
		if r > c.rate[best] {
			best = i
		}
	}
	c.cur = best
	if c.rounds%batchExplore == 0 {
		c.explore = (c.explore + 1) % len(batchLengths)
		if c.explore == best {
			c.explore = (c.explore + 1) % len(batchLengths)
		}
		c.cur = c.explore
	}
}

// record counts a step of length k that made tokens in took.
func (c *batchChooser) record(k, made int, took time.Duration) {
	if batchLengths[c.cur] != k {
		return
	}
	c.made += made
	c.took += took
	if c.left > 0 || c.took <= 0 {
		return
	}
	rate := float64(c.made) / c.took.Seconds()
	if c.rate[c.cur] == 0 {
		c.rate[c.cur] = rate
	} else {
		c.rate[c.cur] = (c.rate[c.cur] + rate) / 2
	}
	c.made, c.took = 0, 0
}
