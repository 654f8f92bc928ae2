package model

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/tandem-run/tandem/engine/gguf"
	"github.com/tandem-run/tandem/engine/plan"
	"github.com/tandem-run/tandem/kernels"
	"github.com/tandem-run/tandem/kernels/quant"
)

// eagle3Far is what a placed EAGLE-3 draft runs beyond its own device: the
// target's token lookups and head shards, used where the target keeps them
// (plan.BorrowInPlace). Token ids and the normalised hidden state go there
// through the host; embeddings and per-shard results come back.
type eagle3Far struct {
	target *Placed
	embed  bool        // tokens are looked up by the target (Placed.lookUp)
	heads  []*farShard // the head's shards, in vocabulary order
	emb    []float32   // [batch, n_embd] looked-up rows
	sel    []float32   // [n_embd] the normalised state the head reads
	bufs   map[kernels.Backend][]kernels.Buffer
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
	prog   kernels.Program
}

// Top is a draft's most likely next token over the target's vocabulary and
// its softmax probability.
type Top struct {
	ID int32
	P  float64
}

// LoadEagle3Placed loads the EAGLE-3 draft of f as mp, the draft of plan p,
// beside target, the plan's target (tf its file), which must capture the
// blocks the draft reads (Placed.Capture; the receiver hands them to
// EncodeHost). The draft runs on its one device; what it borrows is used
// where the target keeps it or copied beside it, as the plan chose, and
// the plan's buffers (and a CUDA backend's workspace at the plan's
// figure) are what it allocates, plus its token inputs and carried state
// (a few bytes a token). f and tf must stay open while the
// draft lives.
func LoadEagle3Placed(ctx context.Context, f, tf *gguf.File, p *plan.Plan, mp *plan.ModelPlan, target *Placed, backends map[int]kernels.Backend, progress func(Progress)) (_ *Eagle3, err error) {
	if !p.Fits {
		return nil, fmt.Errorf("model: %s: the plan does not fit its devices: %w", mp.Role, ErrBadParam)
	}
	if len(mp.Placement.Devices) != 1 {
		return nil, fmt.Errorf("model: an EAGLE-3 draft over devices %v: %w (one device)", mp.Placement.Devices, ErrUnsupported)
	}
	if p.KVType != quant.F32 && p.KVType != quant.F16 {
		return nil, fmt.Errorf("model: KV cache type %v: %w (F32 or F16)", p.KVType, ErrUnsupported)
	}
	var captured []int
	if target.cap != nil {
		captured = target.cap.layers
	}
	tp := target.params
	e, d2t, err := readEagle3For(f, tp, captured)
	if err != nil {
		return nil, err
	}
	if e.FF < e.Embd || e.FusedWidth() <= e.Embd {
		return nil, fmt.Errorf("model: EAGLE-3 draft of width %d, FFN %d, %d fused: %w on a placed draft", e.Embd, e.FF, e.FusedWidth(), ErrUnsupported)
	}
	dev := mp.Placement.Devices[0]
	be, ok := backends[dev]
	if !ok {
		return nil, fmt.Errorf("model: draft: no backend for device %d", dev)
	}
	m := &Eagle3{params: e, targetVocab: tp.Vocab, context: p.Ctx, batch: p.Batch, be: be, d2t: d2t, next: -1,
		fuse: map[int]kernels.Program{}, body: map[int]kernels.Program{}, step: map[int]kernels.Program{}}
	far := &eagle3Far{target: target, bufs: map[kernels.Backend][]kernels.Buffer{}}
	l := &loader{ctx: ctx, f: f, be: be, owner: string(mp.Role), progress: progress}
	defer func() {
		if err != nil {
			for _, b := range l.bufs {
				_ = be.Free(b)
			}
			_ = far.close()
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
	if err := m.allocPlanned(l, mp, backends, far); err != nil {
		return nil, err
	}
	if r, ok := be.(reserver); ok {
		for _, b := range p.Devices {
			if b.Device.Index == dev {
				if err := r.Reserve(b.Workspace); err != nil {
					return nil, fmt.Errorf("model: workspace on device %d: %w", dev, err)
				}
			}
		}
	}
	m.bufs = l.bufs
	m.tokens, m.positions = make([]int32, m.batch), make([]int32, m.batch)
	m.logits = make([]float32, tp.Vocab)
	if d2t != nil {
		m.draftLogits = make([]float32, e.Vocab)
	}
	far.emb, far.sel = make([]float32, m.batch*e.Embd), make([]float32, e.Embd)
	m.far = far
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
	if !mp.BorrowInPlace {
		copies := &loader{ctx: l.ctx, f: tf, be: l.be, owner: l.owner, progress: l.progress}
		var want []tensorSpec
		for _, s := range specs {
			if (s.dst == &m.w.tokEmbd && !m.w.ownEmbd) || (s.dst == &m.w.output && !m.w.ownHead) {
				s.optional = false
				want = append(want, s)
			}
		}
		err := copies.placeAll(want)
		l.bufs = append(l.bufs, copies.bufs...)
		return err
	}
	t := far.target
	if !m.w.ownEmbd {
		for _, h := range mp.EmbeddingRun {
			if pt := t.byDev[h.Device]; pt == nil || pt.embdRows != h.Rows {
				return fmt.Errorf("model: the draft's lookups on device %d rows %v, where the target has none: %w", h.Device, h.Rows, ErrBadParam)
			}
		}
		far.embed = true
	}
	if !m.w.ownHead {
		for _, h := range mp.HeadRun {
			pt := t.byDev[h.Device]
			if pt == nil || pt.headRows != h.Rows || !pt.output.Valid() {
				return fmt.Errorf("model: the draft's head on device %d rows %v, where the target has none: %w", h.Device, h.Rows, ErrBadParam)
			}
			far.heads = append(far.heads, &farShard{be: pt.be, rows: h.Rows, w: pt.output})
		}
	}
	return nil
}

// allocPlanned allocates the draft's buffers of the plan and binds them:
// on its own device the layer's activations (views of fewer buffers than
// the single-device arena, see below), the KV cache and the fused states;
// on the target's head devices the state sent there and the logits.
func (m *Eagle3) allocPlanned(l *loader, mp *plan.ModelPlan, backends map[int]kernels.Backend, far *eagle3Far) error {
	p, s, dev := m.params, &m.s, mp.Placement.Devices[0]
	m.kv = kvCache{k: make([]kernels.Tensor, 1), v: make([]kernels.Tensor, 1)}
	byDev := map[int]*farShard{}
	for i, h := range mp.HeadRun {
		if i < len(far.heads) {
			byDev[h.Device] = far.heads[i]
		}
	}
	for _, b := range mp.Buffers {
		be := backends[b.Device]
		if be == nil {
			return fmt.Errorf("model: draft buffer %s: no backend for device %d", b.Name, b.Device)
		}
		cat := kernels.Scratch
		if b.Kind == plan.BufferKV {
			cat = kernels.KV
		}
		label := kernels.Label{Owner: string(mp.Role), Cat: cat}
		var buf kernels.Buffer
		var err error
		if b.Device == dev {
			buf, err = l.alloc(label, b.Bytes)
		} else {
			buf, err = far.alloc(be, label, b.Bytes)
		}
		if err != nil {
			return fmt.Errorf("model: draft buffer %s on device %d: %w", b.Name, b.Device, err)
		}
		if len(b.Dims) != 2 {
			continue // attention scores: for backends whose attention stores them
		}
		t := kernels.NewTensor(buf, b.Type, int(b.Dims[1]), int(b.Dims[0]), 0)
		if sh := byDev[b.Device]; sh != nil && (b.Device != dev || b.Name == "logits") {
			switch b.Name {
			case "recv":
				sh.in, sh.sent = t.Row(0), true
			case "logits":
				sh.logits = t.Row(0)
				if t.Rows > 1 {
					sh.probs = t.Row(1)
				}
			}
			continue
		}
		if b.Device != dev {
			return fmt.Errorf("model: draft buffer %s on device %d, which runs none of it: %w", b.Name, b.Device, ErrBadParam)
		}
		// Lifetimes in a pass let one buffer serve several of the arena's
		// tensors: the embedding is read before the residual overwrites x,
		// the fused states are read from the features' space (free once
		// fused), the sub-layer outputs use ffn_up's space (free but
		// during the FFN's SwiGLU), and the normalised FFN input and head
		// input use xn's (free once Q, K and V are made).
		switch b.Name {
		case "blk.0.k":
			m.kv.k[0] = t
		case "blk.0.v":
			m.kv.v[0] = t
		case "fused":
			m.fused = t
		case "x":
			s.x, s.fcOut = t, t
			if !s.emb.Valid() {
				s.emb = t
			}
		case "recv": // the looked-up embedding arrives from the target's device
			s.emb = t
		case "xn":
			s.in, s.h, s.sel = t, packed(t, m.batch, p.Embd), packed(t, 1, p.Embd)
		case "q":
			s.q = t
		case "k":
			s.k = t
		case "v":
			s.v = t
		case "attn":
			s.attn = t
		case "ffn_gate":
			s.gate = t
		case "ffn_up":
			s.up, s.tmp = t, packed(t, m.batch, p.Embd)
		case "features":
			s.hidden, s.g = t, packed(t, m.batch, p.Embd)
		case "logits":
			s.logits = t.Row(0)
		}
	}
	var a arena
	a.add(&m.own, quant.F32, 1, p.Embd)
	a.add(&s.tokens, quant.I32, 1, m.batch)
	a.add(&s.pos, quant.I32, 1, m.batch)
	if err := a.alloc(l, kernels.Label{Owner: string(mp.Role), Cat: kernels.Scratch}); err != nil {
		return fmt.Errorf("model: EAGLE-3 inputs: %w", err)
	}
	for _, t := range []kernels.Tensor{m.kv.k[0], m.kv.v[0], m.fused, s.x, s.in, s.q, s.k, s.v, s.attn, s.gate, s.up, s.hidden} {
		if !t.Valid() {
			return fmt.Errorf("model: the plan lacks buffers of the EAGLE-3 draft on device %d: %w", dev, ErrMissing)
		}
	}
	if m.w.output.Valid() && !s.logits.Valid() {
		return fmt.Errorf("model: the plan has no logits for the draft's head on device %d: %w", dev, ErrMissing)
	}
	for _, sh := range far.heads {
		if !sh.logits.Valid() {
			return fmt.Errorf("model: the plan has no logits for the draft on the device of head rows %v: %w", sh.rows, ErrMissing)
		}
		if !sh.sent {
			sh.in = s.sel // the target keeps these rows on the draft's device
		}
		buf, err := far.alloc(sh.be, kernels.Label{Owner: string(mp.Role), Cat: kernels.Scratch}, 4)
		if err != nil {
			return fmt.Errorf("model: EAGLE-3 head output: %w", err)
		}
		sh.id = kernels.NewTensor(buf, quant.I32, 1, 1, 0)
	}
	return nil
}

// EncodeHost is Encode for states on the host, [n, n_fused] row-major as
// Placed.Capture hands them over: they go to the draft's device.
func (m *Eagle3) EncodeHost(ctx context.Context, pos int, hidden []float32) error {
	w := m.params.FusedWidth()
	n := len(hidden) / w
	switch {
	case n <= 0 || len(hidden) != n*w:
		return fmt.Errorf("model: EAGLE-3 encode of %d values, want rows of %d: %w", len(hidden), w, ErrShape)
	case pos < 0 || pos > m.nFused:
		return fmt.Errorf("model: EAGLE-3 encode at %d with states up to %d: %w", pos, m.nFused, ErrPosition)
	}
	return m.encode(ctx, pos, n, func(c, b int) error {
		return m.be.Write(m.s.hidden.RowSlice(0, b), kernels.F32Bytes(hidden[c*w:(c+b)*w]))
	})
}

// ForwardTop is Forward returning only the most likely token: with the
// head split by vocabulary, each shard's argmax, maximum and softmax sum
// are merged, and no logits are gathered.
func (m *Eagle3) ForwardTop(ctx context.Context, tokens []int32, pos int) (Top, error) {
	if err := m.checkForward(tokens, pos); err != nil {
		return Top{}, err
	}
	if err := m.run(ctx, tokens, pos, m.body, m.bodyOps); err != nil {
		return Top{}, err
	}
	return m.top()
}

// StepTop is Step returning only the most likely token, as ForwardTop.
func (m *Eagle3) StepTop(ctx context.Context, token int32, pos int) (Top, error) {
	if pos != m.next || pos > m.kv.n || pos >= m.context {
		return Top{}, fmt.Errorf("model: EAGLE-3 step at %d after a call that ended at %d, %d cached: %w", pos, m.next, m.kv.n, ErrPosition)
	}
	if err := m.run(ctx, []int32{token}, pos, m.step, m.stepOps); err != nil {
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
	case pos < 0 || pos > m.kv.n:
		return fmt.Errorf("model: EAGLE-3 forward at %d with %d cached: %w", pos, m.kv.n, ErrPosition)
	case pos+n > m.nFused:
		return fmt.Errorf("model: EAGLE-3 forward of %d positions at %d with target states up to %d: %w", n, pos, m.nFused, ErrPosition)
	}
	return nil
}

// top is the last pass's most likely token: from the shards where the
// head runs elsewhere, from the logits where it runs on the draft's device.
func (m *Eagle3) top() (Top, error) {
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

// lookUp has the target look up tokens in its embedding and writes the
// rows to the draft's s.emb.
func (f *eagle3Far) lookUp(ctx context.Context, m *Eagle3, tokens []int32) error {
	b, e := len(tokens), m.params.Embd
	if err := f.target.lookUp(ctx, tokens, f.emb[:b*e]); err != nil {
		return err
	}
	if err := m.be.Write(m.s.emb.RowSlice(0, b), kernels.F32Bytes(f.emb[:b*e])); err != nil {
		return fmt.Errorf("model: EAGLE-3 embedding: %w", err)
	}
	return nil
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
		if sh.prog == nil {
			ops := []kernels.Op{
				kernels.MatMul{Dst: sh.logits, W: sh.w, X: sh.in},
				kernels.Argmax{Dst: sh.id, X: sh.logits},
			}
			if sh.probs.Valid() {
				ops = append(ops, kernels.Softmax{Dst: sh.probs, X: sh.logits})
			}
			prog, err := sh.be.Compile(ops)
			if err != nil {
				return fmt.Errorf("model: EAGLE-3 head rows %v: %w", sh.rows, err)
			}
			sh.prog = prog
		}
		if err := sh.prog.Run(ctx); err != nil {
			return fmt.Errorf("model: EAGLE-3 head rows %v: %w", sh.rows, err)
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

// alloc allocates on another device and remembers the buffer for close.
func (f *eagle3Far) alloc(be kernels.Backend, label kernels.Label, size int64) (kernels.Buffer, error) {
	buf, err := be.Alloc(label, size)
	if err != nil {
		return nil, err
	}
	f.bufs[be] = append(f.bufs[be], buf)
	return buf, nil
}

// close releases the programs and buffers on the other devices.
func (f *eagle3Far) close() error {
	var errs []error
	for _, sh := range f.heads {
		if sh.prog != nil {
			errs = append(errs, sh.prog.Close())
			sh.prog = nil
		}
	}
	for be, bufs := range f.bufs {
		for _, b := range bufs {
			errs = append(errs, be.Free(b))
		}
		delete(f.bufs, be)
	}
	return errors.Join(errs...)
}
