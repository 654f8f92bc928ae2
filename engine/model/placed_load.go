package model

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/tandem-run/tandem/engine/gguf"
	"github.com/tandem-run/tandem/engine/plan"
	"github.com/tandem-run/tandem/kernels"
	"github.com/tandem-run/tandem/kernels/cuda/workspace"
	"github.com/tandem-run/tandem/kernels/quant"
)

// loadTensors places every shard of the plan's tensors on its device.
func (m *Placed) loadTensors(ctx context.Context, f *gguf.File, mp *plan.ModelPlan, progress func(Progress)) error {
	var done, total int64
	sizes := map[int][]int64{} // of the buffers placeShard makes, by device
	for _, t := range mp.Tensors {
		total += t.Bytes()
		for _, s := range t.Shards {
			switch {
			case s.Len() == 0:
			case uploaded(len(t.Dims) == 1, t.Type):
				sizes[s.Device] = append(sizes[s.Device], s.Bytes)
			default:
				sizes[s.Device] = append(sizes[s.Device], 4*s.Len())
			}
		}
	}
	for _, pt := range m.parts {
		if err := reserveSlab(pt.be, sizes[pt.dev]); err != nil {
			return fmt.Errorf("model: weights on device %d: %w", pt.dev, err)
		}
	}
	for i := range mp.Tensors {
		t := &mp.Tensors[i]
		info, ok := f.Tensor(t.Name)
		if !ok || t.File != mp.Role {
			return fmt.Errorf("model: planned tensor %q is not in %s: %w", t.Name, f.Path, ErrMissing)
		}
		data, err := f.TensorData(info)
		if err != nil {
			return fmt.Errorf("model: tensor %q: %w", t.Name, err)
		}
		for _, s := range t.Shards {
			if err := ctx.Err(); err != nil {
				return err
			}
			if s.Len() == 0 {
				continue
			}
			if err := m.placeShard(t, s, data); err != nil {
				return fmt.Errorf("model: tensor %q on device %d: %w", t.Name, s.Device, err)
			}
			done += s.Bytes
			if progress != nil {
				progress(Progress{Done: done, Total: total, Tensor: t.Name})
			}
		}
	}
	for _, pt := range m.parts {
		if !pt.output.Valid() && pt.headRows.Len() > 0 {
			pt.output = pt.tokEmbd // tied head
		}
	}
	return nil
}

// placeShard uploads one shard and binds it to the tensor it serves.
func (m *Placed) placeShard(t *plan.Tensor, s plan.Shard, data []byte) error {
	pt := m.byDev[s.Device]
	if pt == nil {
		return fmt.Errorf("device not among the model's: %w", ErrBadParam)
	}
	dst, err := m.destination(pt, t.Name)
	if err != nil {
		return err
	}
	label := kernels.Label{Owner: m.role, Cat: category(t.Class)}
	rows, cols := 1, int(t.Dims[0])
	if len(t.Dims) == 2 {
		rows = int(t.Dims[1])
	}
	var piece []byte
	if off, n, ok := s.FileRange(t); ok {
		piece = data[off : off+n]
		if len(t.Dims) == 2 {
			rows = int(s.Len())
		} else {
			cols = int(s.Len())
		}
	} else {
		piece, err = columns(t, s, data)
		if err != nil {
			return err
		}
		cols = int(s.Len())
	}
	if !uploaded(len(t.Dims) == 1, t.Type) {
		// Norms and biases are used as F32, as Load does.
		vals := make([]float32, cols)
		if err := quant.Dequantize(t.Type, piece, vals); err != nil {
			return err
		}
		buf, err := pt.be.Alloc(label, int64(4*cols))
		if err != nil {
			return err
		}
		pt.bufs = append(pt.bufs, buf)
		*dst = kernels.NewTensor(buf, quant.F32, 1, cols, 0)
		return pt.be.Write(*dst, kernels.F32Bytes(vals))
	}
	buf, err := pt.be.Upload(label, piece)
	if err != nil {
		return err
	}
	pt.bufs = append(pt.bufs, buf)
	*dst = kernels.NewTensor(buf, t.Type, rows, cols, 0)
	return nil
}

// columns copies the block-aligned column range of s out of every row.
func columns(t *plan.Tensor, s plan.Shard, data []byte) ([]byte, error) {
	if len(t.Dims) != 2 || s.Dim != 0 {
		return nil, fmt.Errorf("cut along dimension %d of %v: %w", s.Dim, t.Dims, ErrUnsupported)
	}
	rowBytes, err := t.Type.RowBytes(t.Dims[0])
	if err != nil {
		return nil, err
	}
	skip, err := t.Type.RowBytes(s.Lo)
	if err != nil {
		return nil, err
	}
	n, err := t.Type.RowBytes(s.Len())
	if err != nil {
		return nil, err
	}
	out := make([]byte, 0, n*t.Dims[1])
	for r := range t.Dims[1] {
		row := data[r*rowBytes : (r+1)*rowBytes]
		out = append(out, row[skip:skip+n]...)
	}
	return out, nil
}

// destination is the field a tensor of this name binds to on pt.
func (m *Placed) destination(pt *part, name string) (*kernels.Tensor, error) {
	switch name {
	case "token_embd.weight":
		return &pt.tokEmbd, nil
	case "output.weight":
		return &pt.output, nil
	case "output_norm.weight":
		return &pt.outNorm, nil
	case "rope_freqs.weight":
		return &pt.ropeFreqs, nil
	}
	rest, ok := strings.CutPrefix(name, "blk.")
	num, suffix, ok2 := strings.Cut(rest, ".")
	b, err := strconv.Atoi(num)
	if !ok || !ok2 || err != nil || b < 0 || b >= len(pt.blk) {
		return nil, fmt.Errorf("no use for it in a %s model: %w", m.params.Arch, ErrUnsupported)
	}
	w := &pt.blk[b]
	fields := map[string]*kernels.Tensor{
		"attn_norm.weight": &w.attnNorm, "attn_q.weight": &w.wq, "attn_k.weight": &w.wk,
		"attn_v.weight": &w.wv, "attn_output.weight": &w.wo, "ffn_norm.weight": &w.ffnNorm,
		"ffn_gate.weight": &w.gate, "ffn_up.weight": &w.up, "ffn_down.weight": &w.down,
		"attn_q.bias": &w.bq, "attn_k.bias": &w.bk, "attn_v.bias": &w.bv,
		"attn_q_norm.weight": &w.qNorm, "attn_k_norm.weight": &w.kNorm,
	}
	if dst, ok := fields[suffix]; ok {
		return dst, nil
	}
	return nil, fmt.Errorf("no use for it in a %s model: %w", m.params.Arch, ErrUnsupported)
}

func category(c plan.Class) kernels.Category {
	switch c {
	case plan.ClassEmbedding:
		return kernels.Embedding
	case plan.ClassHead:
		return kernels.Head
	}
	return kernels.Weights
}

// allocBuffers allocates the plan's KV caches and scratch buffers and
// binds them.
func (m *Placed) allocBuffers(p *plan.Plan, mp *plan.ModelPlan) error {
	sizes := map[int][]int64{} // by device
	for _, b := range mp.Buffers {
		sizes[b.Device] = append(sizes[b.Device], b.Bytes)
	}
	for _, pt := range m.parts {
		if err := reserveSlab(pt.be, sizes[pt.dev]); err != nil {
			return fmt.Errorf("model: caches and scratch on device %d: %w", pt.dev, err)
		}
	}
	for _, b := range mp.Buffers {
		pt := m.byDev[b.Device]
		if pt == nil {
			return fmt.Errorf("model: buffer %s on device %d, not one of the model's: %w", b.Name, b.Device, ErrBadParam)
		}
		cat := kernels.Scratch
		if b.Kind == plan.BufferKV {
			cat = kernels.KV
		}
		buf, err := pt.be.Alloc(kernels.Label{Owner: m.role, Cat: cat}, b.Bytes)
		if err != nil {
			return fmt.Errorf("model: buffer %s on device %d: %w", b.Name, b.Device, err)
		}
		pt.bufs = append(pt.bufs, buf)
		if len(b.Dims) != 2 {
			continue // attention scores [ctx, B, group]: reserved for backends whose attention stores them
		}
		t := kernels.NewTensor(buf, b.Type, int(b.Dims[1]), int(b.Dims[0]), 0)
		if err := pt.bind(b, t); err != nil {
			return err
		}
	}
	if err := m.reserve(p); err != nil {
		return err
	}
	label := kernels.Label{Owner: m.role, Cat: kernels.Scratch}
	for _, pt := range m.parts {
		// Token ids, positions and output rows: 12 bytes a token, outside the plan.
		buf, err := pt.be.Alloc(label, 3*4*int64(m.batch))
		if err != nil {
			return fmt.Errorf("model: inputs on device %d: %w", pt.dev, err)
		}
		pt.bufs = append(pt.bufs, buf)
		pt.s.tokens = kernels.NewTensor(buf, quant.I32, 1, m.batch, 0)
		pt.s.pos = kernels.NewTensor(buf, quant.I32, 1, m.batch, 4*int64(m.batch))
		pt.s.outIdx = kernels.NewTensor(buf, quant.I32, 1, m.batch, 8*int64(m.batch))
	}
	return nil
}

// reserver is a backend with scratch of its own besides what callers
// allocate (kernels/cuda), which a plan counts per device.
type reserver interface {
	Reserve(workspace.Sizes) error
}

// reserve gives each part's backend the plan's workspace for its device,
// so the programs compiled later fit in it.
func (m *Placed) reserve(p *plan.Plan) error {
	for _, pt := range m.parts {
		r, ok := pt.be.(reserver)
		if !ok {
			continue
		}
		for _, b := range p.Devices {
			if b.Device.Index != pt.dev {
				continue
			}
			if err := r.Reserve(b.Workspace); err != nil {
				return fmt.Errorf("model: workspace on device %d: %w", pt.dev, err)
			}
		}
	}
	return nil
}

// bind points the scratch field or KV cache named by b at t.
func (pt *part) bind(b plan.Buffer, t kernels.Tensor) error {
	if b.Kind == plan.BufferKV {
		if b.Block < 0 || b.Block >= len(pt.kvK) {
			return fmt.Errorf("model: KV buffer %s of block %d: %w", b.Name, b.Block, ErrBadParam)
		}
		if strings.HasSuffix(b.Name, ".k") {
			pt.kvK[b.Block] = t
		} else {
			pt.kvV[b.Block] = t
		}
		return nil
	}
	fields := map[string]*kernels.Tensor{
		"x": &pt.s.x, "xn": &pt.s.xn, "q": &pt.s.q, "k": &pt.s.k, "v": &pt.s.v, "attn": &pt.s.attn,
		"ffn_gate": &pt.s.gate, "ffn_up": &pt.s.up, "logits": &pt.s.logits, "recv": &pt.s.recv,
	}
	if dst, ok := fields[b.Name]; ok {
		*dst = t
	}
	return nil // features: an EAGLE-3 draft's, which a Placed model does not run
}
