package main

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/tandem-run/tandem/engine/gguf"
	"github.com/tandem-run/tandem/kernels/quant"
)

// targetInflation is what an EAGLE-3 inflation reads from the inflated
// target it will serve: the layout of the residual stream (its fc reads the
// target's captured block inputs, its embedding and head are the target's)
// and the tokenizer.
type targetInflation struct {
	f         *gguf.File
	n, N      int
	vocab     int // the target's rows
	srcVocab  int
	scale     float32
	bias      int
	biasValue float32
}

func openInflatedTarget(path string) (*targetInflation, error) {
	f, err := gguf.Open(path)
	if err != nil {
		return nil, err
	}
	t := &targetInflation{f: f}
	fail := func(format string, a ...any) (*targetInflation, error) {
		f.Close()
		return nil, fmt.Errorf("%s: %s", path, fmt.Sprintf(format, a...))
	}
	uints := []struct {
		key string
		dst *int
	}{{keySrcEmbd, &t.n}, {keyBiasLane, &t.bias}, {keySrcVocab, &t.srcVocab}}
	for _, u := range uints {
		v, ok := f.Uint(u.key)
		if !ok {
			return fail("%s missing: not a file synthmodel -inflate wrote", u.key)
		}
		*u.dst = int(v)
	}
	v, ok := f.ArchUint("embedding_length")
	if !ok {
		return fail("no embedding_length")
	}
	t.N = int(v)
	sc, ok1 := f.Float(keyScale)
	bv, ok2 := f.Float(keyBiasValue)
	if !ok1 || !ok2 {
		return fail("%s or %s missing", keyScale, keyBiasValue)
	}
	t.scale, t.biasValue = float32(sc), float32(bv)
	tokens, _ := f.Strings("tokenizer.ggml.tokens")
	t.vocab = len(tokens)
	if t.bias >= t.N || t.n >= t.N || t.vocab < t.srcVocab {
		return fail("inconsistent inflation keys")
	}
	return t, nil
}

// inflateEagle3 lays out src, an EAGLE-3 draft that borrows its target's
// embedding and head, for target (an inflated copy of its target) at shape
// sh: the layer gets the shape's heads and FFN, and its width is the
// target's. The residual stream follows the target's layout: s_r times the
// source's, the bias lane at the same dim with the same c (fc copies it
// from the first captured state; the layer's blocks never write it), so
// the epsilon that keeps the target's norms exact keeps the draft's too.
//
// With draftVocab below the target's vocabulary the draft gets a head of
// its own over that many target ids and the d2t map, as real EAGLE-3
// drafts have (SpecForge's for Qwen3 and Llama 3: draft_vocab_size
// 32,000 against 151,936 and 128,256): a drafted token then reads a
// 32,000-row head, not the target's whole one. Its ids are every token
// of the source's vocabulary (so the draft proposes what the source
// draft does) and then padding ids, whose rows are the target's (they
// lose in the draft as in the target); the rows are the target's head
// rows, in the head type of ftype.
func inflateEagle3(src *srcModel, target *targetInflation, sh shape, shapeName, ftype string, draftVocab int, rng *rand.Rand) (*gguf.Writer, error) {
	if src.arch != "eagle3" {
		return nil, fmt.Errorf("the draft is %q, not eagle3", src.arch)
	}
	for _, own := range []string{"token_embd.weight", "output.weight", "d2t", "enc.output_norm.weight"} {
		if _, ok := src.f.Tensor(own); ok {
			return nil, fmt.Errorf("the draft has %s: only drafts that borrow the target's embedding and head (and fuse unnormalised states) are inflated", own)
		}
	}
	layers, ok := src.f.Int32s("eagle3.target_layers")
	th, _ := src.f.ArchUint("target_hidden_size")
	switch {
	case !ok || len(layers) == 0:
		return nil, fmt.Errorf("the draft lists no eagle3.target_layers")
	case src.embd != target.n || int(th) != target.n:
		return nil, fmt.Errorf("the draft is %d wide and reads states of %d; its target's source is %d wide", src.embd, th, target.n)
	case src.vocab != target.srcVocab:
		return nil, fmt.Errorf("the draft's vocabulary is %d tokens, its target's source %d", src.vocab, target.srcVocab)
	case sh.embd != target.N:
		return nil, fmt.Errorf("shape width %d, the inflated target's %d: inflate the draft at its target's shape", sh.embd, target.N)
	case draftVocab > 0 && draftVocab < target.vocab && draftVocab < target.srcVocab:
		return nil, fmt.Errorf("a draft vocabulary of %d tokens leaves out some of the source's %d", draftVocab, target.srcVocab)
	}
	types := typesFor(ftype, shape{tied: false})
	if err := checkFits(src, sh, types.base); err != nil {
		return nil, err
	}
	l := &layout{n: target.n, N: target.N, d: src.headDim, D: sh.headDim, scale: target.scale,
		bias: target.bias, biasValue: target.biasValue, gain: laneGain(target.N)}
	var err error
	if l.qSlot, l.qLive, l.kvSlot, err = mapHeads(src.heads, src.kvHeads, sh.heads, sh.kvHeads); err != nil {
		return nil, err
	}
	c := float64(l.biasValue)
	l.eps = float32((float64(l.scale*l.scale)*float64(l.n)*src.eps - c*c) / float64(l.N))
	if l.eps <= 0 {
		return nil, fmt.Errorf("the target's bias lane %g leaves the draft's epsilon %g (the draft's own is %g)", c, l.eps, src.eps)
	}

	ig := &inflater{w: &gguf.Writer{}, rng: rng, types: types, pools: map[string]*randomPool{}}
	name, _ := src.f.String("general.name")
	set := []gguf.KV{
		{Key: "general.name", Value: fmt.Sprintf("%s inflated to %s %s", name, shapeName, ftype)},
		{Key: "general.file_type", Value: fileTypes[ftype]},
		{Key: "general.quantization_version", Value: uint32(2)},
	}
	set = append(set, archKV("eagle3", src.layers, sh, l, src.ropeBase)...)
	set = append(set,
		gguf.KV{Key: "eagle3.rope.dimension_count", Value: uint32(l.D)},
		gguf.KV{Key: "eagle3.vocab_size", Value: uint32(target.vocab)},
		gguf.KV{Key: "eagle3.target_hidden_size", Value: uint32(target.N)},
		gguf.KV{Key: keySource, Value: name},
	)
	if err := copyMetadata(ig.w, src.f, set, src.vocab, target.vocab); err != nil {
		return nil, err
	}
	if err := addEagle3Tensors(ig, src, sh, l, len(layers)); err != nil {
		return nil, err
	}
	if draftVocab > 0 && draftVocab < target.vocab {
		if err := addDraftHead(ig.w, target, types.head, draftVocab); err != nil {
			return nil, err
		}
	}
	return ig.w, nil
}

// addDraftHead gives the draft its own head over target ids 0..rows-1
// (the source's tokens first, then padding) and the d2t map that says so:
// the target's head rows (its embedding's where tied), re-encoded as typ
// where the target stores another type.
func addDraftHead(w *gguf.Writer, target *targetInflation, typ quant.Type, rows int) error {
	info, ok := target.f.Tensor("output.weight")
	if !ok {
		info, ok = target.f.Tensor("token_embd.weight")
	}
	if !ok || len(info.Dims) != 2 || int(info.Dims[0]) != target.N || int(info.Dims[1]) < rows {
		return fmt.Errorf("the target has no head of %d by at least %d", target.N, rows)
	}
	data, err := target.f.TensorData(info)
	if err != nil {
		return err
	}
	srcRow, err := info.Type.RowBytes(int64(target.N))
	if err != nil {
		return err
	}
	dstRow, err := typ.RowBytes(int64(target.N))
	if err != nil {
		return err
	}
	// A copy: the writer runs after the target file may be closed.
	data = slices.Clone(data[:int64(rows)*srcRow])
	d2t := make([]byte, 0, 8*rows)
	for id := range rows {
		d2t = binary.LittleEndian.AppendUint64(d2t, uint64(id))
	}
	if err := w.AddTensor("d2t", quant.I64, []int64{int64(rows)}, d2t); err != nil {
		return err
	}
	return w.AddTensorFunc("output.weight", typ, []int64{int64(target.N), int64(rows)}, func(out io.Writer) error {
		if typ == info.Type {
			_, err := out.Write(data)
			return err
		}
		row, buf := make([]float32, target.N), make([]byte, dstRow)
		for r := range rows {
			if err := quant.Dequantize(info.Type, data[int64(r)*srcRow:int64(r+1)*srcRow], row); err != nil {
				return fmt.Errorf("output.weight row %d: %w", r, err)
			}
			if err := quant.Quantize(typ, row, buf); err != nil {
				return fmt.Errorf("output.weight row %d: %w", r, err)
			}
			if _, err := out.Write(buf); err != nil {
				return err
			}
		}
		return nil
	})
}

func addEagle3Tensors(ig *inflater, src *srcModel, sh shape, l *layout, fused int) error {
	n, d, F := src.embd, src.headDim, src.ff
	qDim, kvDim := src.heads*d, src.kvHeads*d
	types := ig.types
	normMul := float32(math.Sqrt(float64(l.n) / float64(l.N)))
	resFree := l.residualAxis(free)

	norm := func(k string, lane float32) error {
		v, err := src.tensor(k, n)
		if err != nil {
			return err
		}
		p := padVector(v, resFree, normMul)
		p[l.bias] = lane
		return addVector(ig.w, k, p)
	}
	mat := func(k string, srcDims []int, rows, cols axis, scale float32) error {
		v, err := src.tensor(k, srcDims...)
		if err != nil {
			return err
		}
		m := &matrix{name: k, typ: types.base, rows: rows, cols: cols, src: v, srcCols: srcDims[0],
			scale: scale, pool: ig.pool(k, stdOf(v))}
		return m.add(ig)
	}

	// fc: each captured state's real dims to the source's columns, its
	// lane to zero, except that the lane of the first copies c into g's.
	fcCols := newAxis(fused*l.N, free)
	for j := range fused {
		for i := range n {
			fcCols[j*l.N+i] = j*n + i
		}
		fcCols[j*l.N+l.bias] = zero
	}
	fcRows := l.residualAxis(zero)
	fc := func() error {
		v, err := src.tensor("fc.weight", fused*n, n)
		if err != nil {
			return err
		}
		m := &matrix{name: "fc.weight", typ: types.base, rows: fcRows, cols: fcCols, src: v, srcCols: fused * n,
			scale: 1, pool: ig.pool("fc", stdOf(v)),
			special: func(r int, row []float32) {
				if r == l.bias {
					row[l.bias] = 1
				}
			}}
		return m.add(ig)
	}

	// The layer's input is [RMSNorm(embedding) | RMSNorm(g)], N each.
	inCols := newAxis(2*l.N, free)
	for i := range n {
		inCols[i], inCols[l.N+i] = i, n+i
	}
	attnScale := float32(math.Sqrt(float64(l.D) / float64(l.d))) // no Q/K norms to carry 1/sqrt(D)'s lack
	for _, err := range []error{
		fc(),
		norm("blk.0.attn_norm.weight", 0),
		norm("blk.0.attn_norm_2.weight", 0),
		mat("blk.0.attn_q.weight", []int{2 * n, qDim}, l.headAxis(l.qSlot, zero, free), inCols, attnScale),
		mat("blk.0.attn_k.weight", []int{2 * n, kvDim}, l.headAxis(l.kvSlot, zero, free), inCols, 1),
		mat("blk.0.attn_v.weight", []int{2 * n, kvDim}, l.headAxis(l.kvSlot, zero, free), inCols, 1),
		mat("blk.0.attn_output.weight", []int{qDim, n}, l.residualAxis(zero), l.headAxis(l.liveSlots(), free, zero), l.scale),
		norm("blk.0.ffn_norm.weight", 0),
		mat("blk.0.ffn_gate.weight", []int{n, F}, prefixAxis(F, sh.ff, free), resFree, 1),
		mat("blk.0.ffn_up.weight", []int{n, F}, prefixAxis(F, sh.ff, free), resFree, 1),
		mat("blk.0.ffn_down.weight", []int{F, n}, l.residualAxis(zero), prefixAxis(F, sh.ff, zero), l.scale),
		norm("output_norm.weight", l.gain), // padding tokens lose in the draft too
	} {
		if err != nil {
			return err
		}
	}
	return nil
}
