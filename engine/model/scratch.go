package model

import (
	"fmt"

	"github.com/tandem-run/tandem/kernels"
	"github.com/tandem-run/tandem/kernels/quant"
)

// scratch is the activations of one pass, sized for the largest batch;
// smaller batches use the leading rows.
type scratch struct {
	tokens, pos kernels.Tensor // I32 [1, batch]
	outIdx      kernels.Tensor // I32 [1, outputs]: rows of x whose logits are wanted
	x           kernels.Tensor // [batch, n_embd] the residual stream
	h           kernels.Tensor // [batch, n_embd] normed input of a sub-layer
	tmp         kernels.Tensor // [batch, n_embd] a sub-layer's output
	q, attn     kernels.Tensor // [batch, n_head*head_dim]
	k, v        kernels.Tensor // [batch, n_kv_head*head_dim]
	gate, up    kernels.Tensor // [batch, n_ff]
	sel         kernels.Tensor // [outputs, n_embd] rows picked for the head
	logits      kernels.Tensor // [outputs, vocab]
	ids         kernels.Tensor // I32 [1, outputs]: each logits row's argmax
	hidden      kernels.Tensor // [batch, len(capture)*n_embd], when capturing
}

// arena lays tensors out in one buffer.
type arena struct {
	size    int64
	pending []pendingTensor
}

type pendingTensor struct {
	dst        *kernels.Tensor
	typ        quant.Type
	rows, cols int
	off        int64
}

// alignment of every tensor in an arena: a cache line, and enough for any
// device's vector loads.
const alignment = 256

func (a *arena) add(dst *kernels.Tensor, typ quant.Type, rows, cols int) {
	rb, _ := typ.RowBytes(int64(cols))
	a.pending = append(a.pending, pendingTensor{dst, typ, rows, cols, a.size})
	a.size += (int64(rows)*rb + alignment - 1) / alignment * alignment
}

func (a *arena) alloc(l *loader, label kernels.Label) error {
	if a.size == 0 {
		return nil
	}
	buf, err := l.alloc(label, a.size)
	if err != nil {
		return err
	}
	for _, p := range a.pending {
		*p.dst = kernels.NewTensor(buf, p.typ, p.rows, p.cols, p.off)
	}
	return nil
}

func newScratch(l *loader, p Params, opts Options) (scratch, error) {
	var s scratch
	var a arena
	b, outs := opts.Batch, opts.Outputs
	a.add(&s.tokens, quant.I32, 1, b)
	a.add(&s.pos, quant.I32, 1, b)
	a.add(&s.outIdx, quant.I32, 1, outs)
	a.add(&s.x, quant.F32, b, p.Embd)
	a.add(&s.h, quant.F32, b, p.Embd)
	a.add(&s.tmp, quant.F32, b, p.Embd)
	a.add(&s.q, quant.F32, b, p.Heads*p.HeadDim)
	a.add(&s.attn, quant.F32, b, p.Heads*p.HeadDim)
	a.add(&s.k, quant.F32, b, p.KVHeads*p.HeadDim)
	a.add(&s.v, quant.F32, b, p.KVHeads*p.HeadDim)
	a.add(&s.gate, quant.F32, b, p.FF)
	a.add(&s.up, quant.F32, b, p.FF)
	a.add(&s.sel, quant.F32, outs, p.Embd)
	a.add(&s.logits, quant.F32, outs, p.Vocab)
	a.add(&s.ids, quant.I32, 1, outs)
	if n := len(opts.CaptureLayers); n > 0 {
		a.add(&s.hidden, quant.F32, b, n*p.Embd)
	}
	if err := a.alloc(l, kernels.Label{Owner: opts.Owner, Cat: kernels.Scratch}); err != nil {
		return s, fmt.Errorf("model: scratch: %w", err)
	}
	return s, nil
}
