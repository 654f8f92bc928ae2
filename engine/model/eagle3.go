package model

import (
	"context"
	"fmt"
	"math"

	"github.com/tandem-run/tandem/engine/gguf"
	"github.com/tandem-run/tandem/engine/plan"
	"github.com/tandem-run/tandem/kernels"
)

// Eagle3 is an EAGLE-3 draft: one decoder layer that proposes tokens from
// the target's hidden states. At position p it reads the pair
// (token[p+1], g[p]). Where the target has run p, g[p] is fc of the
// target's captured block inputs there (Encode stores them, Forward reads
// them); past that, drafting one token at a time, g[p] is the draft's own
// pre-norm output at p-1 (Step). Its logits come from output_norm and a
// head, and its token embedding from a table, that are the target's unless
// the file has its own.
//
// The draft runs on one device. What it borrows is used where the target
// keeps it, in its own programs when that is the draft's device, else
// through the host (eagle3Far), or copied beside it, as the plan chose.
//
// The draft's positions are the target's: the KV cache and the fused
// states span the target's context, and both roll back with it.
type Eagle3 struct {
	params      Eagle3Params
	targetVocab int
	context     int
	batch       int
	be          kernels.Backend
	target      *Model
	w           eagle3Weights
	d2t         []int32 // draft id -> target id; nil when the head is over target ids
	kvK, kvV    kernels.Tensor
	n           int // cached positions
	s           eagle3Scratch
	bufs        []kernels.Buffer
	far         *eagle3Far // borrowed tensors used on other devices
	held        farHeld    // its buffers and programs there

	// fused are the target's states, fc'ed: [context, n_embd], rows
	// [0, nFused) current. own is the draft's last pre-norm output
	// [1, n_embd], the state position next reads when drafting goes on.
	fused  kernels.Tensor
	nFused int
	own    kernels.Tensor
	next   int

	progs programs // Encode's, Forward's and Step's
	chain chainBuffers

	// host staging
	tokens, positions []int32
	draftLogits       []float32 // [draft vocab], expanded through d2t
	logits            []float32 // [target vocab]
}

// eagle3Scratch is the activations of one pass, views of the plan's
// buffers: several share one buffer where their lifetimes in a pass allow
// (allocBuffers says which).
type eagle3Scratch struct {
	tokens, pos kernels.Tensor // I32 [1, batch]: token[p+1] and p of each row
	hidden      kernels.Tensor // [batch, n_fused] target states being fused (the target writes them)
	fcOut       kernels.Tensor // [batch, n_embd] their g
	emb, g      kernels.Tensor // [batch, n_embd] token embedding, state read
	in          kernels.Tensor // [batch, 2*n_embd] RMSNorm(emb) | RMSNorm(g)
	q, attn     kernels.Tensor // [batch, n_head*head_dim]
	k, v        kernels.Tensor // [batch, n_kv_head*head_dim]
	x, h, tmp   kernels.Tensor // [batch, n_embd] residual, normed, sub-layer out
	gate, up    kernels.Tensor // [batch, n_ff]
	sel         kernels.Tensor // [1, n_embd] the last row, normed for the head
	logits      kernels.Tensor // [1, draft vocab]
	topIDs      kernels.Tensor // I32: a greedy chain's ids, one a slot (chain.go), where the head runs here
	topP        kernels.Tensor // their probabilities
}

// eagle3Far is what an EAGLE-3 draft runs beyond its own device: the
// target's token lookups and head shards, used where the target keeps them
// (plan.BorrowInPlace). The normalised hidden state (sel, [1, n_embd]) goes
// to the shards through the host; their results come back.
type eagle3Far struct {
	farSide
	heads []*farShard // the head's shards, in vocabulary order
}

// farShard is one device's rows of the borrowed head, with the draft's
// buffers there.
type farShard struct {
	be     kernels.Backend
	rows   plan.Range
	w      kernels.Tensor // the target's rows of the head
	in     kernels.Tensor // [1, n_embd] the draft's normalised state
	sent   bool           // in is filled from the host (another device)
	logits kernels.Tensor // [1, rows]
	probs  kernels.Tensor // [1, rows] their softmax; invalid with a batch of 1
	id     kernels.Tensor // I32 [1, 1] the shard's argmax
	progs  *programs
}

// Top is a draft's most likely next token over the target's vocabulary and
// its softmax probability.
type Top struct {
	ID int32
	P  float64
}

// LoadEagle3 loads the EAGLE-3 draft of f as mp, the draft of plan p,
// beside target, the plan's target (tf its file), and sets the target to
// hand it the block inputs it reads (Model.Capture): straight into its
// features buffer when they are computed on the draft's device. The plan's
// buffers (and a CUDA backend's workspace at the plan's figure) are what
// it allocates. f and tf must stay open while the draft lives.
func LoadEagle3(ctx context.Context, f, tf *gguf.File, p *plan.Plan, mp *plan.ModelPlan, target *Model, backends map[int]kernels.Backend, progress func(Progress)) (_ *Eagle3, err error) {
	dev, be, err := draftDevice(p, mp, backends, "an EAGLE-3 draft")
	if err != nil {
		return nil, err
	}
	tp := target.params
	e, d2t, err := readEagle3For(f, tp)
	if err != nil {
		return nil, err
	}
	if e.FF < e.Embd || e.FusedWidth() <= e.Embd {
		// The layer's activations share the plan's buffers (allocBuffers).
		return nil, fmt.Errorf("model: EAGLE-3 draft of width %d, FFN %d, %d fused: %w", e.Embd, e.FF, e.FusedWidth(), ErrUnsupported)
	}
	m := &Eagle3{params: e, targetVocab: tp.Vocab, context: p.Ctx, batch: p.Batch, be: be, target: target, d2t: d2t, next: -1,
		progs: newPrograms(be, fmt.Sprintf("device %d, EAGLE-3 draft", dev))}
	far := &eagle3Far{farSide: farSide{target: target}}
	l := &loader{ctx: ctx, f: f, be: be, owner: string(mp.Role), progress: progress}
	defer func() {
		if err != nil {
			for _, b := range l.bufs {
				_ = be.Free(b)
			}
			_ = m.held.release()
		}
	}()
	specs := e.specs(&m.w, tp.Vocab)
	if err := l.placeAll(specs); err != nil {
		return nil, err
	}
	m.w.ownEmbd, m.w.ownHead = m.w.tokEmbd.Valid(), m.w.output.Valid()
	if err := m.placeBorrowed(l, tf, mp, far, specs); err != nil {
		return nil, err
	}
	if err := m.allocBuffers(l, mp, backends, far); err != nil {
		return nil, err
	}
	if err := reserveWorkspace(be, p, dev); err != nil {
		return nil, err
	}
	m.bufs = l.bufs
	m.tokens, m.positions = make([]int32, m.batch), make([]int32, m.batch)
	m.logits = make([]float32, tp.Vocab)
	if d2t != nil {
		m.draftLogits = make([]float32, e.Vocab)
	}
	far.emb, far.sel = make([]float32, m.batch*e.Embd), make([]float32, e.Embd)
	m.far = far
	// This runs inside the target's pass, which checks its context
	// between chunks; fusing a chunk is one matrix product.
	err = target.Capture(e.TargetLayers, be, m.s.hidden, func(pos, n int) error { return m.Encode(context.Background(), pos, n) })
	if err != nil {
		return nil, err
	}
	return m, nil
}

// placeBorrowed gives the draft the target tensors it lacks as the plan
// says: copies from tf on the draft's device, or the target's own where
// it keeps them.
func (m *Eagle3) placeBorrowed(l *loader, tf *gguf.File, mp *plan.ModelPlan, far *eagle3Far, specs []tensorSpec) error {
	if len(mp.Borrowed) == 0 {
		return nil
	}
	if m.d2t != nil && !m.w.ownHead {
		return fmt.Errorf("model: the draft maps its vocabulary to the target's (%s) but has no head of its own: %w", nameD2T, ErrMissing)
	}
	if far.target.params.Embd != m.params.Embd {
		return fmt.Errorf("model: the EAGLE-3 draft of width %d borrows the target's embedding or head of width %d: %w", m.params.Embd, far.target.params.Embd, ErrShape)
	}
	embed, heads, err := borrow(l, tf, mp, far.target, specs, &m.w.tokEmbd, &m.w.output, m.w.ownEmbd, m.w.ownHead)
	if err != nil {
		return err
	}
	far.embed = far.embed || embed
	for _, h := range heads {
		far.heads = append(far.heads, &farShard{be: h.be, rows: h.rows, w: h.w,
			progs: m.held.programs(h.be, fmt.Sprintf("device %d, EAGLE-3 head rows %v", h.dev, h.rows))})
	}
	return nil
}

// allocBuffers allocates the draft's buffers of the plan and binds them:
// on its own device the layer's activations, the KV cache, the fused
// states and the carried state; on the target's head devices the state
// sent there, the logits and the best id.
func (m *Eagle3) allocBuffers(l *loader, mp *plan.ModelPlan, backends map[int]kernels.Backend, far *eagle3Far) error {
	p, s, dev := m.params, &m.s, mp.Placement.Devices[0]
	byDev := shardsByDevice(mp, far.heads)
	shard := func(b plan.Buffer, t kernels.Tensor) bool {
		sh := byDev[b.Device]
		if sh == nil || (b.Device == dev && !headRole(b.Role)) {
			return false
		}
		switch b.Role {
		case plan.RoleReceive:
			sh.in, sh.sent = t.Row(0), true
		case plan.RoleLogits:
			sh.logits = t.Row(0)
			if t.Rows > 1 {
				sh.probs = t.Row(1)
			}
		case plan.RoleTopIDs:
			sh.id = packed(t, 1, 1)
		}
		return true
	}
	local := func(b plan.Buffer, t kernels.Tensor) error {
		// Lifetimes in a pass let one buffer serve several views: the
		// embedding is read before the residual overwrites x, the fused
		// states are read from the features' space (free once fused),
		// the sub-layer outputs use ffn_up's space (free but during the
		// FFN's SwiGLU), and the normalised FFN input and head input use
		// xn's (free once Q, K and V are made).
		switch b.Role {
		case plan.RoleKeys:
			m.kvK = t
		case plan.RoleValues:
			m.kvV = t
		case plan.RoleFused:
			m.fused = t
		case plan.RoleState:
			m.own = t
		case plan.RoleInputs:
			s.tokens, s.pos = t.Row(0), t.Row(1)
		case plan.RoleStream:
			s.x, s.fcOut = t, t
			if !s.emb.Valid() {
				s.emb = t
			}
		case plan.RoleReceive: // the looked-up embedding arrives from the target's device
			s.emb = t
		case plan.RoleNormed:
			s.in, s.h, s.sel = t, packed(t, m.batch, p.Embd), packed(t, 1, p.Embd)
		case plan.RoleQueries:
			s.q = t
		case plan.RoleNewKeys:
			s.k = t
		case plan.RoleNewValues:
			s.v = t
		case plan.RoleAttention:
			s.attn = t
		case plan.RoleFFNGate:
			s.gate = t
		case plan.RoleFFNUp:
			s.up, s.tmp = t, packed(t, m.batch, p.Embd)
		case plan.RoleFeatures:
			s.hidden, s.g = t, packed(t, m.batch, p.Embd)
		case plan.RoleLogits:
			s.logits = t.Row(0)
		case plan.RoleTopIDs:
			s.topIDs = t
		case plan.RoleTopLogits:
			s.topP = t
		}
		return nil
	}
	if err := allocDraftBuffers(l, mp, backends, &m.held, shard, local); err != nil {
		return err
	}
	for _, t := range []kernels.Tensor{m.kvK, m.kvV, m.fused, m.own, s.tokens, s.x, s.in, s.q, s.k, s.v, s.attn, s.gate, s.up, s.hidden} {
		if !t.Valid() {
			return fmt.Errorf("model: the plan lacks buffers of the EAGLE-3 draft on device %d: %w", dev, ErrMissing)
		}
	}
	if m.w.output.Valid() && !s.logits.Valid() {
		return fmt.Errorf("model: the plan has no logits for the draft's head on device %d: %w", dev, ErrMissing)
	}
	for _, sh := range far.heads {
		if !sh.logits.Valid() || !sh.id.Valid() {
			return fmt.Errorf("model: the plan has no logits for the draft on the device of head rows %v: %w", sh.rows, ErrMissing)
		}
		if !sh.sent {
			sh.in = s.sel // the target keeps these rows on the draft's device
		}
	}
	return nil
}

// Params are the draft's hyper-parameters.
func (m *Eagle3) Params() Eagle3Params { return m.params }

// Borrowed names the target tensors the draft uses in place of its own.
func (m *Eagle3) Borrowed() []string {
	var names []string
	if !m.w.ownEmbd {
		names = append(names, "token_embd.weight")
	}
	if !m.w.ownHead {
		names = append(names, "output.weight")
	}
	return names
}

// Len is the number of positions in the draft's KV cache.
func (m *Eagle3) Len() int { return m.n }

// Fused is the number of positions whose target states the draft holds:
// fewer than the target has run after passes that captured nothing.
func (m *Eagle3) Fused() int { return m.nFused }

// Truncate drops cached positions n and later. n may not exceed Len().
func (m *Eagle3) Truncate(n int) error {
	if n < 0 || n > m.n {
		return fmt.Errorf("model: truncate to %d with %d cached: %w", n, m.n, ErrPosition)
	}
	m.n = n
	return nil
}

// readEagle3For reads the draft's header and d2t map and checks them
// against a target of params tp.
func readEagle3For(f *gguf.File, tp Params) (Eagle3Params, []int32, error) {
	e, err := ReadEagle3Params(f)
	if err != nil {
		return e, nil, err
	}
	if err := e.checkTarget(tp); err != nil {
		return e, nil, err
	}
	d2t, err := readD2T(f, tp.Vocab)
	if err != nil {
		return e, nil, err
	}
	if e.Vocab == 0 {
		e.Vocab = tp.Vocab // the borrowed head's
	}
	if d2t == nil && e.Vocab != tp.Vocab {
		return e, nil, fmt.Errorf("model: the draft's head has %d rows, the target's vocabulary %d, and no %s map: %w", e.Vocab, tp.Vocab, nameD2T, ErrShape)
	}
	return e, d2t, nil
}

// Encode fuses the target's captured states of positions pos..pos+n-1,
// which the target has just written into the first n rows of the draft's
// features buffer (Model.Capture), into the states those positions read.
// Fused states from pos on are replaced, and draft positions that read
// them are dropped from the cache. pos may be past the states held, after
// target passes that captured nothing (Model.PauseCapture, while drafting
// is off): the positions in the gap keep stale fused states, so a draft
// that later runs over them reads approximate ones. That changes only
// what the draft proposes; verification keeps the output the target's.
func (m *Eagle3) Encode(ctx context.Context, pos, n int) error {
	switch {
	case n <= 0 || n > m.batch:
		return fmt.Errorf("model: EAGLE-3 encode of %d positions in a batch of %d: %w", n, m.batch, ErrShape)
	case pos < 0:
		return fmt.Errorf("model: EAGLE-3 encode at %d: %w", pos, ErrPosition)
	case pos+n > m.context:
		return fmt.Errorf("model: EAGLE-3 encode of %d positions at %d in a %d-token context: %w", n, pos, m.context, ErrContext)
	}
	m.n = min(m.n, pos)
	m.nFused = min(m.nFused, pos)
	if err := m.writeInputs(nil, pos, n); err != nil {
		return err
	}
	if err := m.progs.run(ctx, progKey{kind: progFuse, n: n}, func() []kernels.Op { return m.fuseOps(n) }); err != nil {
		return err
	}
	m.nFused = pos + n
	return nil
}

// Forward runs the draft at positions pos, pos+1, ... on the target's
// states: row i takes tokens[i] (the token at position pos+i+1) and the
// fused state of position pos+i. It returns the logits of the last row
// over the target's vocabulary (ids outside a d2t map get -Inf) and keeps
// that row's pre-norm output for Step. Positions from pos on are
// overwritten; pos may not be past Len(). The returned slice is reused by
// the next call.
func (m *Eagle3) Forward(ctx context.Context, tokens []int32, pos int) ([]float32, error) {
	if err := m.checkForward(tokens, pos); err != nil {
		return nil, err
	}
	if err := m.run(ctx, tokens, pos, progKey{kind: progDraft}, m.bodyOps); err != nil {
		return nil, err
	}
	return m.readLogits()
}

// ForwardRows is Forward returning the logits over the draft's own rows
// (d2t's order; the target's ids without a d2t map), not spread over the
// target's vocabulary: for a sampler that maps its draw through Rows.
func (m *Eagle3) ForwardRows(ctx context.Context, tokens []int32, pos int) ([]float32, error) {
	if err := m.checkForward(tokens, pos); err != nil {
		return nil, err
	}
	if err := m.run(ctx, tokens, pos, progKey{kind: progDraft}, m.bodyOps); err != nil {
		return nil, err
	}
	return m.readRows()
}

// StepRows is Step returning the logits as ForwardRows does.
func (m *Eagle3) StepRows(ctx context.Context, token int32, pos int) ([]float32, error) {
	if pos != m.next || pos > m.n || pos >= m.context {
		return nil, fmt.Errorf("model: EAGLE-3 step at %d after a call that ended at %d, %d cached: %w", pos, m.next, m.n, ErrPosition)
	}
	if err := m.run(ctx, []int32{token}, pos, progKey{kind: progStep}, m.stepOps); err != nil {
		return nil, err
	}
	return m.readRows()
}

// ForwardProbsRows is ForwardRows returning, in place of the logits, their
// softmax at temperature temp over the draft's rows, computed where the
// head runs: a sampled draft then reads the distribution and only draws on
// the host. It needs ProbsOnDevice. A row with a non-finite logit (or one
// that overflows when divided by temp) comes back NaN. The returned slice
// is reused by the next call.
func (m *Eagle3) ForwardProbsRows(ctx context.Context, tokens []int32, pos int, temp float64) ([]float32, error) {
	inv, err := m.probsKey(temp)
	if err != nil {
		return nil, err
	}
	if err := m.checkForward(tokens, pos); err != nil {
		return nil, err
	}
	body := func(b int) []kernels.Op { return append(m.bodyOps(b), softmaxAt(m.s.logits, inv)...) }
	if err := m.run(ctx, tokens, pos, progKey{kind: progDraft, block: blockProbs, inv: inv}, body); err != nil {
		return nil, err
	}
	return m.readRows()
}

// StepProbsRows is StepRows returning the softmax as ForwardProbsRows does.
func (m *Eagle3) StepProbsRows(ctx context.Context, token int32, pos int, temp float64) ([]float32, error) {
	inv, err := m.probsKey(temp)
	if err != nil {
		return nil, err
	}
	if pos != m.next || pos > m.n || pos >= m.context {
		return nil, fmt.Errorf("model: EAGLE-3 step at %d after a call that ended at %d, %d cached: %w", pos, m.next, m.n, ErrPosition)
	}
	step := func(b int) []kernels.Op { return append(m.stepOps(b), softmaxAt(m.s.logits, inv)...) }
	if err := m.run(ctx, []int32{token}, pos, progKey{kind: progStep, block: blockProbs, inv: inv}, step); err != nil {
		return nil, err
	}
	return m.readRows()
}

// blockProbs marks the programs of ForwardProbsRows and StepProbsRows
// (Chain's are block 1).
const blockProbs = 2

// ProbsOnDevice reports whether ForwardProbsRows runs: the draft's own
// head over a reduced vocabulary (d2t), on its device. It returns that
// device's backend.
func (m *Eagle3) ProbsOnDevice() (kernels.Backend, bool) {
	return m.be, m.d2t != nil && m.picksOnDevice()
}

// probsKey checks temp and returns its inverse, dropping the programs of
// other temperatures: requests at ever new temperatures would otherwise
// pile them up.
func (m *Eagle3) probsKey(temp float64) (float32, error) {
	if _, ok := m.ProbsOnDevice(); !ok {
		return 0, fmt.Errorf("model: the EAGLE-3 draft's probabilities need its own reduced head on its device: %w", ErrBadParam)
	}
	inv, err := invTemp(temp)
	if err != nil {
		return 0, err
	}
	m.progs.drop(func(k progKey) bool {
		return (k.kind == progDraft || k.kind == progStep) && k.block == blockProbs && k.inv != inv
	})
	return inv, nil
}

// Rows is the map from the draft's head rows to target ids (nil when the
// head covers the target's vocabulary) and the target's vocabulary size.
func (m *Eagle3) Rows() ([]int32, int) { return m.d2t, m.targetVocab }

// readRows reads the head's row as it is.
func (m *Eagle3) readRows() ([]float32, error) {
	if m.d2t == nil {
		return m.readLogits()
	}
	if err := m.be.Read(kernels.F32Bytes(m.draftLogits), m.s.logits); err != nil {
		return nil, fmt.Errorf("model: logits: %w", err)
	}
	return m.draftLogits, nil
}

// Step drafts on past the target's states: position pos takes token (the
// one at pos+1, just drafted) and the pre-norm output the previous call
// left at pos-1. It returns the logits as Forward does and keeps its own
// output for the next Step.
func (m *Eagle3) Step(ctx context.Context, token int32, pos int) ([]float32, error) {
	if pos != m.next || pos > m.n || pos >= m.context {
		return nil, fmt.Errorf("model: EAGLE-3 step at %d after a call that ended at %d, %d cached: %w", pos, m.next, m.n, ErrPosition)
	}
	if err := m.run(ctx, []int32{token}, pos, progKey{kind: progStep}, m.stepOps); err != nil {
		return nil, err
	}
	return m.readLogits()
}

// run runs the tokens at pos through the programs ops compiles, in chunks,
// keeps the last row's pre-norm output and computes its logits, which stay
// where the head runs until read. key names the programs, but for their
// rows.
func (m *Eagle3) run(ctx context.Context, tokens []int32, pos int, key progKey, ops func(int) []kernels.Op) error {
	n := len(tokens)
	if pos+n > m.context {
		return fmt.Errorf("model: %d tokens at %d in a %d-token context: %w", n, pos, m.context, ErrContext)
	}
	for i, t := range tokens {
		if t < 0 || int(t) >= m.targetVocab {
			return fmt.Errorf("model: token %d at %d: %w (vocabulary %d)", t, i, ErrToken, m.targetVocab)
		}
	}
	m.n, m.next = pos, -1
	b := 0
	for c := 0; c < n; c += b {
		b = min(m.batch, n-c)
		if err := m.writeInputs(tokens[c:c+b], pos+c, b); err != nil {
			return err
		}
		if m.far != nil && m.far.embed {
			if err := m.far.lookUp(ctx, m.be, m.s.emb, tokens[c:c+b], m.params.Embd); err != nil {
				return err
			}
		}
		key.n = b
		if err := m.progs.run(ctx, key, func() []kernels.Op { return ops(b) }); err != nil {
			return err
		}
		m.n = pos + c + b
	}
	if err := m.be.Copy(m.own, m.s.x.Row(b-1)); err != nil {
		return fmt.Errorf("model: EAGLE-3 state: %w", err)
	}
	m.next = pos + n
	if m.far != nil && len(m.far.heads) > 0 {
		return m.far.head(ctx, m)
	}
	return nil
}

// writeInputs uploads b tokens (none for Encode) and the positions pos...
func (m *Eagle3) writeInputs(tokens []int32, pos, b int) error {
	for i := range b {
		m.positions[i] = int32(pos + i)
	}
	if err := m.be.Write(m.s.pos.ColSlice(0, b), kernels.I32Bytes(m.positions[:b])); err != nil {
		return fmt.Errorf("model: %w", err)
	}
	if tokens == nil {
		return nil
	}
	copy(m.tokens, tokens)
	if err := m.be.Write(m.s.tokens.ColSlice(0, b), kernels.I32Bytes(m.tokens[:b])); err != nil {
		return fmt.Errorf("model: %w", err)
	}
	return nil
}

// readLogits reads the head's row, spreading a reduced vocabulary over the
// target's ids.
func (m *Eagle3) readLogits() ([]float32, error) {
	if m.far != nil && len(m.far.heads) > 0 {
		return m.logits, m.far.gather(m.logits)
	}
	if m.d2t == nil {
		if err := m.be.Read(kernels.F32Bytes(m.logits), m.s.logits); err != nil {
			return nil, fmt.Errorf("model: logits: %w", err)
		}
		return m.logits, nil
	}
	if err := m.be.Read(kernels.F32Bytes(m.draftLogits), m.s.logits); err != nil {
		return nil, fmt.Errorf("model: logits: %w", err)
	}
	inf := float32(math.Inf(-1))
	for i := range m.logits {
		m.logits[i] = inf
	}
	for i, id := range m.d2t {
		m.logits[id] = m.draftLogits[i]
	}
	return m.logits, nil
}

// fuseOps turns b rows of target states into the states g of their
// positions: g = fc(x), x optionally RMS-normalised first.
func (m *Eagle3) fuseOps(b int) []kernels.Op {
	s, w := m.s, m.w
	x, g := s.hidden.RowSlice(0, b), s.fcOut.RowSlice(0, b)
	var ops []kernels.Op
	if m.params.NormBeforeFC {
		ops = append(ops, kernels.RMSNorm{Dst: x, X: x, W: w.fcNorm, Eps: m.params.NormEps})
	}
	return append(ops,
		kernels.MatMul{Dst: g, W: w.fc, X: x},
		kernels.SetRows{Dst: m.fused, Src: g, Idx: s.pos.ColSlice(0, b)},
	)
}

// bodyOps is the draft for b rows on the target's states: the borrowed
// embedding, the decoder layer, the borrowed head on the last row. The
// parts are kept apart because the borrowed tensors are where the draft
// would meet another device, were the target's embedding or head not on
// the draft's.
func (m *Eagle3) bodyOps(b int) []kernels.Op {
	g := m.s.g.RowSlice(0, b)
	ops := append(m.embedOps(b), kernels.GetRows{Dst: g, Src: m.fused, Idx: m.s.pos.ColSlice(0, b)})
	ops = append(ops, m.layerOpsAt(b, g, m.s.pos.ColSlice(0, b))...)
	return append(ops, m.headOps(b)...)
}

// stepOps is the draft for one row on its own previous output.
func (m *Eagle3) stepOps(int) []kernels.Op {
	ops := append(m.embedOps(1), m.layerOpsAt(1, m.own, m.s.pos.ColSlice(0, 1))...)
	return append(ops, m.headOps(1)...)
}

// embedOps looks up the embedding of each row's token (none where the
// target's table is used in place: the rows arrive in s.emb).
func (m *Eagle3) embedOps(b int) []kernels.Op {
	if !m.w.tokEmbd.Valid() {
		return nil
	}
	return []kernels.Op{kernels.GetRows{Dst: m.s.emb.RowSlice(0, b), Src: m.w.tokEmbd, Idx: m.s.tokens.ColSlice(0, b)}}
}

// layerOpsAt is the decoder layer on states g [b, n_embd] at the
// positions in pos: attention over the normalised embedding and state side
// by side, the state as residual, then a pre-norm SwiGLU FFN. It leaves
// the pre-norm output in s.x.
func (m *Eagle3) layerOpsAt(b int, g, pos kernels.Tensor) []kernels.Op {
	p, s, w := m.params, m.s, m.w
	emb, in := s.emb.RowSlice(0, b), s.in.RowSlice(0, b)
	embNormed, gNormed := in.ColSlice(0, p.Embd), in.ColSlice(p.Embd, p.Embd)
	x, h, tmp := s.x.RowSlice(0, b), s.h.RowSlice(0, b), s.tmp.RowSlice(0, b)
	residual := g
	if p.NormBeforeResidual {
		residual = gNormed
	}
	layer := blockWeights{wq: w.wq, wk: w.wk, wv: w.wv, wo: w.wo, gate: w.gate, up: w.up, down: w.down}
	ops := []kernels.Op{
		kernels.RMSNorm{Dst: embNormed, X: emb, W: w.embdNorm, Eps: p.NormEps},
		kernels.RMSNorm{Dst: gNormed, X: g, W: w.gNorm, Eps: p.NormEps},
	}
	ops = append(ops, p.attention(attnArgs{w: layer, factors: w.rope, in: in, out: tmp,
		q: s.q.RowSlice(0, b), k: s.k.RowSlice(0, b), v: s.v.RowSlice(0, b), attn: s.attn.RowSlice(0, b),
		keys: m.kvK, values: m.kvV, pos: pos, heads: p.Heads, kvHeads: p.KVHeads, base: p.RopeBase})...)
	ops = append(ops,
		kernels.Add{Dst: x, A: tmp, B: residual},
		kernels.RMSNorm{Dst: h, X: x, W: w.ffnNorm, Eps: p.NormEps})
	ops = append(ops, ffn(layer, h, tmp, s.gate.RowSlice(0, b), s.up.RowSlice(0, b))...)
	return append(ops, kernels.Add{Dst: x, A: x, B: tmp})
}

// headOps computes the logits of the last row; where the target's head is
// used in place, only its normalised input (the rest runs there).
func (m *Eagle3) headOps(b int) []kernels.Op {
	s := m.s
	ops := []kernels.Op{kernels.RMSNorm{Dst: s.sel, X: s.x.Row(b - 1), W: m.w.outNorm, Eps: m.params.NormEps}}
	if !m.w.output.Valid() {
		return ops
	}
	return append(ops, kernels.MatMul{Dst: s.logits, W: m.w.output, X: s.sel})
}

// weightBytes is the bytes of weights one drafted token reads: the layer's
// matrices and the head (the embedding is read one row per token).
func (m *Eagle3) weightBytes() int64 {
	n := m.w.output.Bytes()
	for _, t := range []kernels.Tensor{m.w.wq, m.w.wk, m.w.wv, m.w.wo, m.w.gate, m.w.up, m.w.down} {
		n += t.Bytes()
	}
	return n
}

// ForwardTop is Forward returning only the most likely token: with the
// head split by vocabulary, each shard's argmax, maximum and softmax sum
// are merged, and no logits are gathered.
func (m *Eagle3) ForwardTop(ctx context.Context, tokens []int32, pos int) (Top, error) {
	if err := m.checkForward(tokens, pos); err != nil {
		return Top{}, err
	}
	if err := m.run(ctx, tokens, pos, progKey{kind: progDraft}, m.bodyOps); err != nil {
		return Top{}, err
	}
	return m.top()
}

// StepTop is Step returning only the most likely token, as ForwardTop.
func (m *Eagle3) StepTop(ctx context.Context, token int32, pos int) (Top, error) {
	if pos != m.next || pos > m.n || pos >= m.context {
		return Top{}, fmt.Errorf("model: EAGLE-3 step at %d after a call that ended at %d, %d cached: %w", pos, m.next, m.n, ErrPosition)
	}
	if err := m.run(ctx, []int32{token}, pos, progKey{kind: progStep}, m.stepOps); err != nil {
		return Top{}, err
	}
	return m.top()
}

// checkForward validates Forward's arguments.
func (m *Eagle3) checkForward(tokens []int32, pos int) error {
	n := len(tokens)
	switch {
	case n == 0:
		return fmt.Errorf("model: EAGLE-3 forward: no tokens: %w", ErrBadParam)
	case pos < 0 || pos > m.n:
		return fmt.Errorf("model: EAGLE-3 forward at %d with %d cached: %w", pos, m.n, ErrPosition)
	case pos+n > m.nFused:
		return fmt.Errorf("model: EAGLE-3 forward of %d positions at %d with target states up to %d: %w", n, pos, m.nFused, ErrPosition)
	}
	return nil
}

// top is the last pass's most likely token: from the shards where the
// head runs elsewhere, from the logits where it runs on the draft's device.
func (m *Eagle3) top() (Top, error) {
	if m.d2t != nil && (m.far == nil || len(m.far.heads) == 0) {
		// Over the draft's own rows: the target ids outside d2t would
		// only add -Inf entries to scan.
		if err := m.be.Read(kernels.F32Bytes(m.draftLogits), m.s.logits); err != nil {
			return Top{}, fmt.Errorf("model: logits: %w", err)
		}
		t := topOf(m.draftLogits)
		t.ID = m.d2t[t.ID]
		return t, nil
	}
	if m.far == nil || len(m.far.heads) == 0 || !m.far.heads[0].probs.Valid() {
		logits, err := m.readLogits()
		if err != nil {
			return Top{}, err
		}
		return topOf(logits), nil
	}
	// Over shards s with maxima M_s and sums S_s = sum exp(l - M_s): the
	// maximum M is the largest M_s (the lowest id on ties, as shards come
	// in vocabulary order), S = sum S_s exp(M_s - M), and the top's
	// probability exp(M - M)/S.
	var best Top
	maxv, sum := math.Inf(-1), 0.0
	for _, sh := range m.far.heads {
		id, mx, inv, err := sh.read()
		if err != nil {
			return Top{}, err
		}
		if mx > maxv {
			sum *= math.Exp(maxv - mx)
			maxv, best.ID = mx, int32(sh.rows.Lo)+id
		}
		sum += math.Exp(mx-maxv) / inv
	}
	best.P = 1 / sum
	return best, nil
}

// topOf is the argmax of logits (the lowest id on ties) and its softmax
// probability.
func topOf(logits []float32) Top {
	best := 0
	for i, v := range logits {
		if v > logits[best] {
			best = i
		}
	}
	var sum float64
	for _, v := range logits {
		sum += math.Exp(float64(v - logits[best]))
	}
	return Top{ID: int32(best), P: 1 / sum}
}

// read is the shard's argmax (an id in its rows), maximum and the inverse
// of its softmax sum (the softmax at the maximum).
func (sh *farShard) read() (int32, float64, float64, error) {
	var id [1]int32
	if err := sh.be.Read(kernels.I32Bytes(id[:]), sh.id); err != nil {
		return 0, 0, 0, fmt.Errorf("model: draft head rows %v: %w", sh.rows, err)
	}
	if id[0] < 0 || int64(id[0]) >= sh.rows.Len() {
		return 0, 0, 0, fmt.Errorf("model: draft head rows %v: argmax %d: %w", sh.rows, id[0], ErrShape)
	}
	var v [2]float32
	if err := sh.be.Read(kernels.F32Bytes(v[:1]), sh.logits.ColSlice(int(id[0]), 1)); err != nil {
		return 0, 0, 0, fmt.Errorf("model: draft head rows %v: %w", sh.rows, err)
	}
	if err := sh.be.Read(kernels.F32Bytes(v[1:]), sh.probs.ColSlice(int(id[0]), 1)); err != nil {
		return 0, 0, 0, fmt.Errorf("model: draft head rows %v: %w", sh.rows, err)
	}
	return id[0], float64(v[0]), float64(v[1]), nil
}

// head sends the normalised state to every shard of the target's head and
// runs the shard's rows of it there, with its argmax and softmax.
func (f *eagle3Far) head(ctx context.Context, m *Eagle3) error {
	if err := m.be.Read(kernels.F32Bytes(f.sel), m.s.sel); err != nil {
		return fmt.Errorf("model: EAGLE-3 head input: %w", err)
	}
	for _, sh := range f.heads {
		if sh.sent {
			if err := sh.be.Write(sh.in, kernels.F32Bytes(f.sel)); err != nil {
				return fmt.Errorf("model: EAGLE-3 head input: %w", err)
			}
		}
		err := sh.progs.run(ctx, progKey{kind: progFarHead, n: 1}, func() []kernels.Op {
			ops := []kernels.Op{
				kernels.MatMul{Dst: sh.logits, W: sh.w, X: sh.in},
				kernels.Argmax{Dst: sh.id, X: sh.logits},
			}
			if sh.probs.Valid() {
				ops = append(ops, kernels.Softmax{Dst: sh.probs, X: sh.logits})
			}
			return ops
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// gather reads every shard's logits into their rows of dst.
func (f *eagle3Far) gather(dst []float32) error {
	for _, sh := range f.heads {
		if err := sh.be.Read(kernels.F32Bytes(dst[sh.rows.Lo:sh.rows.Hi]), sh.logits); err != nil {
			return fmt.Errorf("model: EAGLE-3 logits rows %v: %w", sh.rows, err)
		}
	}
	return nil
}

// Close releases the programs and the draft's own device memory, and
// stops the target's capture; borrowed tensors stay with the target.
func (m *Eagle3) Close() error {
	err := releaseDraft(m.target, &m.progs, m.be, m.bufs, &m.held)
	m.target, m.bufs = nil, nil
	return err
}
