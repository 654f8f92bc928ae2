package model

import (
	"context"
	"fmt"

	"github.com/tandem-run/tandem/engine/gguf"
	"github.com/tandem-run/tandem/kernels"
	"github.com/tandem-run/tandem/kernels/quant"
)

// weights are a model's tensors on one device, named as in llama.cpp
// GGUFs: the device's shards, the rows or columns the plan gives it.
type weights struct {
	tokEmbd   kernels.Tensor // [vocab, n_embd]
	outNorm   kernels.Tensor // [1, n_embd]
	output    kernels.Tensor // [vocab, n_embd]; tokEmbd when the head is tied
	ropeFreqs kernels.Tensor // [1, rope_dims/2], optional (llama3 frequency factors)
	blocks    []blockWeights
}

type blockWeights struct {
	attnNorm   kernels.Tensor // [1, n_embd]
	wq         kernels.Tensor // [n_head*head_dim, n_embd]
	wk, wv     kernels.Tensor // [n_kv_head*head_dim, n_embd]
	bq, bk, bv kernels.Tensor // [1, rows of wq/wk/wv], optional (qwen2)
	qNorm      kernels.Tensor // [1, head_dim] (qwen3)
	kNorm      kernels.Tensor // [1, head_dim] (qwen3)
	wo         kernels.Tensor // [n_embd, n_head*head_dim]
	ffnNorm    kernels.Tensor // [1, n_embd]
	gate, up   kernels.Tensor // [n_ff, n_embd]; experts: [n_expert*n_ff_exp, n_embd]
	down       kernels.Tensor // [n_embd, n_ff]; experts: [n_expert*n_embd, n_ff_exp]
	router     kernels.Tensor // [n_expert, n_embd] (mixture-of-experts blocks)
	attnPost   kernels.Tensor // [1, n_embd] norm of the attention output (gemma3)
	ffnPost    kernels.Tensor // [1, n_embd] norm of the FFN output (gemma3)
}

// Progress reports loading: bytes of tensors placed on the device so far.
type Progress struct {
	Done, Total int64
	Tensor      string // the tensor just placed
}

// loader binds tensors of f to buffers of be, checking each against the
// shape the hyper-parameters imply before any is uploaded.
type loader struct {
	ctx      context.Context
	f        *gguf.File
	be       kernels.Backend
	owner    string
	progress func(Progress)

	done, total int64
	bufs        []kernels.Buffer // everything allocated, for cleanup
}

// tensorSpec is one tensor the model needs.
type tensorSpec struct {
	name       string
	dst        *kernels.Tensor
	rows, cols int
	cat        kernels.Category
	optional   bool
	vector     bool // a norm weight or bias, used as F32
	experts    int  // > 0: a 3-D expert tensor {cols, rows/experts, experts}, bound as [rows, cols]
	use        kernels.Op
}

func (p Params) specs(w *weights) []tensorSpec {
	embd, qDim, kvDim := p.Embd, p.Heads*p.HeadDim, p.KVHeads*p.HeadDim
	matrix := func(name string, dst *kernels.Tensor, rows, cols int, cat kernels.Category) tensorSpec {
		return tensorSpec{name: name, dst: dst, rows: rows, cols: cols, cat: cat, use: kernels.MatMul{}}
	}
	vector := func(name string, dst *kernels.Tensor, n int, cat kernels.Category, optional bool) tensorSpec {
		return tensorSpec{name: name, dst: dst, rows: 1, cols: n, cat: cat, optional: optional, vector: true}
	}
	specs := []tensorSpec{
		{name: "token_embd.weight", dst: &w.tokEmbd, rows: p.Vocab, cols: embd, cat: kernels.Embedding, use: kernels.GetRows{}},
		vector("output_norm.weight", &w.outNorm, embd, kernels.Head, false),
		{name: "output.weight", dst: &w.output, rows: p.Vocab, cols: embd, cat: kernels.Head, optional: true, use: kernels.MatMul{}},
		vector("rope_freqs.weight", &w.ropeFreqs, p.RopeDims/2, kernels.Weights, true),
	}
	w.blocks = make([]blockWeights, p.Layers)
	for i := range w.blocks {
		b := &w.blocks[i]
		n := func(s string) string { return fmt.Sprintf("blk.%d.%s", i, s) }
		specs = append(specs,
			vector(n("attn_norm.weight"), &b.attnNorm, embd, kernels.Weights, false),
			matrix(n("attn_q.weight"), &b.wq, qDim, embd, kernels.Weights),
			matrix(n("attn_k.weight"), &b.wk, kvDim, embd, kernels.Weights),
			matrix(n("attn_v.weight"), &b.wv, kvDim, embd, kernels.Weights),
			matrix(n("attn_output.weight"), &b.wo, embd, qDim, kernels.Weights),
			vector(n("ffn_norm.weight"), &b.ffnNorm, embd, kernels.Weights, false),
		)
		if p.arch.moe {
			e, ff := p.Experts, p.ExpertFF
			expert := func(name string, dst *kernels.Tensor, rows, cols int) tensorSpec {
				return tensorSpec{name: n(name), dst: dst, rows: e * rows, cols: cols, cat: kernels.Weights, experts: e, use: kernels.MoE{}}
			}
			specs = append(specs,
				tensorSpec{name: n("ffn_gate_inp.weight"), dst: &b.router, rows: e, cols: embd, cat: kernels.Weights, use: kernels.MoE{}},
				expert("ffn_gate_exps.weight", &b.gate, ff, embd),
				expert("ffn_up_exps.weight", &b.up, ff, embd),
				expert("ffn_down_exps.weight", &b.down, embd, ff),
			)
		} else {
			specs = append(specs,
				matrix(n("ffn_gate.weight"), &b.gate, p.FF, embd, kernels.Weights),
				matrix(n("ffn_up.weight"), &b.up, p.FF, embd, kernels.Weights),
				matrix(n("ffn_down.weight"), &b.down, embd, p.FF, kernels.Weights),
			)
		}
		if p.arch.bias {
			specs = append(specs,
				vector(n("attn_q.bias"), &b.bq, qDim, kernels.Weights, true),
				vector(n("attn_k.bias"), &b.bk, kvDim, kernels.Weights, true),
				vector(n("attn_v.bias"), &b.bv, kvDim, kernels.Weights, true),
			)
		}
		if p.arch.postNorms {
			specs = append(specs,
				vector(n("post_attention_norm.weight"), &b.attnPost, embd, kernels.Weights, false),
				vector(n("post_ffw_norm.weight"), &b.ffnPost, embd, kernels.Weights, false),
			)
		}
		if p.arch.qkNorm {
			specs = append(specs,
				vector(n("attn_q_norm.weight"), &b.qNorm, p.HeadDim, kernels.Weights, false),
				vector(n("attn_k_norm.weight"), &b.kNorm, p.HeadDim, kernels.Weights, false),
			)
		}
	}
	return specs
}

// checkOps refuses, before anything is placed, devices that lack an op the
// architecture's blocks need besides the weights' products (Gemma 3's
// GELU gating, embedding scale and sliding window), rather than failing at
// the first pass.
func (p Params) checkOps(bes []kernels.Backend) error {
	var need []kernels.Op
	if p.arch.geglu {
		need = append(need, kernels.GeGLU{})
	}
	if p.arch.embedScale {
		need = append(need, kernels.Scale{})
	}
	if p.arch.swaPeriod > 0 {
		need = append(need, kernels.Attention{Window: p.SlidingWindow})
	}
	for _, be := range bes {
		for _, op := range need {
			if !be.Supports(op) {
				return fmt.Errorf("model: %s blocks need %s on %s: %w", p.Arch, describeOp(op), be.Name(), ErrUnsupported)
			}
		}
	}
	return nil
}

func describeOp(op kernels.Op) string {
	if a, ok := op.(kernels.Attention); ok && a.Window > 0 {
		return "sliding-window attention"
	}
	return op.Name()
}

// checkTensors checks every tensor of specs in f before anything is
// placed: present unless optional, of the shape the hyper-parameters
// imply, and of a type each of bes (the devices that will run it) can use.
// A missing head is the tied embedding, which must then serve products.
func checkTensors(f *gguf.File, specs []tensorSpec, bes []kernels.Backend) error {
	tied := false
	for _, s := range specs {
		for _, be := range bes {
			l := loader{f: f, be: be}
			info, err := l.check(s)
			if err != nil {
				return err
			}
			tied = tied || info == nil && s.name == "output.weight"
		}
	}
	if !tied {
		return nil
	}
	info, _ := f.Tensor("token_embd.weight")
	for _, be := range bes {
		if !be.Supports(kernels.MatMul{W: kernels.Tensor{Type: info.Type}}) {
			return fmt.Errorf("model: token_embd.weight as the tied head: %v products on %s: %w", info.Type, be.Name(), ErrUnsupported)
		}
	}
	return nil
}

// check finds s in the file and validates its shape and type; a missing
// optional tensor gives nil.
func (l *loader) check(s tensorSpec) (*gguf.TensorInfo, error) {
	info, ok := l.f.Tensor(s.name)
	if !ok {
		if s.optional {
			return nil, nil
		}
		return nil, fmt.Errorf("model: tensor %q: %w", s.name, ErrMissing)
	}
	want := []int64{int64(s.cols), int64(s.rows)}
	switch {
	case s.vector:
		want = want[:1]
	case s.experts > 0:
		want = []int64{int64(s.cols), int64(s.rows / s.experts), int64(s.experts)}
	}
	if !sameDims(info.Dims, want) {
		return nil, fmt.Errorf("model: tensor %q has shape %v, want %v: %w", s.name, info.Dims, want, ErrShape)
	}
	if s.vector {
		if info.Type != quant.F32 && !canDequantize(info.Type) {
			return nil, fmt.Errorf("model: tensor %q: type %v: %w", s.name, info.Type, ErrUnsupported)
		}
		return info, nil
	}
	probe := kernels.Tensor{Type: info.Type}
	var op kernels.Op
	switch s.use.(type) {
	case kernels.GetRows:
		op = kernels.GetRows{Src: probe}
	case kernels.MoE:
		op = kernels.MoE{Router: probe, Gate: probe, Up: probe, Down: probe}
	default:
		op = kernels.MatMul{W: probe}
	}
	if !l.be.Supports(op) {
		return nil, fmt.Errorf("model: tensor %q: %v weights for %s on %s: %w", s.name, info.Type, op.Name(), l.be.Name(), ErrUnsupported)
	}
	return info, nil
}

// sameDims compares GGUF dims with want, ignoring trailing 1s.
func sameDims(dims, want []int64) bool {
	for len(dims) > len(want) && dims[len(dims)-1] == 1 {
		dims = dims[:len(dims)-1]
	}
	if len(dims) != len(want) {
		return false
	}
	for i := range dims {
		if dims[i] != want[i] {
			return false
		}
	}
	return true
}

func canDequantize(t quant.Type) bool {
	if !t.Known() || t.BlockSize() > 256 {
		return false
	}
	src := make([]byte, t.TypeSize())
	dst := make([]float32, t.BlockSize())
	return quant.Dequantize(t, src, dst) == nil
}

// place puts one tensor on the backend: matrices as they are in the file,
// vectors as F32 (converted on the host if the file stores them otherwise).
func (l *loader) place(s tensorSpec, info *gguf.TensorInfo) (kernels.Tensor, error) {
	data, err := l.f.TensorData(info)
	if err != nil {
		return kernels.Tensor{}, fmt.Errorf("model: tensor %q: %w", s.name, err)
	}
	label := kernels.Label{Owner: l.owner, Cat: s.cat}
	if !uploaded(s.vector, info.Type) {
		vals := make([]float32, s.cols)
		if err := quant.Dequantize(info.Type, data, vals); err != nil {
			return kernels.Tensor{}, fmt.Errorf("model: tensor %q: %w", s.name, err)
		}
		buf, err := l.alloc(label, int64(4*s.cols))
		if err != nil {
			return kernels.Tensor{}, fmt.Errorf("model: tensor %q: %w", s.name, err)
		}
		t := kernels.NewTensor(buf, quant.F32, 1, s.cols, 0)
		return t, l.be.Write(t, kernels.F32Bytes(vals))
	}
	buf, err := l.be.Upload(label, data)
	if err != nil {
		return kernels.Tensor{}, fmt.Errorf("model: tensor %q: %w", s.name, err)
	}
	l.bufs = append(l.bufs, buf)
	return kernels.NewTensor(buf, info.Type, s.rows, s.cols, 0), nil
}

// uploaded reports whether a tensor goes to the backend as it is in the
// file (Upload); vectors in another type than F32 are converted on the
// host and written instead.
func uploaded(vector bool, t quant.Type) bool { return !vector || t == quant.F32 }

// slabReserver is a backend that can hold many buffers in one allocation
// (kernels/cuda, where the driver rounds each allocation up to a page).
type slabReserver interface {
	ReserveSlab(sizes []int64) error
}

// reserveSlab tells be the sizes of the buffers about to be allocated or
// uploaded, where it can use them.
func reserveSlab(be kernels.Backend, sizes []int64) error {
	if r, ok := be.(slabReserver); ok && len(sizes) > 0 {
		return r.ReserveSlab(sizes)
	}
	return nil
}

// alloc allocates and remembers a buffer for cleanup.
func (l *loader) alloc(label kernels.Label, size int64) (kernels.Buffer, error) {
	buf, err := l.be.Alloc(label, size)
	if err != nil {
		return nil, err
	}
	l.bufs = append(l.bufs, buf)
	return buf, nil
}
