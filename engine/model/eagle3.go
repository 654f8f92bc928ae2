package model

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/tandem-run/tandem/engine/gguf"
	"github.com/tandem-run/tandem/kernels"
	"github.com/tandem-run/tandem/kernels/quant"
)

// Eagle3Options configure LoadEagle3. The zero value is a usable default.
type Eagle3Options struct {
	// Owner labels every allocation for the memory accounting; "draft" when
	// empty. Borrowed tensors stay counted under the target.
	Owner string
	// Batch is the most positions one pass takes; longer runs go in chunks.
	// 0 means DefaultBatch.
	Batch int
	// KVType is the cache element type: quant.F32 (the zero value) or quant.F16.
	KVType quant.Type
	// Progress, if set, is called after each tensor is placed.
	Progress func(Progress)
}

// Eagle3 is an EAGLE-3 draft: one decoder layer that proposes tokens from
// the target's hidden states. At position p it reads the pair
// (token[p+1], g[p]). Where the target has run p, g[p] is fc of the
// target's captured block inputs there (Encode stores them, Forward reads
// them); past that, drafting one token at a time, g[p] is the draft's own
// pre-norm output at p-1 (Step). Its logits come from output_norm and a
// head, and its token embedding from a table, that are the target's unless
// the file has its own.
//
// The draft's positions are the target's: the KV cache and the fused
// states span the target's context, and both roll back with it.
type Eagle3 struct {
	params      Eagle3Params
	targetVocab int
	context     int
	batch       int
	be          kernels.Backend
	w           eagle3Weights
	d2t         []int32 // draft id -> target id; nil when the head is over target ids
	kv          kvCache
	s           eagle3Scratch
	bufs        []kernels.Buffer
	far         *eagle3Far // a placed draft's borrowed tensors on other devices (eagle3_placed.go)

	// fused are the target's states, fc'ed: [context, n_embd], rows
	// [0, nFused) current. own is the draft's last pre-norm output
	// [1, n_embd], the state position next reads when drafting goes on.
	fused  kernels.Tensor
	nFused int
	own    kernels.Tensor
	next   int

	fuse map[int]kernels.Program // Encode, by rows
	body map[int]kernels.Program // Forward, by rows
	step map[int]kernels.Program // Step (one row)

	// host staging
	tokens, positions []int32
	draftLogits       []float32 // [draft vocab], expanded through d2t
	logits            []float32 // [target vocab]
}

// eagle3Scratch is the activations of one pass, sized for the largest batch.
type eagle3Scratch struct {
	tokens, pos kernels.Tensor // I32 [1, batch]: token[p+1] and p of each row
	hidden      kernels.Tensor // [batch, n_fused] target states being fused
	fcOut       kernels.Tensor // [batch, n_embd] their g
	emb, g      kernels.Tensor // [batch, n_embd] token embedding, state read
	in          kernels.Tensor // [batch, 2*n_embd] RMSNorm(emb) | RMSNorm(g)
	q, attn     kernels.Tensor // [batch, n_head*head_dim]
	k, v        kernels.Tensor // [batch, n_kv_head*head_dim]
	x, h, tmp   kernels.Tensor // [batch, n_embd] residual, normed, sub-layer out
	gate, up    kernels.Tensor // [batch, n_ff]
	sel         kernels.Tensor // [1, n_embd] the last row, normed for the head
	logits      kernels.Tensor // [1, draft vocab]
}

// LoadEagle3 reads an EAGLE-3 draft for target, places its weights on the
// target's backend and borrows the target's token embedding and head where
// the file has none. target must capture the blocks the draft reads
// (Options.CaptureLayers equal to Eagle3Params.TargetLayers, see
// ReadEagle3Params) and hand each capture to Encode. f must stay open while
// the draft lives.
func LoadEagle3(ctx context.Context, f *gguf.File, target *Model, opts Eagle3Options) (_ *Eagle3, err error) {
	tp := target.params
	e, d2t, err := readEagle3For(f, tp, target.opts.CaptureLayers)
	if err != nil {
		return nil, err
	}
	if opts.Owner == "" {
		opts.Owner = "draft"
	}
	if opts.Batch <= 0 {
		opts.Batch = DefaultBatch
	}
	if opts.KVType != quant.F32 && opts.KVType != quant.F16 {
		return nil, fmt.Errorf("model: KV cache type %v: %w (F32 or F16)", opts.KVType, ErrUnsupported)
	}

	be := target.be
	l := &loader{ctx: ctx, f: f, be: be, owner: opts.Owner, progress: opts.Progress}
	defer func() {
		if err != nil {
			for _, b := range l.bufs {
				_ = be.Free(b)
			}
		}
	}()
	m := &Eagle3{params: e, targetVocab: tp.Vocab, context: target.opts.Context, batch: min(opts.Batch, target.opts.Context),
		be: be, d2t: d2t, next: -1,
		fuse: map[int]kernels.Program{}, body: map[int]kernels.Program{}, step: map[int]kernels.Program{}}
	if err := l.placeAll(e.specs(&m.w, tp.Vocab)); err != nil {
		return nil, err
	}
	if err := m.borrow(target); err != nil {
		return nil, err
	}
	kvOpts := Options{Owner: opts.Owner, Context: m.context, KVType: opts.KVType}
	if m.kv, err = newKVCache(l, e.Params, kvOpts); err != nil {
		return nil, err
	}
	if err := m.allocState(l, opts.Owner); err != nil {
		return nil, err
	}
	m.bufs = l.bufs
	m.tokens = make([]int32, m.batch)
	m.positions = make([]int32, m.batch)
	m.logits = make([]float32, tp.Vocab)
	if d2t != nil {
		m.draftLogits = make([]float32, e.Vocab)
	}
	return m, nil
}

// borrow takes the target's token embedding and head where the draft has
// none of its own. They are used in place, on the target's device.
func (m *Eagle3) borrow(target *Model) error {
	w, embd := &m.w, m.params.Embd
	w.ownEmbd, w.ownHead = w.tokEmbd.Valid(), w.output.Valid()
	if !w.ownEmbd {
		w.tokEmbd = target.w.tokEmbd
	}
	if !w.ownHead {
		if m.d2t != nil {
			return fmt.Errorf("model: the draft maps its vocabulary to the target's (%s) but has no head of its own: %w", nameD2T, ErrMissing)
		}
		w.output = target.w.output
	}
	if (!w.ownEmbd || !w.ownHead) && target.params.Embd != embd {
		return fmt.Errorf("model: the EAGLE-3 draft of width %d borrows the target's embedding or head of width %d: %w", embd, target.params.Embd, ErrShape)
	}
	return nil
}

// allocState allocates the fused states (counted with the KV cache: both
// hold one row per position), the draft's own state and the scratch.
func (m *Eagle3) allocState(l *loader, owner string) error {
	p, b := m.params, m.batch
	var state arena
	state.add(&m.fused, quant.F32, m.context, p.Embd)
	if err := state.alloc(l, kernels.Label{Owner: owner, Cat: kernels.KV}); err != nil {
		return fmt.Errorf("model: EAGLE-3 state: %w", err)
	}
	s := &m.s
	var a arena
	a.add(&m.own, quant.F32, 1, p.Embd)
	a.add(&s.tokens, quant.I32, 1, b)
	a.add(&s.pos, quant.I32, 1, b)
	a.add(&s.hidden, quant.F32, b, p.FusedWidth())
	a.add(&s.fcOut, quant.F32, b, p.Embd)
	a.add(&s.emb, quant.F32, b, p.Embd)
	a.add(&s.g, quant.F32, b, p.Embd)
	a.add(&s.in, quant.F32, b, 2*p.Embd)
	a.add(&s.q, quant.F32, b, p.Heads*p.HeadDim)
	a.add(&s.attn, quant.F32, b, p.Heads*p.HeadDim)
	a.add(&s.k, quant.F32, b, p.KVHeads*p.HeadDim)
	a.add(&s.v, quant.F32, b, p.KVHeads*p.HeadDim)
	a.add(&s.x, quant.F32, b, p.Embd)
	a.add(&s.h, quant.F32, b, p.Embd)
	a.add(&s.tmp, quant.F32, b, p.Embd)
	a.add(&s.gate, quant.F32, b, p.FF)
	a.add(&s.up, quant.F32, b, p.FF)
	a.add(&s.sel, quant.F32, 1, p.Embd)
	a.add(&s.logits, quant.F32, 1, p.Vocab)
	if err := a.alloc(l, kernels.Label{Owner: owner, Cat: kernels.Scratch}); err != nil {
		return fmt.Errorf("model: EAGLE-3 scratch: %w", err)
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
func (m *Eagle3) Len() int { return m.kv.n }

// Truncate drops cached positions n and later. n may not exceed Len().
func (m *Eagle3) Truncate(n int) error {
	if n < 0 || n > m.kv.n {
		return fmt.Errorf("model: truncate to %d with %d cached: %w", n, m.kv.n, ErrPosition)
	}
	m.kv.n = n
	return nil
}

// readEagle3For reads the draft's header and d2t map and checks them
// against a target of params tp that captures blocks captured.
func readEagle3For(f *gguf.File, tp Params, captured []int) (Eagle3Params, []int32, error) {
	e, err := ReadEagle3Params(f)
	if err != nil {
		return e, nil, err
	}
	if err := e.checkTarget(tp); err != nil {
		return e, nil, err
	}
	if !slices.Equal(captured, e.TargetLayers) {
		return e, nil, fmt.Errorf("model: the target captures blocks %v, the EAGLE-3 draft reads %v: %w", captured, e.TargetLayers, ErrBadParam)
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

// Encode fuses the target's captured states of positions pos, pos+1, ...
// (hidden [n, n_fused], as Options.OnCapture hands them over, on the
// target's backend) into the states those positions read. Fused states
// from pos on are replaced, and draft positions that read them are dropped
// from the cache; pos may not be past the states held.
func (m *Eagle3) Encode(ctx context.Context, pos int, hidden kernels.Tensor) error {
	n := hidden.Rows
	switch {
	case hidden.Cols != m.params.FusedWidth() || n <= 0:
		return fmt.Errorf("model: EAGLE-3 encode of %v, want [n,%d]: %w", hidden, m.params.FusedWidth(), ErrShape)
	case pos < 0 || pos > m.nFused:
		return fmt.Errorf("model: EAGLE-3 encode at %d with states up to %d: %w", pos, m.nFused, ErrPosition)
	}
	// The capture belongs to the target's pass: copy it before the
	// target's next pass reuses the buffer.
	return m.encode(ctx, pos, n, func(c, b int) error {
		return m.be.Copy(m.s.hidden.RowSlice(0, b), hidden.RowSlice(c, b))
	})
}

// encode fuses n positions from pos, load putting rows c..c+b of them in
// s.hidden before each chunk.
func (m *Eagle3) encode(ctx context.Context, pos, n int, load func(c, b int) error) error {
	if pos+n > m.context {
		return fmt.Errorf("model: EAGLE-3 encode of %d positions at %d in a %d-token context: %w", n, pos, m.context, ErrContext)
	}
	m.kv.n = min(m.kv.n, pos)
	m.nFused = pos
	for c := 0; c < n; c += m.batch {
		b := min(m.batch, n-c)
		if err := m.writeInputs(nil, pos+c, b); err != nil {
			return err
		}
		if err := load(c, b); err != nil {
			return fmt.Errorf("model: EAGLE-3 encode: %w", err)
		}
		prog, err := cachedProgram(m.be, m.fuse, b, m.fuseOps)
		if err != nil {
			return err
		}
		if err := prog.Run(ctx); err != nil {
			return fmt.Errorf("model: EAGLE-3 encode: %w", err)
		}
		m.nFused = pos + c + b
	}
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
	if err := m.run(ctx, tokens, pos, m.body, m.bodyOps); err != nil {
		return nil, err
	}
	return m.readLogits()
}

// Step drafts on past the target's states: position pos takes token (the
// one at pos+1, just drafted) and the pre-norm output the previous call
// left at pos-1. It returns the logits as Forward does and keeps its own
// output for the next Step.
func (m *Eagle3) Step(ctx context.Context, token int32, pos int) ([]float32, error) {
	if pos != m.next || pos > m.kv.n || pos >= m.context {
		return nil, fmt.Errorf("model: EAGLE-3 step at %d after a call that ended at %d, %d cached: %w", pos, m.next, m.kv.n, ErrPosition)
	}
	if err := m.run(ctx, []int32{token}, pos, m.step, m.stepOps); err != nil {
		return nil, err
	}
	return m.readLogits()
}

// run runs the tokens at pos through the programs ops compiles, in chunks,
// keeps the last row's pre-norm output and computes its logits, which stay
// where the head runs until read.
func (m *Eagle3) run(ctx context.Context, tokens []int32, pos int, cache map[int]kernels.Program, ops func(int) []kernels.Op) error {
	n := len(tokens)
	if pos+n > m.context {
		return fmt.Errorf("model: %d tokens at %d in a %d-token context: %w", n, pos, m.context, ErrContext)
	}
	for i, t := range tokens {
		if t < 0 || int(t) >= m.targetVocab {
			return fmt.Errorf("model: token %d at %d: %w (vocabulary %d)", t, i, ErrToken, m.targetVocab)
		}
	}
	m.kv.n, m.next = pos, -1
	b := 0
	for c := 0; c < n; c += b {
		b = min(m.batch, n-c)
		if err := m.writeInputs(tokens[c:c+b], pos+c, b); err != nil {
			return err
		}
		if m.far != nil && m.far.embed {
			if err := m.far.lookUp(ctx, m, tokens[c:c+b]); err != nil {
				return err
			}
		}
		prog, err := cachedProgram(m.be, cache, b, ops)
		if err != nil {
			return err
		}
		if err := prog.Run(ctx); err != nil {
			return fmt.Errorf("model: EAGLE-3 forward: %w", err)
		}
		m.kv.n = pos + c + b
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
	ops = append(ops, m.layerOps(b, g)...)
	return append(ops, m.headOps(b)...)
}

// stepOps is the draft for one row on its own previous output.
func (m *Eagle3) stepOps(int) []kernels.Op {
	ops := append(m.embedOps(1), m.layerOps(1, m.own)...)
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

// layerOps is the decoder layer on states g [b, n_embd]: attention over
// the normalised embedding and state side by side, the state as residual,
// then a pre-norm SwiGLU FFN. It leaves the pre-norm output in s.x.
func (m *Eagle3) layerOps(b int, g kernels.Tensor) []kernels.Op {
	p, s, w := m.params, m.s, m.w
	pos := s.pos.ColSlice(0, b)
	emb, in := s.emb.RowSlice(0, b), s.in.RowSlice(0, b)
	embNormed, gNormed := in.ColSlice(0, p.Embd), in.ColSlice(p.Embd, p.Embd)
	x, h, tmp := s.x.RowSlice(0, b), s.h.RowSlice(0, b), s.tmp.RowSlice(0, b)
	q, k, v, attn := s.q.RowSlice(0, b), s.k.RowSlice(0, b), s.v.RowSlice(0, b), s.attn.RowSlice(0, b)
	gate, up := s.gate.RowSlice(0, b), s.up.RowSlice(0, b)
	rope := func(t kernels.Tensor) kernels.Rope {
		return kernels.Rope{Dst: t, X: t, Pos: pos, HeadDim: p.HeadDim, Dims: p.RopeDims,
			Base: p.RopeBase, Scale: p.RopeScale, Factors: w.rope}
	}
	residual := g
	if p.NormBeforeResidual {
		residual = gNormed
	}
	return []kernels.Op{
		kernels.RMSNorm{Dst: embNormed, X: emb, W: w.embdNorm, Eps: p.NormEps},
		kernels.RMSNorm{Dst: gNormed, X: g, W: w.gNorm, Eps: p.NormEps},

		// attention
		kernels.MatMul{Dst: q, W: w.wq, X: in},
		kernels.MatMul{Dst: k, W: w.wk, X: in},
		kernels.MatMul{Dst: v, W: w.wv, X: in},
		rope(q), rope(k),
		kernels.SetRows{Dst: m.kv.k[0], Src: k, Idx: pos},
		kernels.SetRows{Dst: m.kv.v[0], Src: v, Idx: pos},
		kernels.Attention{Dst: attn, Q: q, K: m.kv.k[0], V: m.kv.v[0], Pos: pos,
			NHead: p.Heads, NKVHead: p.KVHeads, HeadDim: p.HeadDim,
			Scale: float32(1 / math.Sqrt(float64(p.HeadDim)))},
		kernels.MatMul{Dst: tmp, W: w.wo, X: attn},
		kernels.Add{Dst: x, A: tmp, B: residual},

		// feed-forward
		kernels.RMSNorm{Dst: h, X: x, W: w.ffnNorm, Eps: p.NormEps},
		kernels.MatMul{Dst: gate, W: w.gate, X: h},
		kernels.MatMul{Dst: up, W: w.up, X: h},
		kernels.SwiGLU{Dst: gate, Gate: gate, Up: up},
		kernels.MatMul{Dst: tmp, W: w.down, X: gate},
		kernels.Add{Dst: x, A: x, B: tmp},
	}
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

// Close releases the programs and the draft's own device memory; borrowed
// tensors stay with the target.
func (m *Eagle3) Close() error {
	var errs []error
	for _, progs := range []map[int]kernels.Program{m.fuse, m.body, m.step} {
		for k, p := range progs {
			errs = append(errs, p.Close())
			delete(progs, k)
		}
	}
	for _, b := range m.bufs {
		errs = append(errs, m.be.Free(b))
	}
	m.bufs = nil
	if m.far != nil {
		errs = append(errs, m.far.close())
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("model: close: %w", err)
	}
	return nil
}

// cachedProgram returns the program for n rows from cache, compiling ops(n)
// when missing; like Model.program, it keeps at most maxPrograms.
func cachedProgram(be kernels.Backend, cache map[int]kernels.Program, n int, ops func(int) []kernels.Op) (kernels.Program, error) {
	if p, ok := cache[n]; ok {
		return p, nil
	}
	p, err := be.Compile(ops(n))
	if err != nil {
		return nil, fmt.Errorf("model: compile for %d rows: %w", n, err)
	}
	if len(cache) >= maxPrograms {
		for k, old := range cache {
			if k != 1 {
				_ = old.Close()
				delete(cache, k)
				break
			}
		}
	}
	cache[n] = p
	return p, nil
}
