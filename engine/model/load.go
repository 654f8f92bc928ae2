package model

import (
	"context"
	"fmt"

	"github.com/tandem-run/tandem/engine/gguf"
	"github.com/tandem-run/tandem/engine/plan"
	"github.com/tandem-run/tandem/kernels"
	"github.com/tandem-run/tandem/kernels/cuda/workspace"
	"github.com/tandem-run/tandem/kernels/quant"
)

// loadTensors places every shard of the plan's tensors on its device.
func (m *Model) loadTensors(ctx context.Context, f *gguf.File, mp *plan.ModelPlan, progress func(Progress)) error {
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
		if !pt.w.output.Valid() && pt.headRows.Len() > 0 {
			pt.w.output = pt.w.tokEmbd // tied head
		}
	}
	return nil
}

// placeShard uploads one shard and binds it to the tensor it serves.
func (m *Model) placeShard(t *plan.Tensor, s plan.Shard, data []byte) error {
	pt := m.byDev[s.Device]
	if pt == nil {
		return fmt.Errorf("device not among the model's: %w", ErrBadParam)
	}
	dst, err := m.destination(pt, t.Name)
	if err != nil {
		return err
	}
	label := kernels.Label{Owner: m.role, Cat: classCategory(t.Class)}
	// A 3-D expert tensor {cols, rows, experts} is bound as
	// [experts*rows, cols], expert e's rows after expert e-1's.
	rows, cols := 1, int(t.Dims[0])
	for _, d := range t.Dims[1:] {
		rows *= int(d)
	}
	var piece []byte
	if off, n, ok := s.FileRange(t); ok {
		piece = data[off : off+n]
		switch {
		case len(t.Dims) == 2:
			rows = int(s.Len())
		case len(t.Dims) == 1:
			cols = int(s.Len())
		case !s.Whole(t):
			return fmt.Errorf("tensor %q: experts %v of %d: expert tensors are placed whole: %w", t.Name, s.Range, t.Dims[2], ErrUnsupported)
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
func (m *Model) destination(pt *part, name string) (*kernels.Tensor, error) {
	if dst, ok := pt.dst[name]; ok {
		return dst, nil
	}
	return nil, fmt.Errorf("no use for it in a %s model: %w", m.params.Arch, ErrUnsupported)
}

func classCategory(c plan.Class) kernels.Category {
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
func (m *Model) allocBuffers(p *plan.Plan, mp *plan.ModelPlan) error {
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
			return fmt.Errorf("model: buffer %s on device %d, not one of the model's: %w", b.Name(), b.Device, ErrBadParam)
		}
		buf, err := pt.be.Alloc(kernels.Label{Owner: m.role, Cat: category(b)}, b.Bytes)
		if err != nil {
			return fmt.Errorf("model: buffer %s on device %d: %w", b.Name(), b.Device, err)
		}
		pt.bufs = append(pt.bufs, buf)
		if err := pt.bind(b, kernels.NewTensor(buf, b.Type, int(b.Dims[1]), int(b.Dims[0]), 0)); err != nil {
			return err
		}
	}
	for _, pt := range m.parts {
		if !pt.s.tokens.Valid() {
			return fmt.Errorf("model: the plan has no inputs buffer on device %d: %w", pt.dev, ErrMissing)
		}
	}
	return m.reserve(p)
}

// category is the accounting category of a plan buffer.
func category(b plan.Buffer) kernels.Category {
	if b.Kind() == plan.BufferKV {
		return kernels.KV
	}
	return kernels.Scratch
}

// reserver is a backend with scratch of its own besides what callers
// allocate (kernels/cuda), which a plan counts per device.
type reserver interface {
	Reserve(workspace.Sizes) error
}

// reserve gives each part's backend the plan's workspace for its device,
// so the programs compiled later fit in it.
func (m *Model) reserve(p *plan.Plan) error {
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

// bind points the scratch field or KV cache of b's role at t.
func (pt *part) bind(b plan.Buffer, t kernels.Tensor) error {
	switch b.Role {
	case plan.RoleKeys, plan.RoleValues:
		if b.Block < 0 || b.Block >= len(pt.kvK) {
			return fmt.Errorf("model: KV buffer %s of block %d: %w", b.Name(), b.Block, ErrBadParam)
		}
		if b.Role == plan.RoleKeys {
			pt.kvK[b.Block] = t
		} else {
			pt.kvV[b.Block] = t
		}
	case plan.RoleInputs: // [3, batch]: ids, positions, rows wanted
		pt.s.tokens, pt.s.pos, pt.s.outIdx = t.Row(0), t.Row(1), t.Row(2)
	case plan.RoleStream:
		pt.s.x = t
	case plan.RoleNormed:
		pt.s.xn = t
	case plan.RoleQueries:
		pt.s.q = t
	case plan.RoleNewKeys:
		pt.s.k = t
	case plan.RoleNewValues:
		pt.s.v = t
	case plan.RoleAttention:
		pt.s.attn = t
	case plan.RoleFFNGate:
		pt.s.gate = t
	case plan.RoleFFNUp:
		pt.s.up = t
	case plan.RoleLogits:
		pt.s.logits = t
	case plan.RoleTopIDs:
		pt.s.topIDs = t
	case plan.RoleTopLogits:
		pt.s.topLogits = t
	case plan.RoleReceive:
		pt.s.recv = t
	}
	return nil // an EAGLE-3 draft's features: a decoder does not run them
}
