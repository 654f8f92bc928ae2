// Package workspace sizes the scratch a CUDA backend (kernels/cuda) keeps
// of its own, beside the buffers its callers allocate: 8-bit copies of
// activations for the integer products, attention partial results and
// counters, top-k candidates. A backend's programs run one after another on
// its one stream, so it keeps one region of each kind, sized for the
// largest use, for all of them.
//
// It is a package of its own, plain arithmetic with no driver behind it, so
// that the memory planner (engine/plan) counts that scratch from a model's
// shapes with the very formulas the backend sizes it by.
package workspace

import "github.com/tandem-run/tandem/kernels/quant"

// Region is one kind of scratch.
type Region int

const (
	Q8        Region = iota // activations quantized to 8 bits for integer products (two copies)
	Aligned                 // activations copied to 16-byte alignment, or to F16 for the prefill tiles of F16 weights
	Attention               // attention partial results, per key split
	Counters                // attention splits finished per (head, query), or rows per group of 32 of a fused gate/up product; left at zero
	TopK                    // top-k candidates per chunk
	MoE                     // a mixture-of-experts op's routing, its pairs' activations and outputs (MoELayout)
	NumRegions
)

// Sizes are the bytes of each region, each a multiple of Align.
type Sizes [NumRegions]int64

// Align is the alignment of every region's start.
const Align = 256

func round(n int64) int64 { return (n + Align - 1) &^ (Align - 1) }

// Total is the bytes of all regions, laid end to end.
func (s Sizes) Total() int64 {
	var n int64
	for _, v := range s {
		n += v
	}
	return n
}

// Offset is where region r starts when the regions are laid end to end.
func (s Sizes) Offset(r Region) int64 {
	var n int64
	for _, v := range s[:r] {
		n += v
	}
	return n
}

// Max is the larger of s and o, region by region.
func (s Sizes) Max(o Sizes) Sizes {
	for r := range s {
		s[r] = max(s[r], o[r])
	}
	return s
}

// Covers reports whether every region of s is at least o's.
func (s Sizes) Covers(o Sizes) bool {
	return s.Max(o) == s
}

// MaxVectorRows is the most rows a product may run with the
// matrix-vector kernels (one warp a weight row, the batch in registers);
// larger batches take the tensor-core kernels, or, for weight types
// without one, the tiled kernels, which read activations as they are.
const MaxVectorRows = 8

// VerifyRows is the most rows a pass of the CUDA backend computes as that
// many one-row passes would, bit for bit (products on the kernels that
// keep decode's order, attention on decode's kernel): verification of
// drafted tokens. Above, the prefill kernels take the rows.
const VerifyRows = 16

// QuantizesActivations reports whether a product with weights of type t
// reads its activations quantized to 8 bits, at any batch size (for Q4_K,
// when the weights are 16-byte aligned, as whole uploaded tensors are).
func QuantizesActivations(t quant.Type) bool {
	return t == quant.Q8_0 || t == quant.Q6_K || t == quant.Q4_K
}

// Q8Pitch is the rows a group of 32 columns holds in the 8-bit layout:
// rows, rounded up to even above one, so that a lane of a tensor-core tile
// reads two neighbouring rows' scales in one 16-byte load (q8_pitch in
// src/common.cuh).
func Q8Pitch(rows int) int {
	if rows <= 1 {
		return 1
	}
	return (rows + 1) &^ 1
}

// Q8Layout is rows of n activations in 8 bits, group-major (each group of
// 32 columns holds Q8Pitch(rows) rows of 32 values): the values, padded to
// 16 bytes, then a pair of float32 (scale, sum) per group and row, from
// scales on.
func Q8Layout(rows, n int) (scales, bytes int64) {
	p := int64(Q8Pitch(rows))
	scales = (p*int64(n) + 15) &^ 15
	return scales, round(scales + p*int64(n/32)*8)
}

// TileRows is the most rows a product runs with the few-row tensor-core
// tiles; larger ones take the prefill tiles, which for the weight types of
// CopiesToHalf read an F16 copy of the activations (HalfBytes, in the
// Aligned region).
const TileRows = 32

// CopiesToHalf reports whether a product of more than TileRows rows with
// weights of type t may read an F16 copy of its activations: F16 weights
// in every prefill tile, Q4_K and Q6_K in the cp.async ones (sm_80 and
// later).
func CopiesToHalf(t quant.Type) bool {
	return t == quant.F16 || t == quant.Q4_K || t == quant.Q6_K
}

// HalfBytes is an F16 copy of rows of n float32, each row 16-byte aligned.
func HalfBytes(rows, n int) int64 {
	return round(int64(rows) * int64((n+7)&^7) * 2)
}

// AlignedBytes is a 16-byte-aligned copy of rows of n float32.
func AlignedBytes(rows, n int) int64 {
	return round(int64(rows) * int64((n+3)&^3) * 4)
}

// Attention cuts each (head, query) over up to MaxSplits slices of the
// cache, of at least SplitKeys keys each, so that decode, one query, still
// gives every multiprocessor two blocks.
const (
	MaxSplits = 64
	SplitKeys = 128
	// MaxMultiprocessors caps the multiprocessor count the split uses, so
	// that For bounds the partials without knowing the GPU (an H200 has 132).
	MaxMultiprocessors = 256
)

// AttentionSplits is the slices each of units (heads x queries) attention
// items is cut into, for a cache of keys rows on a GPU of multiprocessors.
func AttentionSplits(units, keys, multiprocessors int) int {
	sm := min(multiprocessors, MaxMultiprocessors)
	splits := (2*sm + units - 1) / units
	return max(1, min(splits, MaxSplits, (keys+SplitKeys-1)/SplitKeys))
}

// Attention over several query rows takes up to RowUnits (query row,
// query head) items in a block, all of one KV head, and cuts the cache in
// slices of at least RowSplitKeys keys.
const (
	RowUnits     = 64
	RowSplitKeys = 64
)

// AttentionRowSplits is the slices each block of the several-row
// attention takes, for blocks blocks over a cache of keys rows.
func AttentionRowSplits(blocks, keys, multiprocessors int) int {
	sm := min(multiprocessors, MaxMultiprocessors)
	splits := (2*sm + blocks - 1) / blocks
	return max(1, min(splits, MaxSplits, (keys+RowSplitKeys-1)/RowSplitKeys))
}

// AttentionBytes is the partial results of units items in splits slices:
// per slice, headDim sums, the running maximum and the weight total.
func AttentionBytes(units, splits, headDim int) int64 {
	return round(int64(units) * int64(splits) * int64(headDim+2) * 4)
}

// CounterBytes is one int32 counter per item.
func CounterBytes(units int) int64 { return round(int64(units) * 4) }

// TopKBytes is candidates (value, index) pairs per row.
func TopKBytes(rows, candidates int) int64 { return round(int64(rows) * int64(candidates) * 8) }

// MoELayout is where a mixture-of-experts op of rows rows, used experts
// a row out of experts, width n and expert width ff keeps its scratch, in
// bytes from the region's start: per row its router logits; per routed pair (row*used + rank) its
// expert and weight; per expert its pair count and first slot, the
// experts in use and their number; the pairs sorted by expert (slot ->
// pair, pair -> slot); then per slot the SwiGLU activations (ff floats)
// and the expert's output (n floats). Bytes is the region's size.
type MoELayout struct {
	Logits, IDs, Weights, Count, First, Active, NActive, Order, Slot, Act, Out, Bytes int64
}

// MoEFor lays out the scratch of a mixture-of-experts op.
func MoEFor(rows, used, experts, n, ff int) MoELayout {
	pairs := int64(rows) * int64(used)
	var l MoELayout
	at := int64(0)
	take := func(bytes int64) int64 {
		o := at
		at += round(bytes)
		return o
	}
	l.Logits = take(4 * int64(rows) * int64(experts))
	l.IDs = take(4 * pairs)
	l.Weights = take(4 * pairs)
	l.Count = take(4 * int64(experts))
	l.First = take(4 * int64(experts))
	l.Active = take(4 * int64(experts))
	l.NActive = take(4)
	l.Order = take(4 * pairs)
	l.Slot = take(4 * pairs)
	l.Act = take(4 * pairs * int64(ff))
	l.Out = take(4 * pairs * int64(n))
	l.Bytes = at
	return l
}

// Pass is the largest forward pass a model runs on a device.
type Pass struct {
	Rows int // most tokens in one pass
	Keys int // KV cache rows
	// Heads and HeadDim are the widest attention: query heads on the
	// device and their size (0: no attention there).
	Heads, HeadDim int
	// Quantized is the widest activation an integer product reads (see
	// QuantizesActivations; 0: none).
	Quantized int
	// Half is the widest activation a product with weights of a type of
	// CopiesToHalf reads (0: none): passes of more than TileRows rows copy
	// it to F16.
	Half int
	// Experts > 0: the blocks' FFNs are mixtures of Experts experts of
	// width ExpertFF, ExpertsUsed a row, over a residual of width Embd.
	Experts, ExpertsUsed, ExpertFF, Embd int
}

// For is the workspace that holds whatever a backend compiles for passes
// of p's shapes with 1 to p.Rows rows, on any GPU. Activations are taken
// as the engine lays them out, packed rows of whole 32-value groups, which
// need no aligned copy (but passes of more than TileRows rows copy the
// inputs of F16 products to F16); top-k runs on the host. The Q8 region holds one
// copy of p.Rows rows, or two of up to MaxVectorRows: a fused gate/up
// matrix-vector product writes the quantized SwiGLU of its outputs beside
// the copy of its activations it reads, and counts its finished rows per
// group of 32.
func For(p Pass) Sizes {
	var s Sizes
	if p.Quantized > 0 {
		_, fused := Q8Layout(min(p.Rows, MaxVectorRows), p.Quantized)
		_, all := Q8Layout(p.Rows, p.Quantized)
		s[Q8] = max(2*fused, all)
		s[Counters] = CounterBytes(p.Quantized / 32)
	}
	if p.Half > 0 && p.Rows > TileRows {
		s[Aligned] = HalfBytes(p.Rows, p.Half)
	}
	if p.Experts > 0 {
		s[MoE] = MoEFor(p.Rows, p.ExpertsUsed, p.Experts, p.Embd, p.ExpertFF).Bytes
	}
	if p.Heads > 0 && p.HeadDim > 0 {
		most := p.Heads * p.Rows
		s[Counters] = max(s[Counters], CounterBytes(most))
		// One row: items (heads) are cut in slices; below 2 x
		// MaxMultiprocessors items the splits make up the difference,
		// above, every item is one slice.
		for u := 1; u <= min(p.Heads, 2*MaxMultiprocessors); u++ {
			s[Attention] = max(s[Attention], AttentionBytes(u, AttentionSplits(u, p.Keys, MaxMultiprocessors), p.HeadDim))
		}
		s[Attention] = max(s[Attention], AttentionBytes(p.Heads, AttentionSplits(p.Heads, p.Keys, MaxMultiprocessors), p.HeadDim))
		// Up to VerifyRows rows: decode's kernel, each row cut as one is.
		if r := min(p.Rows, VerifyRows); r > 1 {
			for u := 1; u <= p.Heads; u++ {
				s[Attention] = max(s[Attention], AttentionBytes(u*r, AttentionSplits(u, p.Keys, MaxMultiprocessors), p.HeadDim))
			}
		}
		// More rows: u = heads x rows items in at least u/RowUnits blocks,
		// each cut in AttentionRowSplits slices, the most for the fewest
		// blocks; from 2*RowUnits*MaxMultiprocessors items on every block
		// is one slice, and the most items need the most.
		for rows := VerifyRows + 1; rows <= p.Rows && rows <= 2*RowUnits*MaxMultiprocessors; rows++ {
			for h := 1; h <= p.Heads; h++ {
				s[Attention] = max(s[Attention], RowAttentionBytes(h*rows, p.Keys, MaxMultiprocessors, p.HeadDim))
			}
		}
		if p.Rows > VerifyRows {
			s[Attention] = max(s[Attention], RowAttentionBytes(most, p.Keys, MaxMultiprocessors, p.HeadDim))
		}
	}
	return s
}

// RowAttentionBytes bounds the partial results of u items of the
// several-row attention: they take at least ceil(u/RowUnits) blocks.
func RowAttentionBytes(u, keys, multiprocessors, headDim int) int64 {
	blocks := (u + RowUnits - 1) / RowUnits
	return AttentionBytes(u, AttentionRowSplits(blocks, keys, multiprocessors), headDim)
}
