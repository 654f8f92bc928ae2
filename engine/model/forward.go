package model

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"

	"github.com/tandem-run/tandem/engine/plan"
	"github.com/tandem-run/tandem/kernels"
)

// headKind is what a head pass leaves where it runs, besides the logits.
type headKind uint8

const (
	headLogits headKind = iota // nothing: Forward gathers the logits
	headArgmax                 // each row's argmax (and its logit, where the head is split)
	headTop                    // each row's best ids and logits
	headPick                   // one row's argmax into a greedy chain's first slot (chain.go)
	headPickP                  // headPick, and the argmax's softmax probability beside it
	headProbs                  // each row's softmax at a temperature, in place of its logits (one head device)
)

// Candidate is one of a row's best tokens and its logit.
type Candidate struct {
	ID    int32
	Logit float32
}

// Forward runs tokens at positions pos, pos+1, ... and returns the logits
// of the rows listed in out (indices into tokens, ascending) as
// len(out)*Vocab floats, row after row; a nil out means the last row only.
// Positions from pos on are overwritten, so pos may be below Len()
// (speculative rollback) but not above it. Inputs longer than the batch
// run in chunks. A vocabulary-split head's shards are gathered into whole
// rows. The returned slice is reused by the next call.
func (m *Model) Forward(ctx context.Context, tokens []int32, pos int, out []int) ([]float32, error) {
	out = m.outputs(tokens, out)
	vocab := m.params.Vocab
	if need := len(out) * vocab; cap(m.logits) < need {
		m.logits = make([]float32, need)
	}
	logits := m.logits[:len(out)*vocab]
	err := m.forward(ctx, tokens, pos, out, func(done, k int) error {
		if err := m.runHead(ctx, k, headLogits, 0, 0); err != nil {
			return err
		}
		return m.gather(k, logits[done*vocab:(done+k)*vocab])
	})
	if err != nil {
		return nil, err
	}
	return logits, nil
}

// ForwardArgmax is Forward for greedy decoding: it returns the index of the
// largest logit of each row in out (the lowest on ties), found where the
// head runs, so that only token ids cross to the host, not the logits;
// with the head split by vocabulary, each shard's best and its logit, and
// the host keeps the largest. The returned slice is reused by the next
// call.
func (m *Model) ForwardArgmax(ctx context.Context, tokens []int32, pos int, out []int) ([]int32, error) {
	out = m.outputs(tokens, out)
	if cap(m.ids) < len(out) {
		m.ids = make([]int32, len(out))
	}
	ids := m.ids[:len(out)]
	err := m.forward(ctx, tokens, pos, out, func(done, k int) error {
		if err := m.runHead(ctx, k, headArgmax, 0, 0); err != nil {
			return err
		}
		return m.readArgmax(k, ids[done:done+k])
	})
	if err != nil {
		return nil, err
	}
	return ids, nil
}

// ForwardProbs is Forward for sampling from every token at temperature
// temp: each row of out comes back as softmax(logits / temp), computed
// where the head runs, written into dst (grown as needed; the returned
// slice). On a GPU that spares the host a pass of exponentials over the
// vocabulary for every row a sampled round drafts or verifies. The head
// must be on one device (ProbsDevice). The softmax is the backend's, in
// float32 (on a GPU with its fast exponential): a row's probabilities
// agree with the host sampler's within a relative 1e-4 and sum to 1
// within 1e-5. A row with a NaN or infinite logit, or whose logits
// overflow float32 when divided by temp, comes back as NaN.
func (m *Model) ForwardProbs(ctx context.Context, tokens []int32, pos int, out []int, temp float64, dst []float32) ([]float32, error) {
	if _, ok := m.ProbsDevice(); !ok {
		return nil, fmt.Errorf("model: probabilities on a head split over %d devices: %w", len(m.head), ErrBadParam)
	}
	inv, err := invTemp(temp)
	if err != nil {
		return nil, err
	}
	out = m.outputs(tokens, out)
	vocab := m.params.Vocab
	if need := len(out) * vocab; cap(dst) < need {
		dst = make([]float32, need)
	}
	dst = dst[:len(out)*vocab]
	err = m.forward(ctx, tokens, pos, out, func(done, k int) error {
		if err := m.runHead(ctx, k, headProbs, 0, inv); err != nil {
			return err
		}
		return m.gather(k, dst[done*vocab:(done+k)*vocab])
	})
	if err != nil {
		return nil, err
	}
	return dst, nil
}

// invTemp is the inverse of a temperature a softmax is taken at, or
// ErrBadParam where temp is not positive or its inverse overflows.
func invTemp(temp float64) (float32, error) {
	inv := float32(1 / temp)
	if !(temp > 0) || math.IsInf(float64(inv), 0) {
		return 0, fmt.Errorf("model: probabilities at temperature %v: %w", temp, ErrBadParam)
	}
	return inv, nil
}

// softmaxAt turns logits into their softmax at inverse temperature inv,
// in place.
func softmaxAt(logits kernels.Tensor, inv float32) []kernels.Op {
	return []kernels.Op{kernels.Scale{Dst: logits, X: logits, C: inv}, kernels.Softmax{Dst: logits, X: logits}}
}

// ProbsDevice is the device ForwardProbs computes on, and whether it can:
// the head on one device holding every vocabulary row (a softmax needs
// the whole row).
func (m *Model) ProbsDevice() (int, bool) {
	if len(m.head) != 1 || m.head[0].Rows.Len() != int64(m.params.Vocab) {
		return 0, false
	}
	return m.head[0].Device, true
}

// ForwardTopK is Forward returning each row's n best tokens (n at most
// plan.TopK) with their logits, best first and the lower id first on
// ties, as len(out)*n candidates row after row: each device's head shard
// picks its own best and the host merges them, so no logits are
// gathered. The returned slice is reused by the next call.
func (m *Model) ForwardTopK(ctx context.Context, tokens []int32, pos int, out []int, n int) ([]Candidate, error) {
	if n < 1 || n > plan.TopK || n > m.params.Vocab {
		return nil, fmt.Errorf("model: top %d of %d (at most %d): %w", n, m.params.Vocab, plan.TopK, ErrBadParam)
	}
	out = m.outputs(tokens, out)
	if cap(m.top) < len(out)*n {
		m.top = make([]Candidate, len(out)*n)
	}
	top := m.top[:len(out)*n]
	err := m.forward(ctx, tokens, pos, out, func(done, k int) error {
		if err := m.runHead(ctx, k, headTop, n, 0); err != nil {
			return err
		}
		return m.readTop(k, n, top[done*n:(done+k)*n])
	})
	if err != nil {
		return nil, err
	}
	return top, nil
}

// outputs is out, or the last row of tokens when out is nil.
func (m *Model) outputs(tokens []int32, out []int) []int {
	if out != nil {
		return out
	}
	m.last[0] = len(tokens) - 1
	return m.last[:]
}

// forward runs the body over tokens in chunks of the batch and, after each
// chunk, calls head(done, k) for the k rows of out that the chunk holds (at
// most the batch, so one head pass), with their indices in the chunk staged
// in outIdx (done counts the rows of out handled before), then hands the
// chunk's captured states over.
//
// The hand-over comes after the head because the head's read is what the
// caller waits for: an EAGLE-3 draft's fuse (its fc over the captured
// states, a program of its own) queued before the head would delay that
// read by the fuse's time, where queued after it, it runs while the host
// checks the drafts and prepares the next round, and the draft's next call
// queues behind it on the stream. The head reads neither the capture
// buffer nor anything the receiver writes.
func (m *Model) forward(ctx context.Context, tokens []int32, pos int, out []int, head func(done, k int) error) error {
	n := len(tokens)
	if err := checkForward(tokens, pos, out, m.n, m.ctx, m.params.Vocab); err != nil {
		return err
	}
	m.n = pos
	done := 0
	for c := 0; c < n; c += m.batch {
		b := min(m.batch, n-c)
		if err := m.body(ctx, tokens[c:c+b], pos+c); err != nil {
			return err
		}
		m.n = pos + c + b
		k := 0
		for done+k < len(out) && out[done+k] < c+b {
			m.outIdx[k] = int32(out[done+k] - c)
			k++
		}
		if k > 0 {
			if err := head(done, k); err != nil {
				return err
			}
			done += k
		}
		if err := m.handOver(pos+c, b); err != nil {
			return err
		}
	}
	return nil
}

// checkForward checks a Forward call's arguments against a model with
// cached positions in its cache, a context of ctx and a vocabulary of vocab:
// tokens to run at pos, and out, the ascending rows whose logits are wanted.
func checkForward(tokens []int32, pos int, out []int, cached, ctx, vocab int) error {
	n := len(tokens)
	switch {
	case n == 0:
		return fmt.Errorf("model: forward: no tokens: %w", ErrBadParam)
	case pos < 0 || pos > cached:
		return fmt.Errorf("model: forward at %d with %d cached: %w", pos, cached, ErrPosition)
	case pos+n > ctx:
		return fmt.Errorf("model: %d tokens at %d in a %d-token context: %w", n, pos, ctx, ErrContext)
	}
	for i, t := range tokens {
		if t < 0 || int(t) >= vocab {
			return fmt.Errorf("model: token %d at %d: %w (vocabulary %d)", t, i, ErrToken, vocab)
		}
	}
	for i, r := range out {
		if r < 0 || r >= n || i > 0 && r <= out[i-1] {
			return fmt.Errorf("model: output rows %v of %d tokens: %w", out, n, ErrBadParam)
		}
	}
	return nil
}

// body embeds b tokens and runs every block on its devices.
func (m *Model) body(ctx context.Context, tokens []int32, pos int) error {
	b := len(tokens)
	copy(m.tokens, tokens)
	for i := range b {
		m.positions[i] = int32(pos + i)
	}
	return m.pass(ctx, b)
}

// pass runs the b tokens and positions staged in m.tokens and m.positions
// through the embedding and every block.
func (m *Model) pass(ctx context.Context, b int) error {
	for _, pt := range m.parts {
		if err := pt.be.Write(pt.s.pos.ColSlice(0, b), kernels.I32Bytes(m.positions[:b])); err != nil {
			return fmt.Errorf("model: %w", err)
		}
	}
	if len(m.segs) > 0 {
		// A pass over several sequences writes each row's keys and values
		// at its slot's row of the caches (attnArgs.cacheRows), staged in
		// the rows-wanted input, which the head reads only after the pass.
		rows := m.cacheRows[:b]
		for _, sg := range m.segs {
			for r := sg.row; r < sg.row+sg.n; r++ {
				rows[r] = int32(sg.slot*m.ctx) + m.positions[r]
			}
		}
		for _, pt := range m.parts {
			if err := pt.be.Write(pt.s.outIdx.ColSlice(0, b), kernels.I32Bytes(rows)); err != nil {
				return fmt.Errorf("model: %w", err)
			}
		}
	}
	if pt := m.inlineEmbedding(); pt != nil {
		if err := m.writeIDs(pt, m.embd[0], b); err != nil {
			return err
		}
		return m.layerBody(ctx, b, pt)
	}
	local, err := m.embed(ctx, b)
	if err != nil {
		return err
	}
	if m.layered {
		return m.layerBody(ctx, b, local)
	}
	return m.tensorBody(ctx, b, local)
}

// inlineEmbedding is the part whose first stage program starts with the
// token lookup, as one device's whole pass is one program (one CUDA graph):
// under a layer split, where the one embedding device runs the first
// blocks, unless block inputs are read back between programs.
func (m *Model) inlineEmbedding() *part {
	if !m.layered || len(m.embd) != 1 || m.capturing() && !m.cap.direct {
		return nil
	}
	pt := m.byDev[m.embd[0].Device]
	if !pt.local[0].present() {
		return nil
	}
	return pt
}

// writeIDs stages the b token ids for h's rows of the embedding on its
// device: ids outside its rows are clamped to its first row.
func (m *Model) writeIDs(pt *part, h plan.Holder, b int) error {
	ids := m.outIdx[:b] // free until the head runs
	for i, t := range m.tokens[:b] {
		ids[i] = 0
		if int64(t) >= h.Rows.Lo && int64(t) < h.Rows.Hi {
			ids[i] = t - int32(h.Rows.Lo)
		}
	}
	if err := pt.be.Write(pt.s.tokens.ColSlice(0, b), kernels.I32Bytes(ids)); err != nil {
		return fmt.Errorf("model: %w", err)
	}
	return nil
}

// embed looks the tokens up where the embedding is. With one embedding
// device it returns that part, whose x holds the result; with the
// vocabulary split, every shard looks up all tokens and the host keeps
// each token's own row, leaving the stream in hostX and returning nil.
func (m *Model) embed(ctx context.Context, b int) (*part, error) {
	for _, h := range m.embd {
		pt := m.byDev[h.Device]
		if err := m.writeIDs(pt, h, b); err != nil {
			return nil, err
		}
		dst := pt.embedDst(b)
		err := pt.progs.run(ctx, progKey{kind: progEmbed, n: b}, func() []kernels.Op {
			return append([]kernels.Op{kernels.GetRows{Dst: dst, Src: pt.w.tokEmbd, Idx: pt.s.tokens.ColSlice(0, b)}},
				m.embedScale(dst)...)
		})
		if err != nil {
			return nil, err
		}
		if len(m.embd) == 1 {
			return pt, nil
		}
		if err := pt.be.Read(kernels.F32Bytes(m.partial[:b*m.params.Embd]), dst); err != nil {
			return nil, fmt.Errorf("model: embedding: %w", err)
		}
		e := m.params.Embd
		for i, t := range m.tokens[:b] {
			if int64(t) >= h.Rows.Lo && int64(t) < h.Rows.Hi {
				copy(m.hostX[i*e:(i+1)*e], m.partial[i*e:(i+1)*e])
			}
		}
	}
	return nil, nil
}

// embedScale is what follows a token lookup into x: Gemma's scaling by
// sqrt(n_embd), rounded to float32 as transformers does.
func (m *Model) embedScale(x kernels.Tensor) []kernels.Op {
	if !m.params.arch.embedScale {
		return nil
	}
	return []kernels.Op{kernels.Scale{Dst: x, X: x, C: float32(math.Sqrt(float64(m.params.Embd)))}}
}

// embedDst is where a part's token lookup lands: its stream, or its normed
// input buffer on a part without blocks.
func (pt *part) embedDst(b int) kernels.Tensor {
	if pt.s.x.Valid() {
		return pt.s.x.RowSlice(0, b)
	}
	return pt.s.xn.RowSlice(0, b)
}

// layerBody runs each device's blocks in pipeline order, the stream
// crossing to the next device after each. With the lookup inline, local's
// first program starts with it.
func (m *Model) layerBody(ctx context.Context, b int, local *part) error {
	inline := m.inlineEmbedding()
	var prev *part
	for _, pt := range m.parts {
		if !pt.hasBlocks() {
			continue
		}
		from := prev
		if from == nil {
			from = local
		}
		received := from != pt
		if received {
			var err error
			switch {
			case from == nil: // a vocabulary-split embedding left the stream in hostX
				err = m.send(pt, b)
			case from == prev:
				err = m.spread(from, from.s.x.RowSlice(0, b), []*part{pt})
			default:
				err = m.spread(from, from.embedDst(b), []*part{pt})
			}
			if err != nil {
				return err
			}
		}
		// A block whose input is read back to the host starts a program
		// of its own, its input read first: from the receive buffer when
		// it has just arrived.
		for i, seg := range m.segments(pt) {
			first := i == 0 && received
			in := pt.s.x.RowSlice(0, b)
			if first {
				in = pt.s.recv.RowSlice(0, b)
			}
			if err := m.keepFrom(pt, seg[0], in); err != nil {
				return err
			}
			last := seg[1] == m.params.Layers
			if m.experts != nil {
				if err := m.expertSegment(ctx, pt, seg, b, first, pt == inline); err != nil {
					return err
				}
				continue
			}
			err := pt.progs.run(ctx, progKey{kind: progStage, block: seg[0], n: b, seqs: m.layout}, func() []kernels.Op {
				x := pt.s.x.RowSlice(0, b)
				var ops []kernels.Op
				switch {
				case first:
					ops = append(ops, kernels.Copy{Dst: x, Src: pt.s.recv.RowSlice(0, b)})
				case pt == inline && seg[0] == 0:
					ops = append(ops, kernels.GetRows{Dst: x, Src: pt.w.tokEmbd, Idx: pt.s.tokens.ColSlice(0, b)})
					ops = append(ops, m.embedScale(x)...)
				}
				for l := seg[0]; l < seg[1]; l++ {
					out := pt.s.xn.RowSlice(0, b)
					ops = append(ops, m.captureOps(pt, l, x)...)
					ops = append(ops, m.attnOps(pt, l, b)...)
					ops = append(ops, kernels.Add{Dst: x, A: x, B: out})
					ops = append(ops, m.ffnOps(pt, l, b)...)
					ops = append(ops, kernels.Add{Dst: x, A: x, B: out})
				}
				if last {
					ops = append(ops, m.captureOps(pt, m.params.Layers, x)...)
				}
				return ops
			})
			if err != nil {
				return err
			}
		}
		prev = pt
	}
	if err := m.keepFrom(prev, m.params.Layers, prev.s.x.RowSlice(0, b)); err != nil {
		return err
	}
	// The stream goes on to head devices other than the last block's.
	var to []*part
	for _, pt := range m.parts {
		if pt != prev && pt.headRows.Len() > 0 {
			to = append(to, pt)
		}
	}
	return m.spread(prev, prev.s.x.RowSlice(0, b), to)
}

// tensorBody runs every block on all devices at once: each computes its
// heads' and FFN rows' share of the block's output, and the shares are
// summed in device order, so every run adds alike (exchange.go), and the
// sum reaches every device, which adds it to its copy of the stream. With
// a reduce group the devices sum on their own, inside their programs
// (reducedBody); otherwise each exchange is copies and a program between
// the host's calls (sumShares).
func (m *Model) tensorBody(ctx context.Context, b int, local *part) error {
	if local == nil {
		if err := m.sendAll(b, func(*part) bool { return true }); err != nil {
			return err
		}
	} else {
		var to []*part
		for _, pt := range m.parts {
			if pt != local {
				to = append(to, pt)
			}
		}
		if err := m.spread(local, local.embedDst(b), to); err != nil {
			return err
		}
	}
	if m.group != nil && (!m.capturing() || m.cap.direct) {
		return m.reducedBody(ctx, b, local)
	}
	for l := range m.params.Layers {
		for _, kind := range []progKind{progAttn, progFFN} {
			for _, pt := range m.parts {
				err := pt.progs.run(ctx, progKey{kind: kind, block: l, n: b, seqs: m.layout}, func() []kernels.Op {
					x, recv := pt.s.x.RowSlice(0, b), pt.s.recv.RowSlice(0, b)
					var ops []kernels.Op
					switch {
					case kind == progAttn && l == 0 && pt != local:
						ops = append(ops, kernels.Copy{Dst: x, Src: recv})
					case kind == progFFN || l > 0:
						ops = append(ops, kernels.Add{Dst: x, A: x, B: recv})
					}
					if kind == progAttn && pt == m.parts[0] {
						ops = append(ops, m.captureOps(pt, l, x)...)
					}
					if kind == progAttn && pt.local[l].heads > 0 {
						return append(ops, m.attnOps(pt, l, b)...)
					}
					if kind == progFFN && pt.local[l].ffn > 0 {
						return append(ops, m.ffnOps(pt, l, b)...)
					}
					return ops
				})
				if err != nil {
					return err
				}
			}
			if kind == progAttn {
				// Every device's stream is block l's input now.
				if err := m.keepFrom(m.parts[0], l, m.parts[0].s.x.RowSlice(0, b)); err != nil {
					return err
				}
			}
			if err := m.sumShares(ctx, b, l, kind); err != nil {
				return err
			}
		}
	}
	final := m.byDev[m.head[0].Device]
	for _, h := range m.head {
		pt := m.byDev[h.Device]
		err := pt.progs.run(ctx, progKey{kind: progFinish, n: b}, func() []kernels.Op {
			x := pt.s.x.RowSlice(0, b)
			ops := []kernels.Op{kernels.Add{Dst: x, A: x, B: pt.s.recv.RowSlice(0, b)}}
			if pt == final {
				ops = append(ops, m.captureOps(pt, m.params.Layers, x)...)
			}
			return ops
		})
		if err != nil {
			return err
		}
	}
	return m.keepFrom(final, m.params.Layers, final.s.x.RowSlice(0, b))
}

// runHead runs the head for the first k entries of m.outIdx on each head
// device, its vocabulary rows, and what kind adds: the argmax, or the top
// n, of each row of the device's logits, or (headProbs) their softmax
// after scaling by inv, the temperature's inverse (0 for other kinds).
func (m *Model) runHead(ctx context.Context, k int, kind headKind, n int, inv float32) error {
	split := len(m.head) > 1
	for _, h := range m.head {
		pt := m.byDev[h.Device]
		src := pt.s.x
		if m.layered && !m.lastStage(pt) {
			src = pt.s.recv
		}
		if err := pt.be.Write(pt.s.outIdx.ColSlice(0, k), kernels.I32Bytes(m.outIdx[:k])); err != nil {
			return fmt.Errorf("model: %w", err)
		}
		w := int(h.Rows.Len())
		key := progKey{kind: progHead, block: int(kind), n: k, top: n, inv: inv}
		if kind == headProbs {
			// One temperature's programs are kept: requests at ever new
			// temperatures would otherwise pile them up.
			pt.progs.drop(func(o progKey) bool {
				return o.kind == progHead && o.block == int(headProbs) && o.inv != inv
			})
		}
		err := pt.progs.run(ctx, key, func() []kernels.Op {
			sel, logits := pt.s.xn.RowSlice(0, k), pt.s.logits.RowSlice(0, k)
			ops := []kernels.Op{
				kernels.GetRows{Dst: sel, Src: src, Idx: pt.s.outIdx.ColSlice(0, k)},
				kernels.RMSNorm{Dst: sel, X: sel, W: pt.w.outNorm, Eps: m.params.NormEps},
				kernels.MatMul{Dst: logits, W: pt.w.output, X: sel},
			}
			switch {
			case kind == headArgmax && !split:
				ops = append(ops, kernels.Argmax{Dst: packed(pt.s.topIDs, 1, k), X: logits})
			case kind == headArgmax:
				ops = append(ops, kernels.TopK{Ids: packed(pt.s.topIDs, k, 1), Vals: packed(pt.s.topLogits, k, 1), X: logits})
			case kind == headTop:
				c := min(n, w)
				ops = append(ops, kernels.TopK{Ids: packed(pt.s.topIDs, k, c), Vals: packed(pt.s.topLogits, k, c), X: logits})
			case kind == headPick || kind == headPickP:
				ops = append(ops, pickOps(logits, pt.s.topIDs, pt.s.topLogits, 0, kind == headPickP)...)
			case kind == headProbs:
				ops = append(ops, softmaxAt(logits, inv)...)
			}
			return ops
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// gather reads the logits of the last head pass, k rows, into dst: each
// head device's vocabulary rows.
func (m *Model) gather(k int, dst []float32) error {
	vocab := m.params.Vocab
	for _, h := range m.head {
		pt := m.byDev[h.Device]
		w := int(h.Rows.Len())
		if w == vocab {
			if err := pt.be.Read(kernels.F32Bytes(dst[:k*vocab]), pt.s.logits.RowSlice(0, k)); err != nil {
				return fmt.Errorf("model: logits: %w", err)
			}
			continue
		}
		rows := m.rows[:k*w]
		if err := pt.be.Read(kernels.F32Bytes(rows), pt.s.logits.RowSlice(0, k)); err != nil {
			return fmt.Errorf("model: logits: %w", err)
		}
		for r := range k {
			copy(dst[r*vocab+int(h.Rows.Lo):r*vocab+int(h.Rows.Hi)], rows[r*w:(r+1)*w])
		}
	}
	return nil
}

// readArgmax reads the argmax of the last head pass's k rows into ids. A
// split head's shards each give their best id and logit; the largest
// logit wins, the shard of lower ids on ties (shards are in vocabulary
// order), which is the lowest id of the whole row.
func (m *Model) readArgmax(k int, ids []int32) error {
	if len(m.head) == 1 {
		pt := m.byDev[m.head[0].Device]
		if err := pt.be.Read(kernels.I32Bytes(ids[:k]), packed(pt.s.topIDs, 1, k)); err != nil {
			return fmt.Errorf("model: token ids: %w", err)
		}
		return nil
	}
	best := m.shardLogits[k : 2*k] // the best logit of each row so far
	for i, h := range m.head {
		got, vals := m.shardIDs[:k], m.shardLogits[:k]
		if err := m.readShard(h, k, 1, got, vals); err != nil {
			return err
		}
		for r := range k {
			if i == 0 || vals[r] > best[r] {
				ids[r], best[r] = got[r], vals[r]
			}
		}
	}
	return nil
}

// readTop reads the top n of the last head pass's k rows into dst, n a
// row, merging the head's shards.
func (m *Model) readTop(k, n int, dst []Candidate) error {
	var all [][]Candidate // per row, every shard's
	if len(m.head) > 1 {
		all = make([][]Candidate, k)
	}
	for _, h := range m.head {
		c := min(n, int(h.Rows.Len()))
		ids, vals := m.shardIDs[:k*c], m.shardLogits[:k*c]
		if err := m.readShard(h, k, c, ids, vals); err != nil {
			return err
		}
		for r := range k {
			for j := range c {
				cand := Candidate{ID: ids[r*c+j], Logit: vals[r*c+j]}
				if all == nil {
					dst[r*n+j] = cand
				} else {
					all[r] = append(all[r], cand)
				}
			}
		}
	}
	for r, cands := range all {
		// Shards come in vocabulary order and each lists its best first,
		// lower ids first on ties: a stable sort by logit keeps that.
		slices.SortStableFunc(cands, func(a, b Candidate) int { return cmp.Compare(b.Logit, a.Logit) })
		copy(dst[r*n:(r+1)*n], cands)
	}
	return nil
}

// readShard reads a head shard's best c ids (as ids of the whole
// vocabulary) and logits for k rows into ids and vals, [k, c] each.
func (m *Model) readShard(h plan.Holder, k, c int, ids []int32, vals []float32) error {
	pt := m.byDev[h.Device]
	if err := pt.be.Read(kernels.I32Bytes(ids), packed(pt.s.topIDs, k, c)); err != nil {
		return fmt.Errorf("model: head rows %v: %w", h.Rows, err)
	}
	if err := pt.be.Read(kernels.F32Bytes(vals), packed(pt.s.topLogits, k, c)); err != nil {
		return fmt.Errorf("model: head rows %v: %w", h.Rows, err)
	}
	for i, id := range ids {
		if id < 0 || int64(id) >= h.Rows.Len() {
			return fmt.Errorf("model: head rows %v: best id %d: %w", h.Rows, id, ErrShape)
		}
		ids[i] = id + int32(h.Rows.Lo)
	}
	return nil
}

// lastStage reports whether pt runs the last block of a layer split.
func (m *Model) lastStage(pt *part) bool {
	return pt.local[len(pt.local)-1].present()
}

func (pt *part) hasBlocks() bool {
	for _, l := range pt.local {
		if l.present() {
			return true
		}
	}
	return false
}

// attnOps is block l's attention on pt's heads for b tokens: the output
// (pt's share of it, under a tensor split) ends in xn.
func (m *Model) attnOps(pt *part, l, b int) []kernels.Op {
	return m.attnOpsAt(pt, l, b, pt.s.pos.ColSlice(0, b))
}

// attnOpsAt is attnOps with the rows' positions read from pos.
func (m *Model) attnOpsAt(pt *part, l, b int, pos kernels.Tensor) []kernels.Op {
	p, s, w, lb := m.params, pt.s, pt.w.blocks[l], pt.local[l]
	x, h := s.x.RowSlice(0, b), s.xn.RowSlice(0, b)
	base, window := p.blockRope(l)
	a := attnArgs{w: w, factors: pt.w.ropeFreqs, in: h, out: h,
		q: packed(s.q, b, lb.heads*p.HeadDim), attn: packed(s.attn, b, lb.heads*p.HeadDim),
		k: packed(s.k, b, lb.kvHeads*p.HeadDim), v: packed(s.v, b, lb.kvHeads*p.HeadDim),
		keys: m.slot(pt.kvK[l], 0), values: m.slot(pt.kvV[l], 0), pos: pos,
		heads: lb.heads, kvHeads: lb.kvHeads, base: base, window: window}
	for _, sg := range m.segs {
		a.seqs = append(a.seqs, seqKV{row: sg.row, n: sg.n, keys: m.slot(pt.kvK[l], sg.slot), values: m.slot(pt.kvV[l], sg.slot)})
	}
	if len(m.segs) > 0 {
		a.allKeys, a.allValues, a.cacheRows = pt.kvK[l], pt.kvV[l], pt.s.outIdx.ColSlice(0, b)
		a.slotRows, a.supports = m.ctx, pt.be.Supports
	}
	ops := append([]kernels.Op{kernels.RMSNorm{Dst: h, X: x, W: w.attnNorm, Eps: p.NormEps}}, p.attention(a)...)
	if p.arch.postNorms {
		ops = append(ops, kernels.RMSNorm{Dst: h, X: h, W: w.attnPost, Eps: p.NormEps})
	}
	return ops
}

// ffnOps is block l's SwiGLU FFN on pt's rows for b tokens, or its routed
// experts: the output (or pt's share) ends in xn.
func (m *Model) ffnOps(pt *part, l, b int) []kernels.Op {
	p, s, w, lb := m.params, pt.s, pt.w.blocks[l], pt.local[l]
	x, h := s.x.RowSlice(0, b), s.xn.RowSlice(0, b)
	norm := kernels.RMSNorm{Dst: h, X: x, W: w.ffnNorm, Eps: p.NormEps}
	gate, up := packed(s.gate, b, lb.ffn), packed(s.up, b, lb.ffn)
	switch {
	case p.arch.moe:
		return []kernels.Op{norm, kernels.MoE{Dst: h, X: h, Router: w.router, Gate: w.gate, Up: w.up, Down: w.down,
			Experts: p.Experts, Used: p.ExpertsUsed, Renorm: true}}
	case p.arch.geglu:
		return []kernels.Op{norm,
			kernels.MatMul{Dst: gate, W: w.gate, X: h},
			kernels.MatMul{Dst: up, W: w.up, X: h},
			kernels.GeGLU{Dst: gate, Gate: gate, Up: up},
			kernels.MatMul{Dst: h, W: w.down, X: gate},
			kernels.RMSNorm{Dst: h, X: h, W: w.ffnPost, Eps: p.NormEps},
		}
	}
	return append([]kernels.Op{norm}, ffn(w, h, h, gate, up)...)
}

// attnArgs are what one block's attention reads and writes on a device.
type attnArgs struct {
	w                 blockWeights   // wq, wk, wv, wo; biases and per-head norms where present
	factors           kernels.Tensor // RoPE frequency factors, optional
	in, out           kernels.Tensor // [b, input width] normalised input; [b, n_embd] output (may be in)
	q, k, v, attn     kernels.Tensor // scratch: [b, heads*head_dim], [b, kv_heads*head_dim], [b, heads*head_dim]
	keys, values, pos kernels.Tensor // the block's caches, and the rows' positions
	// seqs, when set, are the sequences of a pass over several
	// (Model.ForwardSeqs): each writes and attends its own caches, not
	// keys and values. With cacheRows, each row's row of allKeys and
	// allValues (every sequence's caches, slot after slot), the rows are
	// rotated and written for all sequences at once, and attended in one
	// op (slots of slotRows rows) where the backend supports it, else a
	// sequence at a time.
	seqs               []seqKV
	allKeys, allValues kernels.Tensor
	cacheRows          kernels.Tensor
	slotRows           int
	supports           func(kernels.Op) bool
	heads, kvHeads     int     // the heads this device computes
	base               float32 // the block's RoPE base
	window             int     // > 0: sliding-window attention
}

// attention is a block's self-attention, the same for decoders and
// drafts: Q, K and V (biases and per-head norms where the architecture has
// them), RoPE, the new keys and values written to the caches at their
// positions, attention over the caches, the output projection.
func (p Params) attention(a attnArgs) []kernels.Op {
	w, b := a.w, a.in.Rows
	rope := func(t, pos kernels.Tensor) kernels.Rope {
		return kernels.Rope{Dst: t, X: t, Pos: pos, HeadDim: p.HeadDim, Dims: p.RopeDims,
			Base: a.base, Scale: p.RopeScale, Neox: p.arch.neox, Factors: a.factors}
	}
	ops := []kernels.Op{
		kernels.MatMul{Dst: a.q, W: w.wq, X: a.in},
		kernels.MatMul{Dst: a.k, W: w.wk, X: a.in},
		kernels.MatMul{Dst: a.v, W: w.wv, X: a.in},
	}
	for _, bias := range []struct{ t, b kernels.Tensor }{{a.q, w.bq}, {a.k, w.bk}, {a.v, w.bv}} {
		if bias.b.Valid() {
			ops = append(ops, kernels.Add{Dst: bias.t, A: bias.t, B: bias.b})
		}
	}
	if p.arch.qkNorm {
		qh, kh := a.q.Reshape(b*a.heads, p.HeadDim), a.k.Reshape(b*a.kvHeads, p.HeadDim)
		ops = append(ops,
			kernels.RMSNorm{Dst: qh, X: qh, W: w.qNorm, Eps: p.NormEps},
			kernels.RMSNorm{Dst: kh, X: kh, W: w.kNorm, Eps: p.NormEps},
		)
	}
	seqs := a.seqs
	if len(seqs) == 0 {
		seqs = []seqKV{{row: 0, n: b, keys: a.keys, values: a.values}}
	}
	// Several sequences' rows are rotated and cached together, each row
	// written at its own row of the caches (one fused launch on a GPU,
	// not one a sequence), and attend each sequence's own slot: the
	// attention kernels need not know of slots. Attention then runs once
	// for all of them too, each row reading its own slot (Rows), where
	// the backend can: on a GPU one launch a block, not one a sequence.
	if a.cacheRows.Valid() {
		ops = append(ops, rope(a.q, a.pos), rope(a.k, a.pos),
			kernels.SetRows{Dst: a.allKeys, Src: a.k, Idx: a.cacheRows},
			kernels.SetRows{Dst: a.allValues, Src: a.v, Idx: a.cacheRows})
		all := kernels.Attention{Dst: a.attn, Q: a.q, K: a.allKeys, V: a.allValues, Pos: a.pos,
			Rows: a.cacheRows, Ctx: a.slotRows, NHead: a.heads, NKVHead: a.kvHeads, HeadDim: p.HeadDim,
			Scale: p.attnScale(), Window: a.window}
		if a.supports(all) {
			return append(ops, all, kernels.MatMul{Dst: a.out, W: w.wo, X: a.attn})
		}
		for _, sq := range seqs {
			pos := a.pos.ColSlice(sq.row, sq.n)
			ops = append(ops, kernels.Attention{Dst: a.attn.RowSlice(sq.row, sq.n), Q: a.q.RowSlice(sq.row, sq.n),
				K: sq.keys, V: sq.values, Pos: pos, NHead: a.heads, NKVHead: a.kvHeads, HeadDim: p.HeadDim,
				Scale: p.attnScale(), Window: a.window})
		}
		return append(ops, kernels.MatMul{Dst: a.out, W: w.wo, X: a.attn})
	}
	for _, sq := range seqs {
		q, k, v := a.q.RowSlice(sq.row, sq.n), a.k.RowSlice(sq.row, sq.n), a.v.RowSlice(sq.row, sq.n)
		pos := a.pos.ColSlice(sq.row, sq.n)
		ops = append(ops,
			rope(q, pos), rope(k, pos),
			kernels.SetRows{Dst: sq.keys, Src: k, Idx: pos},
			kernels.SetRows{Dst: sq.values, Src: v, Idx: pos},
			kernels.Attention{Dst: a.attn.RowSlice(sq.row, sq.n), Q: q, K: sq.keys, V: sq.values, Pos: pos,
				NHead: a.heads, NKVHead: a.kvHeads, HeadDim: p.HeadDim,
				Scale: p.attnScale(), Window: a.window})
	}
	return append(ops, kernels.MatMul{Dst: a.out, W: w.wo, X: a.attn})
}

// seqKV is one sequence's rows of a pass over several, and its slot of a
// block's caches.
type seqKV struct {
	row, n       int
	keys, values kernels.Tensor
}

// ffn is a SwiGLU feed-forward network on in into out, gate and up its
// scratch, the same for decoders and drafts.
func ffn(w blockWeights, in, out, gate, up kernels.Tensor) []kernels.Op {
	return []kernels.Op{
		kernels.MatMul{Dst: gate, W: w.gate, X: in},
		kernels.MatMul{Dst: up, W: w.up, X: in},
		kernels.SwiGLU{Dst: gate, Gate: gate, Up: up},
		kernels.MatMul{Dst: out, W: w.down, X: gate},
	}
}

// packed is a [rows, cols] view at the start of t's buffer space: blocks
// with fewer local heads or FFN rows than the widest use a prefix of it.
func packed(t kernels.Tensor, rows, cols int) kernels.Tensor {
	return kernels.NewTensor(t.Buf, t.Type, rows, cols, t.Off)
}
