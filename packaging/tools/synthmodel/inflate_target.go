package main

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/tandem-run/tandem/engine/gguf"
	"github.com/tandem-run/tandem/kernels/quant"
)

// inflateTarget lays out src (a qwen3 model) at shape sh with the weight
// types of ftype. The bytes are made when the returned writer writes.
// typeLayers is the block count Q4_K_M's rule of more bits (tensorTypes.more)
// reads, 0 for the shape's own: a small reference inflation given a real
// shape's count stores the source's blocks in that shape's types.
func inflateTarget(src *srcModel, sh shape, shapeName, ftype string, typeLayers int, rng *rand.Rand) (*gguf.Writer, *layout, error) {
	if src.arch != "qwen3" {
		return nil, nil, fmt.Errorf("inflating %q models: only qwen3 targets (and eagle3 and dflash drafts) are inflated", src.arch)
	}
	types := typesFor(ftype, shape{tied: false}) // the inflated head is its own (inflate.go)
	if err := checkFits(src, sh, types.base); err != nil {
		return nil, nil, err
	}
	l, err := newTargetLayout(src, sh, types.embd)
	if err != nil {
		return nil, nil, err
	}
	if typeLayers <= 0 {
		typeLayers = sh.layers
	}
	ig := &inflater{w: &gguf.Writer{}, rng: rng, types: types, typeLayers: typeLayers, pools: map[string]*randomPool{}}
	name, _ := src.f.String("general.name")
	set := []gguf.KV{
		{Key: "general.name", Value: fmt.Sprintf("%s inflated to %s %s", name, shapeName, ftype)},
		{Key: "general.file_type", Value: fileTypes[ftype]},
		{Key: "general.quantization_version", Value: uint32(2)},
	}
	set = append(set, archKV("qwen3", sh.layers, sh, l, src.ropeBase)...)
	set = append(set,
		gguf.KV{Key: keySource, Value: name},
		gguf.KV{Key: keySrcEmbd, Value: uint32(l.n)},
		gguf.KV{Key: keySrcVocab, Value: uint32(src.vocab)},
		gguf.KV{Key: keyScale, Value: l.scale},
		gguf.KV{Key: keyBiasLane, Value: uint32(l.bias)},
		gguf.KV{Key: keyBiasValue, Value: l.biasValue},
		gguf.KV{Key: keyGain, Value: l.gain},
		gguf.KV{Key: keyPadLogitWt, Value: float32(padWeight)},
	)
	if err := copyMetadata(ig.w, src.f, set, src.vocab, sh.vocab); err != nil {
		return nil, nil, err
	}
	if err := addTargetTensors(ig, src, sh, l); err != nil {
		return nil, nil, err
	}
	return ig.w, l, nil
}

// archKV are the hyper-parameters of an inflated model of architecture
// arch with layers blocks.
func archKV(arch string, layers int, sh shape, l *layout, base float64) []gguf.KV {
	k := func(s string) string { return arch + "." + s }
	return []gguf.KV{
		{Key: k("block_count"), Value: uint32(layers)},
		{Key: k("embedding_length"), Value: uint32(sh.embd)},
		{Key: k("feed_forward_length"), Value: uint32(sh.ff)},
		{Key: k("attention.head_count"), Value: uint32(sh.heads)},
		{Key: k("attention.head_count_kv"), Value: uint32(sh.kvHeads)},
		{Key: k("attention.key_length"), Value: uint32(sh.headDim)},
		{Key: k("attention.value_length"), Value: uint32(sh.headDim)},
		{Key: k("rope.freq_base"), Value: float32(math.Pow(base, float64(l.D)/float64(l.d)))},
		{Key: k("attention.layer_norm_rms_epsilon"), Value: l.eps},
	}
}

// checkFits reports what keeps src out of shape sh: a smaller dimension,
// or (for a quantized base type) source widths that would leave zero
// regions out of line with the 32-value groups quantized blocks are made of.
func checkFits(src *srcModel, sh shape, base quant.Type) error {
	for _, c := range []struct {
		what      string
		have, src int
	}{
		{"blocks", sh.layers, src.layers}, {"FFN units", sh.ff, src.ff},
		{"vocabulary rows", sh.vocab, src.vocab}, {"query heads", sh.heads, src.heads},
	} {
		if c.have < c.src {
			return fmt.Errorf("the shape has %d %s, the source %d", c.have, c.what, c.src)
		}
	}
	if base.BlockSize() > 1 {
		for _, w := range []struct {
			what string
			n    int
		}{{"width", src.embd}, {"half head", src.headDim / 2}, {"FFN", src.ff}} {
			if w.n%32 != 0 {
				return fmt.Errorf("source %s %d is not a multiple of 32: zero regions would share quantized groups with weights", w.what, w.n)
			}
		}
	}
	return nil
}

// stds are the standard deviations of the source's tensors by kind.
func kindStds(src *srcModel, kinds map[string][]int) (map[string]float64, error) {
	out := map[string]float64{}
	for kind, dims := range kinds {
		var sum float64
		for b := range src.layers {
			v, err := src.tensor(fmt.Sprintf("blk.%d.%s.weight", b, kind), dims...)
			if err != nil {
				return nil, err
			}
			sum += stdOf(v)
		}
		out[kind] = sum / float64(src.layers)
	}
	return out, nil
}

func addTargetTensors(ig *inflater, src *srcModel, sh shape, l *layout) error {
	n := src.embd
	types := ig.types
	normMul := float32(math.Sqrt(float64(l.n) / float64(l.N)))

	// token_embd: the source's rows times s_r, the lane c in every row
	// (padding tokens included, so no row is all zeros), zeros elsewhere.
	embd, err := src.tensor("token_embd.weight", n, src.vocab)
	if err != nil {
		return err
	}
	m := &matrix{name: "token_embd.weight", typ: types.embd, rows: prefixAxis(src.vocab, sh.vocab, zero),
		cols: l.residualAxis(zero), src: embd, srcCols: n, scale: l.scale, pool: ig.pool("token_embd", stdOf(embd)),
		special: func(_ int, row []float32) { row[l.bias] = l.biasRaw }}
	if err := m.add(ig); err != nil {
		return err
	}

	if err := addBlocks(ig, src, sh, l, sh.layers); err != nil {
		return err
	}
	resFree := l.residualAxis(free)
	outNorm, err := src.tensor("output_norm.weight", n)
	if err != nil {
		return err
	}
	on := padVector(outNorm, resFree, normMul)
	on[l.bias] = l.gain
	if err := addVector(ig.w, "output_norm.weight", on); err != nil {
		return err
	}
	head := embd // a tied source's head is its embedding
	if _, ok := src.f.Tensor("output.weight"); ok {
		if head, err = src.tensor("output.weight", n, src.vocab); err != nil {
			return err
		}
	}
	headCols := l.residualAxis(free)
	headCols[l.bias] = zero // real tokens ignore the lane
	m = &matrix{name: "output.weight", typ: types.head, rows: prefixAxis(src.vocab, sh.vocab, free), cols: headCols,
		src: head, srcCols: n, scale: 1, pool: ig.pool("output", stdOf(head)),
		special: func(r int, row []float32) {
			if r >= src.vocab {
				row[l.bias] = padWeight
			}
		}}
	return m.add(ig)
}

// addBlocks writes blocks [0, layers) of a qwen3-style stack (a target's,
// or a DFlash draft's, whose blocks are the same) at shape sh: the
// source's blocks where it has them, identities past them (inflate.go).
func addBlocks(ig *inflater, src *srcModel, sh shape, l *layout, layers int) error {
	n, d, F := src.embd, src.headDim, src.ff
	qDim, kvDim := src.heads*d, src.kvHeads*d
	kinds := map[string][]int{
		"attn_q": {n, qDim}, "attn_k": {n, kvDim}, "attn_v": {n, kvDim}, "attn_output": {qDim, n},
		"ffn_gate": {n, F}, "ffn_up": {n, F}, "ffn_down": {F, n},
	}
	stds, err := kindStds(src, kinds)
	if err != nil {
		return err
	}
	types := ig.types
	normMul := float32(math.Sqrt(float64(l.n) / float64(l.N)))
	resFree := l.residualAxis(free)
	headDims := newAxis(l.D, free) // q_norm/k_norm: the source's dims where the heads hold them
	for i := range l.d {
		headDims[l.headDim(i)] = i
	}
	for b := range layers {
		s := b % src.layers // identity blocks take the norms of a source block
		real := b < src.layers
		name := func(k string) string { return fmt.Sprintf("blk.%d.%s.weight", b, k) }
		srcName := func(k string) string { return fmt.Sprintf("blk.%d.%s.weight", s, k) }
		load := func(k string) ([]float32, error) {
			if !real {
				return nil, nil
			}
			return src.tensor(srcName(k), kinds[k]...)
		}
		norm := func(k string, a axis, mul float32, lane bool) error {
			width := n
			if k == "attn_q_norm" || k == "attn_k_norm" {
				width = d
			}
			v, err := src.tensor(srcName(k), width)
			if err != nil {
				return err
			}
			p := padVector(v, a, mul)
			if lane {
				p[l.bias] = 0 // the blocks never see the bias lane
			}
			return addVector(ig.w, name(k), p)
		}
		mat := func(k string, typ quant.Type, rows, cols axis, scale float32) error {
			v, err := load(k)
			if err != nil {
				return err
			}
			srcCols := 0
			if v != nil {
				srcCols = kinds[k][0]
			}
			m := &matrix{name: name(k), typ: typ, rows: rows, cols: cols, src: v, srcCols: srcCols,
				scale: scale, pool: ig.pool(k, stds[k])}
			return m.add(ig)
		}
		pick := func(realAxis axis, code int, length int) axis {
			if real {
				return realAxis
			}
			return newAxis(length, code)
		}
		qRows := pick(l.headAxis(l.qSlot, zero, free), free, sh.heads*l.D)
		kvRows := pick(l.headAxis(l.kvSlot, zero, free), free, sh.kvHeads*l.D)
		woRows := pick(l.residualAxis(zero), zero, l.N)
		woCols := l.headAxis(l.liveSlots(), free, zero)
		ffRows := pick(prefixAxis(F, sh.ff, free), free, sh.ff)
		downCols := prefixAxis(F, sh.ff, zero)
		for _, err := range []error{
			norm("attn_norm", resFree, normMul, true),
			mat("attn_q", types.base, qRows, resFree, 1),
			mat("attn_k", types.base, kvRows, resFree, 1),
			mat("attn_v", types.more(b, ig.typeLayers), kvRows, resFree, 1),
			mat("attn_output", types.base, woRows, woCols, l.scale),
			// q keeps the sqrt(D/d) its norm over D gives it (1/sqrt(D)
			// needs it); the cached keys are the source's.
			norm("attn_q_norm", headDims, 1, false),
			norm("attn_k_norm", headDims, float32(math.Sqrt(float64(l.d)/float64(l.D))), false),
			norm("ffn_norm", resFree, normMul, true),
			mat("ffn_gate", types.base, ffRows, resFree, 1),
			mat("ffn_up", types.base, ffRows, resFree, 1),
			mat("ffn_down", types.more(b, ig.typeLayers), woRows, downCols, l.scale),
		} {
			if err != nil {
				return fmt.Errorf("block %d: %w", b, err)
			}
		}
	}

	return nil
}
