package model

import (
	"encoding/binary"
	"fmt"

	"github.com/tandem-run/tandem/engine/gguf"
	"github.com/tandem-run/tandem/kernels"
	"github.com/tandem-run/tandem/kernels/quant"
)

// nameD2T is the optional map from the draft's reduced vocabulary to target
// token ids (absolute ids, I64, as llama.cpp's converter writes it).
const nameD2T = "d2t"

// eagle3Weights are an EAGLE-3 draft's tensors, named as in llama.cpp's
// eagle3 GGUFs. The token embedding and head are the target's unless the
// file has its own.
type eagle3Weights struct {
	fc       kernels.Tensor // [n_embd, n_fused]: the fusion of the target states
	fcNorm   kernels.Tensor // [1, n_fused] enc.output_norm, with NormBeforeFC
	embdNorm kernels.Tensor // [1, n_embd] attn_norm: of the token embedding
	gNorm    kernels.Tensor // [1, n_embd] attn_norm_2: of the fused state g
	wq       kernels.Tensor // [n_head*head_dim, 2*n_embd]
	wk, wv   kernels.Tensor // [n_kv_head*head_dim, 2*n_embd]
	wo       kernels.Tensor // [n_embd, n_head*head_dim]
	ffnNorm  kernels.Tensor // [1, n_embd]
	gate, up kernels.Tensor // [n_ff, n_embd]
	down     kernels.Tensor // [n_embd, n_ff]
	rope     kernels.Tensor // [1, rope_dims/2], optional (llama3 frequency factors)
	outNorm  kernels.Tensor // [1, n_embd]

	tokEmbd kernels.Tensor // [target vocab, n_embd]: own or the target's
	output  kernels.Tensor // [draft vocab, n_embd]: own or the target's
	ownEmbd bool
	ownHead bool
}

func (e Eagle3Params) specs(w *eagle3Weights, targetVocab int) []tensorSpec {
	p := e.Params
	in, qDim, kvDim := 2*p.Embd, p.Heads*p.HeadDim, p.KVHeads*p.HeadDim
	matrix := func(name string, dst *kernels.Tensor, rows, cols int) tensorSpec {
		return tensorSpec{name: name, dst: dst, rows: rows, cols: cols, cat: kernels.Weights, use: kernels.MatMul{}}
	}
	vector := func(name string, dst *kernels.Tensor, n int, cat kernels.Category, optional bool) tensorSpec {
		return tensorSpec{name: name, dst: dst, rows: 1, cols: n, cat: cat, optional: optional, vector: true}
	}
	specs := []tensorSpec{
		matrix("fc.weight", &w.fc, p.Embd, e.FusedWidth()),
		vector("blk.0.attn_norm.weight", &w.embdNorm, p.Embd, kernels.Weights, false),
		vector("blk.0.attn_norm_2.weight", &w.gNorm, p.Embd, kernels.Weights, false),
		matrix("blk.0.attn_q.weight", &w.wq, qDim, in),
		matrix("blk.0.attn_k.weight", &w.wk, kvDim, in),
		matrix("blk.0.attn_v.weight", &w.wv, kvDim, in),
		matrix("blk.0.attn_output.weight", &w.wo, p.Embd, qDim),
		vector("blk.0.ffn_norm.weight", &w.ffnNorm, p.Embd, kernels.Weights, false),
		matrix("blk.0.ffn_gate.weight", &w.gate, p.FF, p.Embd),
		matrix("blk.0.ffn_up.weight", &w.up, p.FF, p.Embd),
		matrix("blk.0.ffn_down.weight", &w.down, p.Embd, p.FF),
		vector("blk.0.rope_freqs.weight", &w.rope, p.RopeDims/2, kernels.Weights, true),
		vector("output_norm.weight", &w.outNorm, p.Embd, kernels.Head, false),
		{name: "token_embd.weight", dst: &w.tokEmbd, rows: targetVocab, cols: p.Embd, cat: kernels.Embedding, optional: true, use: kernels.GetRows{}},
		{name: "output.weight", dst: &w.output, rows: p.Vocab, cols: p.Embd, cat: kernels.Head, optional: true, use: kernels.MatMul{}},
	}
	if e.NormBeforeFC {
		specs = append(specs, vector("enc.output_norm.weight", &w.fcNorm, e.FusedWidth(), kernels.Weights, false))
	}
	return specs
}

// placeAll checks every spec against the file, then places the tensors
// (as loadWeights does for a decoder's own list).
func (l *loader) placeAll(specs []tensorSpec) error {
	infos := make([]*gguf.TensorInfo, len(specs))
	for i, s := range specs {
		info, err := l.check(s)
		if err != nil {
			return err
		}
		infos[i] = info
		if info != nil {
			l.total += info.Bytes
		}
	}
	for i, s := range specs {
		if infos[i] == nil {
			continue
		}
		if err := l.ctx.Err(); err != nil {
			return err
		}
		t, err := l.place(s, infos[i])
		if err != nil {
			return err
		}
		*s.dst = t
		l.done += infos[i].Bytes
		if l.progress != nil {
			l.progress(Progress{Done: l.done, Total: l.total, Tensor: s.name})
		}
	}
	return nil
}

// readD2T reads the draft-to-target id map, nil when the file has none.
// Every id must be a distinct target token.
func readD2T(f *gguf.File, targetVocab int) ([]int32, error) {
	info, ok := f.Tensor(nameD2T)
	if !ok {
		return nil, nil
	}
	if len(info.Dims) != 1 || (info.Type != quant.I64 && info.Type != quant.I32) {
		return nil, fmt.Errorf("model: tensor %q: %v of shape %v, want a vector of I64 or I32: %w", nameD2T, info.Type, info.Dims, ErrShape)
	}
	data, err := f.TensorData(info)
	if err != nil {
		return nil, fmt.Errorf("model: tensor %q: %w", nameD2T, err)
	}
	size := info.Type.TypeSize()
	n := int(info.Dims[0])
	if len(data) != n*size {
		return nil, fmt.Errorf("model: tensor %q: %d bytes for %d ids: %w", nameD2T, len(data), n, ErrShape)
	}
	ids := make([]int32, n)
	seen := make([]bool, targetVocab)
	for i := range ids {
		var id int64
		if size == 8 {
			id = int64(binary.LittleEndian.Uint64(data[8*i:]))
		} else {
			id = int64(int32(binary.LittleEndian.Uint32(data[4*i:])))
		}
		if id < 0 || id >= int64(targetVocab) || seen[id] {
			return nil, fmt.Errorf("model: tensor %q: draft token %d maps to %d (target vocabulary %d, each id once): %w", nameD2T, i, id, targetVocab, ErrBadParam)
		}
		seen[id] = true
		ids[i] = int32(id)
	}
	return ids, nil
}
