package main

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/tandem-run/tandem/engine/gguf"
)

// A real DFlash draft's shape. z-lab's Qwen3-4B-DFlash-b16 and
// Qwen3-8B-DFlash-b16 (the drafts llama.cpp's dflash GGUFs are converted
// from) are qwen3 stacks of 5 blocks at their target's width, heads and
// FFN, trained on blocks of 16, fusing the states of 5 target blocks. The
// blocks are DFlash's rule, evenly spaced from block 1 to the fourth from
// last: round(1 + i*(L-4)/(k-1)) for i < k (36 blocks: 1, 9, 17, 25, 33;
// 28: 1, 7, 13, 19, 25; 64 blocks and 10 taps: the Qwen3-32B draft's
// 1, 8, 14, 21, 28, 34, 41, 48, 54, 61). Those are Hugging Face
// hidden-state indices, whose 0 is the embedding: llama.cpp's converter
// adds one, so dflash.target_layers reads the inputs of blocks
// 2, 10, 18, 26, 34 of Qwen3-8B. The smaller shapes have no released
// draft; they get the same recipe.
const (
	dflashLayers = 5
	dflashBlock  = 16
	dflashTaps   = 5
)

// dflashTargetLayers is dflash.target_layers of a draft of k taps for a
// target of blocks blocks.
func dflashTargetLayers(blocks, k int) []int {
	out := make([]int, k)
	for i := range out {
		out[i] = 1 + int(math.Round(1+float64(i)*float64(blocks-4)/float64(k-1)))
	}
	return out
}

// inflatedTaps is the inflated draft's target_layers: the source's, which
// carry its function, and as many of the real draft's as make the real
// count (the last ones first: they are not the source's early blocks),
// ascending. srcAt maps each to the source's tap it reads, or -1.
func inflatedTaps(src []int, blocks int) (taps, srcAt []int) {
	taps = slices.Clone(src)
	real := dflashTargetLayers(blocks, dflashTaps)
	for i := len(real) - 1; i >= 0 && len(taps) < dflashTaps; i-- {
		if !slices.Contains(taps, real[i]) {
			taps = append(taps, real[i])
		}
	}
	slices.Sort(taps)
	for _, t := range taps {
		srcAt = append(srcAt, slices.Index(src, t))
	}
	return taps, srcAt
}

// inflateDFlash lays out src, a DFlash draft that borrows its target's
// embedding and head, for target (an inflated copy of its target) at the
// real draft's shape for target shape sh: dflashLayers blocks at the
// target's width, heads and FFN, the source's block first and identities
// after it, reading dflashTaps target blocks, blocks of dflashBlock.
//
// The residual stream follows the target's layout, as EAGLE-3's does:
// s_r times the source's, the bias lane at the same dim with the same c,
// so the epsilon that keeps the target's norms exact keeps the draft's
// too. The encoder: fc reads the source's taps' real dims with the
// source's weights (the states arrive times s_r), the other taps and
// every lane through zero columns, except that the lane of g before its
// norm copies c from the first source tap's, so enc.output_norm over the
// padded width sees the source's mean square plus epsilon, times s_r^2
// n/N; its weights sqrt(n/N) times the source's (0 on the lane) then give
// the source's g exactly, which every block's K and V read (their columns
// past n only ever meet zeros). The blocks are the target's blocks'
// layout (addBlocks): their norms see the stream as the target's do.
func inflateDFlash(src *srcModel, target *targetInflation, sh shape, shapeName, ftype string, rng *rand.Rand) (*gguf.Writer, error) {
	if src.arch != "dflash" {
		return nil, fmt.Errorf("the draft is %q, not dflash", src.arch)
	}
	for _, own := range []string{"token_embd.weight", "output.weight", "d2t"} {
		if _, ok := src.f.Tensor(own); ok {
			return nil, fmt.Errorf("the draft has %s: only drafts that borrow the target's embedding and head are inflated", own)
		}
	}
	srcTaps32, ok := src.f.Int32s("dflash.target_layers")
	blocks, _ := target.f.ArchUint("block_count")
	var srcTaps []int
	for _, t := range srcTaps32 {
		srcTaps = append(srcTaps, int(t))
	}
	switch {
	case !ok || len(srcTaps) == 0:
		return nil, fmt.Errorf("the draft lists no dflash.target_layers")
	case slices.Max(srcTaps) >= int(blocks):
		return nil, fmt.Errorf("the draft reads block %d of a %d-block target", slices.Max(srcTaps), blocks)
	case src.embd != target.n:
		return nil, fmt.Errorf("the draft is %d wide; its target's source is %d wide", src.embd, target.n)
	case src.vocab != target.srcVocab:
		return nil, fmt.Errorf("the draft's vocabulary is %d tokens, its target's source %d", src.vocab, target.srcVocab)
	case sh.embd != target.N:
		return nil, fmt.Errorf("shape width %d, the inflated target's %d: inflate the draft at its target's shape", sh.embd, target.N)
	case sh.layers != int(blocks):
		return nil, fmt.Errorf("shape of %d blocks, the inflated target's %d", sh.layers, blocks)
	}
	taps, srcAt := inflatedTaps(srcTaps, int(blocks))
	ds := shape{embd: sh.embd, layers: max(dflashLayers, src.layers), heads: sh.heads, kvHeads: sh.kvHeads,
		headDim: sh.headDim, ff: sh.ff, vocab: target.vocab}
	types := typesFor(ftype, shape{tied: false})
	if err := checkFits(src, ds, types.base); err != nil {
		return nil, err
	}
	l := &layout{n: target.n, N: target.N, d: src.headDim, D: ds.headDim, neox: true, scale: target.scale,
		bias: target.bias, biasValue: target.biasValue, gain: laneGain(target.N)}
	var err error
	if l.qSlot, l.qLive, l.kvSlot, err = mapHeads(src.heads, src.kvHeads, ds.heads, ds.kvHeads); err != nil {
		return nil, err
	}
	c := float64(l.biasValue)
	l.eps = float32((float64(l.scale*l.scale)*float64(l.n)*src.eps - c*c) / float64(l.N))
	if l.eps <= 0 {
		return nil, fmt.Errorf("the target's bias lane %g leaves the draft's epsilon %g (the draft's own is %g)", c, l.eps, src.eps)
	}

	ig := &inflater{w: &gguf.Writer{}, rng: rng, types: types, typeLayers: ds.layers, pools: map[string]*randomPool{}}
	name, _ := src.f.String("general.name")
	taps32 := make([]int32, len(taps))
	for i, t := range taps {
		taps32[i] = int32(t)
	}
	set := []gguf.KV{
		{Key: "general.name", Value: fmt.Sprintf("%s inflated to %s %s", name, shapeName, ftype)},
		{Key: "general.file_type", Value: fileTypes[ftype]},
		{Key: "general.quantization_version", Value: uint32(2)},
	}
	set = append(set, archKV("dflash", ds.layers, ds, l, src.ropeBase)...)
	set = append(set,
		gguf.KV{Key: "dflash.rope.dimension_count", Value: uint32(l.D)},
		gguf.KV{Key: "dflash.target_layers", Value: taps32},
		gguf.KV{Key: "dflash.block_size", Value: uint32(dflashBlock)},
		gguf.KV{Key: keySource, Value: name},
	)
	if err := copyMetadata(ig.w, src.f, set, src.vocab, target.vocab); err != nil {
		return nil, err
	}
	if err := addDFlashEncoder(ig, src, l, len(srcTaps), srcAt); err != nil {
		return nil, err
	}
	if err := addBlocks(ig, src, ds, l, ds.layers); err != nil {
		return nil, err
	}
	outNorm, err := src.tensor("output_norm.weight", src.embd)
	if err != nil {
		return nil, err
	}
	on := padVector(outNorm, l.residualAxis(free), float32(math.Sqrt(float64(l.n)/float64(l.N))))
	on[l.bias] = l.gain // padding tokens lose in the draft too
	return ig.w, addVector(ig.w, "output_norm.weight", on)
}

// addDFlashEncoder writes fc and enc.output_norm for the inflated taps
// (srcAt: the source tap each reads, or -1) of a source fusing srcTaps.
func addDFlashEncoder(ig *inflater, src *srcModel, l *layout, srcTaps int, srcAt []int) error {
	n := src.embd
	fcCols := newAxis(len(srcAt)*l.N, free)
	lane := -1 // the column of the first source tap's lane
	for j, s := range srcAt {
		for i := range n {
			fcCols[j*l.N+i] = zero
			if s >= 0 {
				fcCols[j*l.N+i] = s*n + i
			}
		}
		fcCols[j*l.N+l.bias] = zero
		if s >= 0 && lane < 0 {
			lane = j*l.N + l.bias
		}
	}
	v, err := src.tensor("fc.weight", srcTaps*n, n)
	if err != nil {
		return err
	}
	fc := &matrix{name: "fc.weight", typ: ig.types.base, rows: l.residualAxis(zero), cols: fcCols, src: v, srcCols: srcTaps * n,
		scale: 1, pool: ig.pool("fc", stdOf(v)),
		special: func(r int, row []float32) {
			if r == l.bias {
				row[lane] = 1
			}
		}}
	if err := fc.add(ig); err != nil {
		return err
	}
	encNorm, err := src.tensor("enc.output_norm.weight", n)
	if err != nil {
		return err
	}
	p := padVector(encNorm, l.residualAxis(free), float32(math.Sqrt(float64(l.n)/float64(l.N))))
	p[l.bias] = 0
	return addVector(ig.w, "enc.output_norm.weight", p)
}
