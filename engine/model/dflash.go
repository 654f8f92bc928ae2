package model

import (
	"context"
	"fmt"
	"math"

	"github.com/tandem-run/tandem/engine/gguf"
	"github.com/tandem-run/tandem/engine/plan"
	"github.com/tandem-run/tandem/kernels"
)

// The DFlash draft's programs, past the kinds programs.go names.
const (
	progDFlashInject progKind = progChain + 1 + iota // the target's states fused into every layer's K and V
	progDFlashBlock                                  // one block through the layers, and the head
)

// DFlash is a DFlash block draft (see dflash_params.go for the format).
// The target hands it the inputs of the blocks it reads for every position
// it runs (Model.Capture); Encode fuses them and writes each draft layer's
// K and V there, so the draft's cache mirrors the target's positions. Block
// then runs [anchor, mask, ...] after them in one pass and returns every
// slot's logits or top token.
//
// The draft runs on one device. The token embedding and head it borrows
// are used where the target keeps them (in its own programs when that is
// the draft's device, else through the host, one shard of the head at a
// time, merging the shards' top tokens), or copied beside it, as the plan
// chose.
type DFlash struct {
	params      DFlashParams
	targetVocab int
	context     int
	batch       int
	maxDraft    int
	be          kernels.Backend
	target      *Model
	w           dflashWeights
	d2t         []int32
	kvK, kvV    []kernels.Tensor // per layer [context, kv_heads*head_dim]
	n           int              // positions whose target states are injected
	s           dflashScratch
	bufs        []kernels.Buffer
	far         *dflashFar
	held        farHeld // buffers and programs on the target's devices
	progs       programs

	tokens, positions, bounds []int32
	draftLogits               []float32 // [rows, draft vocab], spread through d2t
	logits                    []float32 // [rows, target vocab]
}

// dflashWeights are a DFlash draft's tensors under llama.cpp's names.
type dflashWeights struct {
	fc      kernels.Tensor // [n_embd, n_fused]
	encNorm kernels.Tensor // [1, n_embd] enc.output_norm, after fc
	layers  []blockWeights // attn_norm, wq..wo, q/k norms, ffn_norm, gate, up, down
	outNorm kernels.Tensor // [1, n_embd]
	tokEmbd kernels.Tensor // [target vocab, n_embd]: own or the target's
	output  kernels.Tensor // [draft vocab, n_embd]: own or the target's
	ownEmbd bool
	ownHead bool
}

// dflashScratch is the activations of one pass, views of the plan's
// buffers.
type dflashScratch struct {
	tokens, pos, bounds kernels.Tensor // I32 [1, batch]: ids, positions, last cache row each attends
	hidden              kernels.Tensor // [batch, n_fused] the target's states (the target writes them)
	emb                 kernels.Tensor // [batch, n_embd] looked-up rows arriving from the target's device
	x, h, tmp           kernels.Tensor // [batch, n_embd] stream, normalised, sub-layer output
	q, attn             kernels.Tensor // [batch, n_head*head_dim]
	k, v                kernels.Tensor // [batch, n_kv_head*head_dim]
	gate, up            kernels.Tensor // [batch, n_ff]
	logits              kernels.Tensor // [batch, draft vocab]: slot logits, then their softmax (BlockTop)
	topIDs, topP        kernels.Tensor // I32 and F32 where the head runs here: each slot's argmax and its probability
}

// dflashFar is what the draft runs beyond its device: the target's token
// lookups and head shards (sel: the normalised slots, [batch, n_embd]).
type dflashFar struct {
	farSide
	heads []*blockShard
}

// blockShard is one device's rows of the borrowed head for a block's slots.
type blockShard struct {
	be     kernels.Backend
	rows   plan.Range
	w      kernels.Tensor
	in     kernels.Tensor // [batch, n_embd]
	sent   bool
	logits kernels.Tensor // [batch, rows]: slot logits in the first half, their softmax in the second
	ids    kernels.Tensor // I32 [1, batch]
	progs  *programs
}

func (p DFlashParams) specs(w *dflashWeights, targetVocab int) []tensorSpec {
	qDim, kvDim := p.Heads*p.HeadDim, p.KVHeads*p.HeadDim
	matrix := func(name string, dst *kernels.Tensor, rows, cols int) tensorSpec {
		return tensorSpec{name: name, dst: dst, rows: rows, cols: cols, cat: kernels.Weights, use: kernels.MatMul{}}
	}
	vector := func(name string, dst *kernels.Tensor, n int, cat kernels.Category) tensorSpec {
		return tensorSpec{name: name, dst: dst, rows: 1, cols: n, cat: cat, vector: true}
	}
	specs := []tensorSpec{
		matrix("fc.weight", &w.fc, p.Embd, p.FusedWidth()),
		vector("enc.output_norm.weight", &w.encNorm, p.Embd, kernels.Weights),
	}
	w.layers = make([]blockWeights, p.Layers)
	for i := range w.layers {
		l, name := &w.layers[i], func(s string) string { return fmt.Sprintf("blk.%d.%s.weight", i, s) }
		specs = append(specs,
			vector(name("attn_norm"), &l.attnNorm, p.Embd, kernels.Weights),
			matrix(name("attn_q"), &l.wq, qDim, p.Embd),
			matrix(name("attn_k"), &l.wk, kvDim, p.Embd),
			matrix(name("attn_v"), &l.wv, kvDim, p.Embd),
			matrix(name("attn_output"), &l.wo, p.Embd, qDim),
			vector(name("attn_q_norm"), &l.qNorm, p.HeadDim, kernels.Weights),
			vector(name("attn_k_norm"), &l.kNorm, p.HeadDim, kernels.Weights),
			vector(name("ffn_norm"), &l.ffnNorm, p.Embd, kernels.Weights),
			matrix(name("ffn_gate"), &l.gate, p.FF, p.Embd),
			matrix(name("ffn_up"), &l.up, p.FF, p.Embd),
			matrix(name("ffn_down"), &l.down, p.Embd, p.FF),
		)
	}
	return append(specs,
		vector("output_norm.weight", &w.outNorm, p.Embd, kernels.Head),
		tensorSpec{name: "token_embd.weight", dst: &w.tokEmbd, rows: targetVocab, cols: p.Embd, cat: kernels.Embedding, optional: true, use: kernels.GetRows{}},
		tensorSpec{name: "output.weight", dst: &w.output, rows: p.Vocab, cols: p.Embd, cat: kernels.Head, optional: true, use: kernels.MatMul{}},
	)
}

// LoadDFlash loads the DFlash draft of f as mp, the draft of plan p,
// beside target, the plan's target (tf its file), and has the target hand
// it the block inputs it reads. The plan's buffers are what it allocates.
// f and tf must stay open while the draft lives.
func LoadDFlash(ctx context.Context, f, tf *gguf.File, p *plan.Plan, mp *plan.ModelPlan, target *Model, backends map[int]kernels.Backend, progress func(Progress)) (_ *DFlash, err error) {
	dev, be, err := draftDevice(p, mp, backends, "a DFlash draft")
	if err != nil {
		return nil, err
	}
	tp := target.params
	d, d2t, err := readDFlashFor(f, tp)
	if err != nil {
		return nil, err
	}
	if d.FF < d.Embd {
		// The sub-layer outputs share ffn_up's buffer (allocBuffers).
		return nil, fmt.Errorf("model: DFlash draft of width %d, FFN %d: %w", d.Embd, d.FF, ErrUnsupported)
	}
	m := &DFlash{params: d, targetVocab: tp.Vocab, context: p.Ctx, batch: p.Batch, be: be, target: target, d2t: d2t,
		progs: newPrograms(be, fmt.Sprintf("device %d, DFlash draft", dev))}
	// A block's slots are a batch; a shard of a borrowed head keeps their
	// logits and softmax side by side in its batch rows.
	m.maxDraft = min(d.MaxDraft(), p.Batch/2-1, p.Batch-1)
	if m.maxDraft < 1 {
		return nil, fmt.Errorf("model: a DFlash block of %d in batches of %d: %w", d.BlockSize, p.Batch, ErrBadParam)
	}
	far := &dflashFar{farSide: farSide{target: target}}
	l := &loader{ctx: ctx, f: f, be: be, owner: string(mp.Role), progress: progress}
	defer func() {
		if err != nil {
			for _, b := range l.bufs {
				_ = be.Free(b)
			}
			_ = m.held.release()
		}
	}()
	specs := d.specs(&m.w, tp.Vocab)
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
	m.tokens, m.positions, m.bounds = make([]int32, m.batch), make([]int32, m.batch), make([]int32, m.batch)
	m.logits = make([]float32, (m.maxDraft+1)*tp.Vocab)
	if d2t != nil {
		m.draftLogits = make([]float32, (m.maxDraft+1)*d.Vocab)
	}
	far.emb, far.sel = make([]float32, m.batch*d.Embd), make([]float32, m.batch*d.Embd)
	m.far = far
	err = target.Capture(d.TargetLayers, be, m.s.hidden, func(pos, n int) error { return m.Encode(context.Background(), pos, n) })
	if err != nil {
		return nil, err
	}
	return m, nil
}

// placeBorrowed gives the draft the target tensors it lacks as the plan
// says: copies from tf on the draft's device, or the target's own where it
// keeps them.
func (m *DFlash) placeBorrowed(l *loader, tf *gguf.File, mp *plan.ModelPlan, far *dflashFar, specs []tensorSpec) error {
	if len(mp.Borrowed) == 0 {
		return nil
	}
	embed, heads, err := borrow(l, tf, mp, far.target, specs, &m.w.tokEmbd, &m.w.output, m.w.ownEmbd, m.w.ownHead)
	if err != nil {
		return err
	}
	far.embed = far.embed || embed
	for _, h := range heads {
		far.heads = append(far.heads, &blockShard{be: h.be, rows: h.rows, w: h.w,
			progs: m.held.programs(h.be, fmt.Sprintf("device %d, DFlash head rows %v", h.dev, h.rows))})
	}
	return nil
}

// allocBuffers allocates and binds the plan's buffers: on the draft's
// device the layers' caches and activations, on the target's head devices
// the slots sent there, their logits and best ids.
func (m *DFlash) allocBuffers(l *loader, mp *plan.ModelPlan, backends map[int]kernels.Backend, far *dflashFar) error {
	p, s, dev := m.params, &m.s, mp.Placement.Devices[0]
	m.kvK, m.kvV = make([]kernels.Tensor, p.Layers), make([]kernels.Tensor, p.Layers)
	byDev := shardsByDevice(mp, far.heads)
	shard := func(b plan.Buffer, t kernels.Tensor) bool {
		sh := byDev[b.Device]
		if sh == nil || (b.Device == dev && !headRole(b.Role)) {
			return false
		}
		switch b.Role {
		case plan.RoleReceive:
			sh.in, sh.sent = t, true
		case plan.RoleLogits:
			sh.logits = t
		case plan.RoleTopIDs:
			sh.ids = packed(t, 1, m.batch)
		}
		return true
	}
	local := func(b plan.Buffer, t kernels.Tensor) error {
		if (b.Role == plan.RoleKeys || b.Role == plan.RoleValues) && (b.Block < 0 || b.Block >= p.Layers) {
			return fmt.Errorf("model: draft cache %s of a %d-layer draft: %w", b.Name(), p.Layers, ErrBadParam)
		}
		// Lifetimes in a pass let buffers serve several views: the
		// sub-layer outputs use ffn_up's space (free but during the
		// SwiGLU), the encoder's states become the stream.
		switch b.Role {
		case plan.RoleKeys:
			m.kvK[b.Block] = t
		case plan.RoleValues:
			m.kvV[b.Block] = t
		case plan.RoleInputs:
			s.tokens, s.pos, s.bounds = t.Row(0), t.Row(1), t.Row(2)
		case plan.RoleStream:
			s.x = t
		case plan.RoleReceive:
			s.emb = t
		case plan.RoleNormed:
			s.h = packed(t, m.batch, p.Embd)
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
			s.hidden = t
		case plan.RoleLogits:
			s.logits = t
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
	for _, t := range []kernels.Tensor{s.tokens, s.x, s.h, s.q, s.k, s.v, s.attn, s.gate, s.up, s.hidden} {
		if !t.Valid() {
			return fmt.Errorf("model: the plan lacks buffers of the DFlash draft on device %d: %w", dev, ErrMissing)
		}
	}
	for i := range p.Layers {
		if !m.kvK[i].Valid() || !m.kvV[i].Valid() {
			return fmt.Errorf("model: the plan has no KV cache for layer %d of the DFlash draft: %w", i, ErrMissing)
		}
	}
	if far.embed && !s.emb.Valid() {
		return fmt.Errorf("model: the plan has no buffer for the draft's looked-up rows on device %d: %w", dev, ErrMissing)
	}
	if m.w.output.Valid() && !s.logits.Valid() {
		return fmt.Errorf("model: the plan has no logits for the draft's head on device %d: %w", dev, ErrMissing)
	}
	for _, sh := range far.heads {
		if !sh.logits.Valid() || !sh.ids.Valid() {
			return fmt.Errorf("model: the plan has no logits for the draft on the device of head rows %v: %w", sh.rows, ErrMissing)
		}
		if !sh.sent {
			sh.in = s.h // the target keeps these rows on the draft's device
		}
	}
	return nil
}

// Params are the draft's hyper-parameters.
func (m *DFlash) Params() DFlashParams { return m.params }

// MaxDraft is the most tokens Block proposes: the trained block less its
// anchor, within the plan's batch.
func (m *DFlash) MaxDraft() int { return m.maxDraft }

// Borrowed names the target tensors the draft uses in place of its own.
func (m *DFlash) Borrowed() []string {
	var names []string
	if !m.w.ownEmbd {
		names = append(names, "token_embd.weight")
	}
	if !m.w.ownHead {
		names = append(names, "output.weight")
	}
	return names
}

// Len is the number of positions whose target states are in the cache.
func (m *DFlash) Len() int { return m.n }

// Truncate forgets injected positions n and later. n may not exceed Len().
func (m *DFlash) Truncate(n int) error {
	if n < 0 || n > m.n {
		return fmt.Errorf("model: truncate to %d with %d cached: %w", n, m.n, ErrPosition)
	}
	m.n = n
	return nil
}

// Encode fuses the target's captured states of positions pos..pos+n-1,
// which the target has just written into the first n rows of the draft's
// features buffer, and writes each layer's K and V of them into the cache.
// Positions from pos on are replaced. pos may be past Len(), after target
// passes that captured nothing (Model.PauseCapture, while drafting is
// off): the cache keeps stale keys and values in the gap, so a block
// drafted later attends to approximate ones there. That changes only
// what the draft proposes; verification keeps the output the target's.
func (m *DFlash) Encode(ctx context.Context, pos, n int) error {
	switch {
	case n <= 0 || n > m.batch:
		return fmt.Errorf("model: DFlash encode of %d positions in a batch of %d: %w", n, m.batch, ErrShape)
	case pos < 0:
		return fmt.Errorf("model: DFlash encode at %d: %w", pos, ErrPosition)
	case pos+n > m.context:
		return fmt.Errorf("model: DFlash encode of %d positions at %d in a %d-token context: %w", n, pos, m.context, ErrContext)
	}
	m.n = min(m.n, pos)
	if err := m.writeInputs(nil, pos, n, false); err != nil {
		return err
	}
	if err := m.progs.run(ctx, progKey{kind: progDFlashInject, n: n}, func() []kernels.Op { return m.injectOps(n) }); err != nil {
		return err
	}
	m.n = pos + n
	return nil
}

// injectOps is the encoder on b rows (g = RMSNorm(fc(states))) and every
// layer's K and V of g written at their positions.
func (m *DFlash) injectOps(b int) []kernels.Op {
	p, s, w := m.params, m.s, m.w
	g, k, v, pos := s.x.RowSlice(0, b), s.k.RowSlice(0, b), s.v.RowSlice(0, b), s.pos.ColSlice(0, b)
	ops := []kernels.Op{
		kernels.MatMul{Dst: g, W: w.fc, X: s.hidden.RowSlice(0, b)},
		kernels.RMSNorm{Dst: g, X: g, W: w.encNorm, Eps: p.NormEps},
	}
	for i, l := range w.layers {
		kh := k.Reshape(b*p.KVHeads, p.HeadDim)
		ops = append(ops,
			kernels.MatMul{Dst: k, W: l.wk, X: g},
			kernels.MatMul{Dst: v, W: l.wv, X: g},
			kernels.RMSNorm{Dst: kh, X: kh, W: l.kNorm, Eps: p.NormEps},
			m.rope(k, pos),
			kernels.SetRows{Dst: m.kvK[i], Src: k, Idx: pos},
			kernels.SetRows{Dst: m.kvV[i], Src: v, Idx: pos},
		)
	}
	return ops
}

func (m *DFlash) rope(t, pos kernels.Tensor) kernels.Rope {
	p := m.params
	return kernels.Rope{Dst: t, X: t, Pos: pos, HeadDim: p.HeadDim, Dims: p.RopeDims, Base: p.RopeBase, Scale: p.RopeScale, Neox: true}
}

// blockOps is one pass over a block of b rows: the embedding, every layer
// (its attention reaching the whole block unless the draft is causal), and
// the output norm of the slots after the anchor; the head's product too
// where the head is on the draft's device.
func (m *DFlash) blockOps(b int) []kernels.Op {
	p, s, w := m.params, m.s, m.w
	x, h, tmp := s.x.RowSlice(0, b), s.h.RowSlice(0, b), s.tmp.RowSlice(0, b)
	q, k, v, attn := s.q.RowSlice(0, b), s.k.RowSlice(0, b), s.v.RowSlice(0, b), s.attn.RowSlice(0, b)
	pos, bounds := s.pos.ColSlice(0, b), s.bounds.ColSlice(0, b)
	var ops []kernels.Op
	if m.far != nil && m.far.embed {
		ops = append(ops, kernels.Copy{Dst: x, Src: s.emb.RowSlice(0, b)})
	} else {
		ops = append(ops, kernels.GetRows{Dst: x, Src: w.tokEmbd, Idx: s.tokens.ColSlice(0, b)})
	}
	for i, l := range w.layers {
		qh, kh := q.Reshape(b*p.Heads, p.HeadDim), k.Reshape(b*p.KVHeads, p.HeadDim)
		ops = append(ops,
			kernels.RMSNorm{Dst: h, X: x, W: l.attnNorm, Eps: p.NormEps},
			kernels.MatMul{Dst: q, W: l.wq, X: h},
			kernels.MatMul{Dst: k, W: l.wk, X: h},
			kernels.MatMul{Dst: v, W: l.wv, X: h},
			kernels.RMSNorm{Dst: qh, X: qh, W: l.qNorm, Eps: p.NormEps},
			kernels.RMSNorm{Dst: kh, X: kh, W: l.kNorm, Eps: p.NormEps},
			m.rope(q, pos), m.rope(k, pos),
			kernels.SetRows{Dst: m.kvK[i], Src: k, Idx: pos},
			kernels.SetRows{Dst: m.kvV[i], Src: v, Idx: pos},
			// Each row attends the cache up to its bound: the block's last
			// position (non-causal), or its own (causal).
			kernels.Attention{Dst: attn, Q: q, K: m.kvK[i], V: m.kvV[i], Pos: bounds,
				NHead: p.Heads, NKVHead: p.KVHeads, HeadDim: p.HeadDim, Scale: float32(1 / math.Sqrt(float64(p.HeadDim)))},
			kernels.MatMul{Dst: tmp, W: l.wo, X: attn},
			kernels.Add{Dst: x, A: x, B: tmp},
			kernels.RMSNorm{Dst: h, X: x, W: l.ffnNorm, Eps: p.NormEps},
		)
		ops = append(ops, ffn(l, h, tmp, s.gate.RowSlice(0, b), s.up.RowSlice(0, b))...)
		ops = append(ops, kernels.Add{Dst: x, A: x, B: tmp})
	}
	slots, sel := x.RowSlice(1, b-1), h.RowSlice(0, b-1)
	ops = append(ops, kernels.RMSNorm{Dst: sel, X: slots, W: w.outNorm, Eps: p.NormEps})
	if w.output.Valid() {
		ops = append(ops, kernels.MatMul{Dst: s.logits.RowSlice(0, b-1), W: w.output, X: sel})
	}
	return ops
}

// writeInputs uploads the rows' tokens (none for Encode), positions
// pos... and attention bounds.
func (m *DFlash) writeInputs(tokens []int32, pos, b int, causal bool) error {
	for i := range b {
		m.positions[i] = int32(pos + i)
		m.bounds[i] = int32(pos + b - 1)
		if causal {
			m.bounds[i] = m.positions[i]
		}
	}
	if err := m.be.Write(m.s.pos.ColSlice(0, b), kernels.I32Bytes(m.positions[:b])); err != nil {
		return fmt.Errorf("model: %w", err)
	}
	if tokens == nil {
		return nil
	}
	if err := m.be.Write(m.s.bounds.ColSlice(0, b), kernels.I32Bytes(m.bounds[:b])); err != nil {
		return fmt.Errorf("model: %w", err)
	}
	copy(m.tokens, tokens)
	if err := m.be.Write(m.s.tokens.ColSlice(0, b), kernels.I32Bytes(m.tokens[:b])); err != nil {
		return fmt.Errorf("model: %w", err)
	}
	return nil
}

// run runs the block [anchor, mask x k] at positions pos..pos+k, after
// the injected positions before pos (pos may not be past Len()), with
// each slot's top token and its probability where the head runs on the
// draft's device when tops is set. The block's own K and V are forgotten
// afterwards: Len() becomes pos.
func (m *DFlash) run(ctx context.Context, anchor int32, pos, k int, tops bool) error {
	switch {
	case k < 1 || k > m.maxDraft:
		return fmt.Errorf("model: a DFlash block of %d drafted tokens (1 to %d): %w", k, m.maxDraft, ErrBadParam)
	case pos < 0 || pos > m.n:
		return fmt.Errorf("model: a DFlash block at %d with target states of %d positions: %w", pos, m.n, ErrPosition)
	case pos+k >= m.context:
		return fmt.Errorf("model: a DFlash block of %d at %d in a %d-token context: %w", k+1, pos, m.context, ErrContext)
	case anchor < 0 || int(anchor) >= m.targetVocab:
		return fmt.Errorf("model: anchor token %d: %w (vocabulary %d)", anchor, ErrToken, m.targetVocab)
	}
	b := k + 1
	tokens := m.tokens[:0]
	tokens = append(tokens, anchor)
	for range k {
		tokens = append(tokens, m.params.MaskToken)
	}
	m.n = pos
	if err := m.writeInputs(tokens, pos, b, m.params.Causal); err != nil {
		return err
	}
	if m.far != nil && m.far.embed {
		if err := m.far.lookUp(ctx, m.be, m.s.emb, tokens, m.params.Embd); err != nil {
			return err
		}
	}
	key, ops := progKey{kind: progDFlashBlock, n: b}, func() []kernels.Op { return m.blockOps(b) }
	if tops && m.localTops() {
		key.top = 1
		ops = func() []kernels.Op { return append(m.blockOps(b), m.topOps(k)...) }
	}
	if err := m.progs.run(ctx, key, ops); err != nil {
		return err
	}
	if m.far != nil && len(m.far.heads) > 0 {
		return m.far.head(ctx, m, k)
	}
	return nil
}

// Block drafts k tokens after the anchor at position pos and returns the
// logits of its k slots over the target's vocabulary, row after row (ids
// outside a d2t map get -Inf). The slice is reused by the next call.
func (m *DFlash) Block(ctx context.Context, anchor int32, pos, k int) ([]float32, error) {
	if err := m.run(ctx, anchor, pos, k, false); err != nil {
		return nil, err
	}
	return m.readLogits(k)
}

// BlockTop is Block returning only each slot's most likely token and its
// probability, found where the head runs: only k ids and k probabilities
// reach the host (a block's logits are k x 151,936 floats at a real
// vocabulary, and their softmax on the host would cost more than the
// pass), and with the head split by vocabulary the shards' tops merge.
func (m *DFlash) BlockTop(ctx context.Context, anchor int32, pos, k int) ([]Top, error) {
	if err := m.run(ctx, anchor, pos, k, true); err != nil {
		return nil, err
	}
	tops := make([]Top, k)
	if m.far != nil && len(m.far.heads) > 0 {
		return tops, m.far.tops(tops)
	}
	if m.localTops() {
		return tops, m.readTops(tops)
	}
	logits, err := m.readLogits(k)
	if err != nil {
		return nil, err
	}
	v := m.targetVocab
	for i := range tops {
		tops[i] = topOf(logits[i*v : (i+1)*v])
	}
	return tops, nil
}

// localTops reports whether the slots' tops are found on the draft's
// device: its own head or the target's used in place, with the plan's
// top buffers there.
func (m *DFlash) localTops() bool {
	return m.w.output.Valid() && m.s.topIDs.Valid() && m.s.topP.Valid() && m.s.logits.Valid()
}

// topOps finds each of k slots' argmax (the lowest id on ties, as topOf)
// and its softmax probability, the largest of the row's softmax, which
// goes into the logits buffer's rows after the slots'.
func (m *DFlash) topOps(k int) []kernels.Op {
	s := m.s
	logits, probs := s.logits.RowSlice(0, k), s.logits.RowSlice(k, k)
	ids := packed(s.topIDs, 2*k, 1)
	return []kernels.Op{
		kernels.Argmax{Dst: packed(s.topIDs, 1, k), X: logits},
		kernels.Softmax{Dst: probs, X: logits},
		kernels.TopK{Ids: ids.RowSlice(k, k), Vals: packed(s.topP, k, 1), X: probs},
	}
}

// readTops reads what topOps found: ids of the draft's head rows, mapped
// through d2t where it has one.
func (m *DFlash) readTops(out []Top) error {
	k := len(out)
	ids, p := make([]int32, k), make([]float32, k)
	if err := m.be.Read(kernels.I32Bytes(ids), packed(m.s.topIDs, 1, k)); err != nil {
		return fmt.Errorf("model: DFlash tops: %w", err)
	}
	if err := m.be.Read(kernels.F32Bytes(p), packed(m.s.topP, k, 1)); err != nil {
		return fmt.Errorf("model: DFlash tops: %w", err)
	}
	for i, id := range ids {
		if id < 0 || int(id) >= m.params.Vocab {
			return fmt.Errorf("model: DFlash slot %d: argmax %d of %d rows: %w", i, id, m.params.Vocab, ErrShape)
		}
		if m.d2t != nil {
			id = m.d2t[id]
		}
		out[i] = Top{ID: id, P: float64(p[i])}
	}
	return nil
}

// readLogits reads k slots' logits, spreading a reduced vocabulary over
// the target's ids.
func (m *DFlash) readLogits(k int) ([]float32, error) {
	v := m.targetVocab
	out := m.logits[:k*v]
	if m.far != nil && len(m.far.heads) > 0 {
		return out, m.far.gather(out, k, v)
	}
	if m.d2t == nil {
		if err := m.be.Read(kernels.F32Bytes(out), m.s.logits.RowSlice(0, k)); err != nil {
			return nil, fmt.Errorf("model: logits: %w", err)
		}
		return out, nil
	}
	dv := m.params.Vocab
	if err := m.be.Read(kernels.F32Bytes(m.draftLogits[:k*dv]), m.s.logits.RowSlice(0, k)); err != nil {
		return nil, fmt.Errorf("model: logits: %w", err)
	}
	inf := float32(math.Inf(-1))
	for i := range out {
		out[i] = inf
	}
	for r := range k {
		for j, id := range m.d2t {
			out[r*v+int(id)] = m.draftLogits[r*dv+j]
		}
	}
	return out, nil
}

// head sends the k normalised slots to every shard of the target's head
// and runs the shard's rows there, with each slot's argmax and softmax.
func (f *dflashFar) head(ctx context.Context, m *DFlash, k int) error {
	e := m.params.Embd
	if err := m.be.Read(kernels.F32Bytes(f.sel[:k*e]), m.s.h.RowSlice(0, k)); err != nil {
		return fmt.Errorf("model: DFlash head input: %w", err)
	}
	for _, sh := range f.heads {
		if sh.sent {
			if err := sh.be.Write(sh.in.RowSlice(0, k), kernels.F32Bytes(f.sel[:k*e])); err != nil {
				return fmt.Errorf("model: DFlash head input: %w", err)
			}
		}
		err := sh.progs.run(ctx, progKey{kind: progFarHead, n: k}, func() []kernels.Op {
			logits, probs := sh.logits.RowSlice(0, k), sh.logits.RowSlice(k, k)
			return []kernels.Op{
				kernels.MatMul{Dst: logits, W: sh.w, X: sh.in.RowSlice(0, k)},
				kernels.Argmax{Dst: sh.ids.ColSlice(0, k), X: logits},
				kernels.Softmax{Dst: probs, X: logits},
			}
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// tops merges the shards' per-slot argmax, maximum and softmax sum: over
// shards s with maxima M_s and sums S_s = sum exp(l - M_s), the maximum M
// is the largest M_s (the lowest id on ties: shards come in vocabulary
// order), S = sum S_s exp(M_s - M), and the top's probability 1/S.
func (f *dflashFar) tops(out []Top) error {
	k := len(out)
	ids := make([]int32, k)
	maxv, sums := make([]float64, k), make([]float64, k)
	for i := range maxv {
		maxv[i] = math.Inf(-1)
	}
	var v [1]float32
	for _, sh := range f.heads {
		if err := sh.be.Read(kernels.I32Bytes(ids), sh.ids.ColSlice(0, k)); err != nil {
			return fmt.Errorf("model: draft head rows %v: %w", sh.rows, err)
		}
		for i, id := range ids {
			if id < 0 || int64(id) >= sh.rows.Len() {
				return fmt.Errorf("model: draft head rows %v: argmax %d: %w", sh.rows, id, ErrShape)
			}
			if err := sh.be.Read(kernels.F32Bytes(v[:]), sh.logits.Row(i).ColSlice(int(id), 1)); err != nil {
				return fmt.Errorf("model: draft head rows %v: %w", sh.rows, err)
			}
			mx := float64(v[0])
			if err := sh.be.Read(kernels.F32Bytes(v[:]), sh.logits.Row(k+i).ColSlice(int(id), 1)); err != nil {
				return fmt.Errorf("model: draft head rows %v: %w", sh.rows, err)
			}
			inv := float64(v[0])
			if mx > maxv[i] {
				sums[i] *= math.Exp(maxv[i] - mx)
				maxv[i], out[i].ID = mx, int32(sh.rows.Lo)+id
			}
			sums[i] += math.Exp(mx-maxv[i]) / inv
		}
	}
	for i := range out {
		out[i].P = 1 / sums[i]
	}
	return nil
}

// gather reads every shard's logits of k slots into their rows of dst
// ([k, vocab]).
func (f *dflashFar) gather(dst []float32, k, vocab int) error {
	for _, sh := range f.heads {
		n := int(sh.rows.Len())
		rows := make([]float32, k*n)
		if err := sh.be.Read(kernels.F32Bytes(rows), sh.logits.RowSlice(0, k)); err != nil {
			return fmt.Errorf("model: DFlash logits rows %v: %w", sh.rows, err)
		}
		for i := range k {
			copy(dst[i*vocab+int(sh.rows.Lo):i*vocab+int(sh.rows.Hi)], rows[i*n:(i+1)*n])
		}
	}
	return nil
}

// Close releases the programs and the draft's own device memory, and
// stops the target's capture; borrowed tensors stay with the target.
func (m *DFlash) Close() error {
	err := releaseDraft(m.target, &m.progs, m.be, m.bufs, &m.held)
	m.target, m.bufs = nil, nil
	return err
}
