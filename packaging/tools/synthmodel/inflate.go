package main

// Inflation: a trained small model written at a real model's shape, with
// the small model's next-token function.
//
// The source lives in a zero-padded corner of every tensor. Every tensor
// of the shape is present, with its real type, so a token costs the bytes
// and the work it costs a real model of that shape; entries that only ever
// meet zeros are random at the source weights' scale, so quantized blocks
// look like a trained model's. What keeps the function, trap by trap:
//
//   - RMSNorm over a padded width. The padded dims of the residual stream
//     are zero, so the mean square over N dims is n/N of the source's, and
//     one epsilon serves two norms of different padding (the residual's
//     n -> N and the Q/K heads' d -> D). The residual is scaled by s_r (a
//     power of two: exact in every type) and one padded dim, the bias lane
//     b, holds a constant c in every embedding row that no block writes.
//     With c^2 + N*eps = s_r^2*n*eps_src the residual norm sees exactly the
//     source's mean square plus epsilon, scaled; eps = eps_src*d/D makes the
//     Q/K norms exact too (c is rounded by the embedding's type, and eps is
//     then solved from the rounded c: the residual norms stay exact and the
//     Q/K norms' epsilon is off by about 1e-3 of itself). Norm weights take
//     sqrt(n/N), in F32, and the blocks add s_r times the source's output
//     (attn_output and ffn_down scaled by s_r).
//   - The bias lane also answers the vocabulary trap. The real shapes have
//     151,936 embedding rows, the demo tokenizer 8,192 tokens. The head's
//     padding rows put -M on the lane and output_norm gives the lane a gain
//     G, so a padding token's logit is about -M*G*c/rms: thousands below
//     every real logit. Padding rows never win an argmax and take no
//     probability when sampling, which copies of real rows (ties) would:
//     they would share every token's mass. Real rows hold 0 on the lane;
//     inside the blocks the lane is cut by zero attn_norm and ffn_norm
//     weights. The lane sits at the first multiple of 256 past n, alone in
//     its activation block, so 8-bit activation quantization of the head
//     (Q8_K blocks of 256) does not coarsen the real values; G keeps the
//     lane below 32768 so half-precision activations hold it. The padded
//     tokens are [PADi] of type UNUSED, as Hugging Face conversions pad
//     Qwen's vocabulary; engine/spec's compatibility check does not count
//     UNUSED tokens past the shared range.
//   - NEOX RoPE over padded heads: the source's pair (i, i+d/2) is placed at
//     (i, i+D/2), and the base raised to base^(D/d) so that pair i turns by
//     the same angle: base'^(-2i/D) = base^(-2i/d). Interleaved RoPE (the
//     EAGLE-3 layer) keeps pair i at (2i, 2i+1) with the same raised base.
//   - The attention scale 1/sqrt(D): the Q/K norms over D multiply q and k
//     by sqrt(D/d) each, so the K norm's weight takes sqrt(d/D) (the cached
//     keys are the source's) and q's extra sqrt(D/d) is exactly what
//     1/sqrt(D) lacks. The EAGLE-3 layer has no Q/K norms: its attn_q takes
//     sqrt(D/d), rounded to its type (a draft's rounding moves acceptance,
//     not output).
//   - GQA: the shape's groups may be smaller than the source's (the demo
//     target has 3 query heads per K/V head, Qwen3-0.6B 2): each source K/V
//     head is copied to as many K/V slots as its query heads need. A query
//     slot left over in such a group repeats one of the group's source
//     heads (mapHeads says why); query slots of the other K/V heads are
//     random, like every extra head. attn_output reads neither: their
//     columns are zero.
//   - Blocks past the source's count are identities: attn_output and
//     ffn_down all zero. Extra FFN units get zero columns in ffn_down. Rows
//     that write padded dims (of the residual or of a real head) are zero,
//     so the activations the next product quantizes hold exact zeros there.
//   - Quantized blocks mixing zero and non-zero entries: the source's
//     widths are multiples of 32 (n, d/2, the FFN), so zero regions fill
//     whole 32-value groups, which synth.Quantize keeps exactly zero (Q4_K:
//     scale and min 0; Q6_K and Q8_0: symmetric).
//   - Tied heads. Qwen3-0.6B, 1.7B and 4B tie the head to the embedding;
//     the demo target does not, and no padded layout lets one matrix be
//     both the source's embedding (read at the input, where every stored
//     dim enters the norms) and its head. The inflated file is therefore
//     untied: it has output.weight. A token reads the same bytes (the head
//     once, one embedding row), so decode speed is the real model's; the
//     file and the device memory grow by one vocab x width matrix (F16:
//     311 MB at 0.6B, 622 MB at 1.7B, 778 MB at 4B), and a head-mode plan
//     that would share a tied head's copy with the embedding counts both.
//     Q4_K_M gives the head Q6_K as llama.cpp gives a tied embedding.

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/tandem-run/tandem/engine/gguf"
	"github.com/tandem-run/tandem/engine/spec"
	"github.com/tandem-run/tandem/kernels/quant"
	"github.com/tandem-run/tandem/kernels/synth"
)

// Metadata keys an inflated target carries for the EAGLE-3 inflation (and
// for people reading the file).
const (
	keySource     = "synthmodel.inflate.source"
	keySrcEmbd    = "synthmodel.inflate.source_embedding_length"
	keySrcVocab   = "synthmodel.inflate.source_vocab_size"
	keyScale      = "synthmodel.inflate.residual_scale"
	keyBiasLane   = "synthmodel.inflate.bias_lane"
	keyBiasValue  = "synthmodel.inflate.bias_value"
	keyGain       = "synthmodel.inflate.bias_gain"
	keyPadLogitWt = "synthmodel.inflate.pad_weight"
)

// padWeight is -M, the head's weight on the bias lane for padding tokens.
const padWeight = -1024

// srcModel is the model being inflated. Sources are small: tensors are
// read whole, dequantized to float32.
type srcModel struct {
	f                                                *gguf.File
	arch                                             string
	embd, layers, heads, kvHeads, headDim, ff, vocab int
	ropeDims                                         int
	eps, ropeBase                                    float64
}

func openSource(path string) (*srcModel, error) {
	f, err := gguf.Open(path)
	if err != nil {
		return nil, err
	}
	s := &srcModel{f: f, arch: f.Arch()}
	for _, kv := range []struct {
		key string
		dst *int
	}{
		{"embedding_length", &s.embd}, {"block_count", &s.layers}, {"attention.head_count", &s.heads},
		{"feed_forward_length", &s.ff},
	} {
		v, ok := f.ArchUint(kv.key)
		if !ok || v == 0 || v > 1<<20 {
			f.Close()
			return nil, fmt.Errorf("%s: %s.%s missing or out of range", path, s.arch, kv.key)
		}
		*kv.dst = int(v)
	}
	s.kvHeads, s.headDim = s.heads, s.embd/s.heads
	if v, ok := f.ArchUint("attention.head_count_kv"); ok && v > 0 && v <= uint64(s.heads) {
		s.kvHeads = int(v)
	}
	if v, ok := f.ArchUint("attention.key_length"); ok && v > 0 && v <= 1<<12 {
		s.headDim = int(v)
	}
	s.ropeDims = s.headDim
	if v, ok := f.ArchUint("rope.dimension_count"); ok {
		s.ropeDims = int(v)
	}
	s.eps, s.ropeBase = 1e-5, 10000
	if v, ok := f.ArchFloat("attention.layer_norm_rms_epsilon"); ok {
		s.eps = v
	}
	if v, ok := f.ArchFloat("rope.freq_base"); ok {
		s.ropeBase = v
	}
	if tokens, ok := f.Strings("tokenizer.ggml.tokens"); ok {
		s.vocab = len(tokens)
	}
	switch {
	case s.heads%s.kvHeads != 0:
		err = fmt.Errorf("%d heads over %d KV heads", s.heads, s.kvHeads)
	case s.ropeDims != s.headDim:
		err = fmt.Errorf("RoPE on %d of %d head dims: partial rotation is not inflated", s.ropeDims, s.headDim)
	case s.vocab == 0:
		err = fmt.Errorf("no tokenizer.ggml.tokens")
	case s.eps <= 0:
		err = fmt.Errorf("RMSNorm epsilon %g: the bias lane needs one above 0", s.eps)
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}

// tensor reads a whole tensor as float32, checking its GGUF dims.
func (s *srcModel) tensor(name string, dims ...int) ([]float32, error) {
	info, ok := s.f.Tensor(name)
	if !ok {
		return nil, fmt.Errorf("source tensor %q missing", name)
	}
	if len(info.Dims) != len(dims) {
		return nil, fmt.Errorf("source tensor %q has shape %v, want %v", name, info.Dims, dims)
	}
	n := 1
	for i, d := range dims {
		if info.Dims[i] != int64(d) {
			return nil, fmt.Errorf("source tensor %q has shape %v, want %v", name, info.Dims, dims)
		}
		n *= d
	}
	data, err := s.f.TensorData(info)
	if err != nil {
		return nil, err
	}
	out := make([]float32, n)
	if err := quant.Dequantize(info.Type, data, out); err != nil {
		return nil, fmt.Errorf("source tensor %q: %w", name, err)
	}
	return out, nil
}

// layout says where the source sits in the shape.
type layout struct {
	n, N      int  // residual width: source, shape
	d, D      int  // head width
	neox      bool // RoPE pairs (i, i+d/2)
	scale     float32
	bias      int     // the bias lane's dim
	biasRaw   float32 // c, written into the embedding
	biasValue float32 // c as the embedding's type stores it
	eps       float32
	gain      float32 // output_norm's weight on the lane
	qSlot     []int   // shape query head -> source query head, or -1
	qLive     []bool  // attn_output reads the query head
	kvSlot    []int   // shape K/V head -> source K/V head, or -1
}

// roundUp rounds n up to a multiple of m.
func roundUp(n, m int) int { return (n + m - 1) / m * m }

// newTargetLayout sizes the residual scale, the bias lane and epsilon for
// src at shape sh whose embedding is stored as embdType.
func newTargetLayout(src *srcModel, sh shape, embdType quant.Type) (*layout, error) {
	l := &layout{n: src.embd, N: sh.embd, d: src.headDim, D: sh.headDim, neox: true}
	l.bias = roundUp(l.n, 256)
	switch {
	case l.bias >= l.N:
		return nil, fmt.Errorf("width %d leaves no 256-aligned lane past the source's %d", l.N, l.n)
	case l.D < l.d:
		return nil, fmt.Errorf("heads of %d are narrower than the source's %d", l.D, l.d)
	case l.d%2 != 0:
		return nil, fmt.Errorf("odd source head width %d", l.d)
	}
	var err error
	if l.qSlot, l.qLive, l.kvSlot, err = mapHeads(src.heads, src.kvHeads, sh.heads, sh.kvHeads); err != nil {
		return nil, err
	}
	// The smallest power of two with s^2*n >= 2*N*d/D leaves c^2 at least
	// eps_src*N*d/D.
	l.scale = 1
	for float64(l.scale*l.scale)*float64(l.n) < 2*float64(l.N)*float64(l.d)/float64(l.D) {
		l.scale *= 2
	}
	c := math.Sqrt(src.eps * (float64(l.scale*l.scale)*float64(l.n) - float64(l.N)*float64(l.d)/float64(l.D)))
	l.biasRaw = float32(c)
	if l.biasValue, err = stored(embdType, l.biasRaw); err != nil {
		return nil, err
	}
	l.eps = float32((float64(l.scale*l.scale)*float64(l.n)*src.eps - float64(l.biasValue)*float64(l.biasValue)) / float64(l.N))
	if l.eps <= 0 {
		return nil, fmt.Errorf("bias lane %g leaves epsilon %g", l.biasValue, l.eps)
	}
	l.gain = laneGain(l.N)
	return l, nil
}

// laneGain is the largest power of two G with G*sqrt(N) <= 32768: the lane
// after output_norm is G*c/rms, and rms > c/sqrt(N).
func laneGain(n int) float32 {
	g := float32(1)
	for 2*g*float32(math.Sqrt(float64(n))) <= 32768 {
		g *= 2
	}
	return g
}

// stored is v as a block of type t holding it alone decodes it.
func stored(t quant.Type, v float32) (float32, error) {
	x := make([]float32, t.BlockSize())
	x[0] = v
	rb, err := t.RowBytes(int64(len(x)))
	if err != nil {
		return 0, err
	}
	b := make([]byte, rb)
	if err := synth.Quantize(t, x, b); err != nil {
		return 0, err
	}
	if err := quant.Dequantize(t, b, x); err != nil {
		return 0, err
	}
	return x[0], nil
}

// mapHeads places the source's query and K/V heads in the shape's slots.
// Slot k of the shape's K/V heads serves query slots [k*g, (k+1)*g) with
// g = heads/kvHeads; a source K/V head whose group is larger than g is
// copied to as many slots as its query heads need. qSlot is the source
// head whose query weights a slot holds (-1: random), live whether
// attn_output reads it: a query slot left over in a group that holds a
// source K/V head repeats the group's last source head unread, so that
// its output, a real head's, leaves the 8-bit activation blocks (256
// values: two heads of 128) of the real heads it shares one with as they
// would be with zeros there.
func mapHeads(srcHeads, srcKV, heads, kvHeads int) (qSlot []int, live []bool, kvSlot []int, err error) {
	if kvHeads == 0 || heads%kvHeads != 0 {
		return nil, nil, nil, fmt.Errorf("%d heads over %d KV heads", heads, kvHeads)
	}
	gs, g := srcHeads/srcKV, heads/kvHeads
	copies := (gs + g - 1) / g
	if srcKV*copies > kvHeads {
		return nil, nil, nil, fmt.Errorf("%d KV heads (groups of %d) cannot hold the source's %d heads in groups of %d",
			kvHeads, g, srcHeads, gs)
	}
	qSlot, live, kvSlot = make([]int, heads), make([]bool, heads), make([]int, kvHeads)
	for i := range qSlot {
		qSlot[i] = -1
	}
	for i := range kvSlot {
		kvSlot[i] = -1
	}
	for s := range srcKV {
		for c := range copies {
			slot := s*copies + c
			kvSlot[slot] = s
			for j := range g {
				h := c*g + min(j, gs-1-c*g)
				qSlot[slot*g+j] = s*gs + h
				live[slot*g+j] = c*g+j < gs
			}
		}
	}
	return qSlot, live, kvSlot, nil
}

// liveSlots is qSlot with the slots attn_output does not read as -1.
func (l *layout) liveSlots() []int {
	out := slices.Clone(l.qSlot)
	for i, ok := range l.qLive {
		if !ok {
			out[i] = -1
		}
	}
	return out
}

// headDim is where source head dim i sits in a shape head.
func (l *layout) headDim(i int) int {
	if l.neox && i >= l.d/2 {
		return i - l.d/2 + l.D/2
	}
	return i
}

// headAxis maps the shape's heads (slots) onto the source's: a real slot's
// dims to source rows or columns h*d+i, its padded dims to padded, and an
// extra slot to extra.
func (l *layout) headAxis(slots []int, padded, extra int) axis {
	a := newAxis(len(slots)*l.D, extra)
	for t, h := range slots {
		if h < 0 {
			continue
		}
		for p := range l.D {
			a[t*l.D+p] = padded
		}
		for i := range l.d {
			a[t*l.D+l.headDim(i)] = h*l.d + i
		}
	}
	return a
}

// residualAxis maps the shape's residual dims: [0, n) to the source's,
// the rest to rest.
func (l *layout) residualAxis(rest int) axis {
	a := newAxis(l.N, rest)
	for i := range l.n {
		a[i] = i
	}
	return a
}

// prefixAxis maps [0, n) of a length-N axis to the source and the rest to rest.
func prefixAxis(n, N, rest int) axis {
	a := newAxis(N, rest)
	for i := range n {
		a[i] = i
	}
	return a
}

// padVector stretches a norm weight of the source to width n: the source's
// values (times mul) where the map has them, the source's values cyclically
// elsewhere (they only ever multiply zeros, so any value of the right
// scale will do).
func padVector(src []float32, a axis, mul float32) []float32 {
	out := make([]float32, len(a))
	for i, s := range a {
		if s >= 0 {
			out[i] = mul * src[s]
		} else {
			out[i] = src[i%len(src)]
		}
	}
	return out
}

// addVector writes an F32 vector tensor.
func addVector(w *gguf.Writer, name string, v []float32) error {
	data := make([]byte, 4*len(v))
	if err := quant.Quantize(quant.F32, v, data); err != nil {
		return err
	}
	return w.AddTensor(name, quant.F32, []int64{int64(len(v))}, data)
}

// inflater is one inflation under way: the output's writer, its random
// pools and the tensor types of the file type.
type inflater struct {
	w          *gguf.Writer
	rng        *rand.Rand
	types      tensorTypes
	typeLayers int // the block count tensorTypes.more reads
	pools      map[string]*randomPool
}

// pool is the random pool for one kind of tensor (attn_q, ffn_up, ...),
// at the standard deviation of the source's tensors of that kind.
func (ig *inflater) pool(kind string, std float64) *randomPool {
	if p, ok := ig.pools[kind]; ok {
		return p
	}
	if std == 0 {
		std = 0.02
	}
	p := newRandomPool(ig.rng, std)
	ig.pools[kind] = p
	return p
}

// copyMetadata copies src's metadata to w with the values in set replaced
// (and added when src lacks them, in set's order) and every tokenizer
// array of vocab entries padded to padTo as conversions pad: [PADi] tokens
// of type UNUSED with score 0.
func copyMetadata(w *gguf.Writer, src *gguf.File, set []gguf.KV, vocab, padTo int) error {
	seen := map[string]bool{}
	override := map[string]any{}
	for _, kv := range set {
		override[kv.Key] = kv.Value
	}
	for _, kv := range src.KV {
		if v, ok := override[kv.Key]; ok {
			w.AddKV(kv.Key, v)
			seen[kv.Key] = true
			continue
		}
		if strings.HasPrefix(kv.Key, "tokenizer.") {
			if a, ok := kv.Value.(gguf.Array); ok && a.Len() == vocab && vocab < padTo {
				padded, err := padTokenArray(kv.Key, a, padTo)
				if err != nil {
					return err
				}
				w.AddKV(kv.Key, padded)
				continue
			}
		}
		w.AddKV(kv.Key, kv.Value)
	}
	for _, kv := range set {
		if !seen[kv.Key] {
			w.AddKV(kv.Key, kv.Value)
		}
	}
	return nil
}

func padTokenArray(key string, a gguf.Array, n int) (any, error) {
	switch v := a.Values.(type) {
	case []string:
		out := append(make([]string, 0, n), v...)
		for i := len(v); i < n; i++ {
			out = append(out, fmt.Sprintf("[PAD%d]", i))
		}
		return out, nil
	case []int32:
		out := append(make([]int32, 0, n), v...)
		for i := len(v); i < n; i++ {
			out = append(out, spec.TokenTypeUnused)
		}
		return out, nil
	case []float32:
		return append(append(make([]float32, 0, n), v...), make([]float32, n-len(v))...), nil
	}
	return nil, fmt.Errorf("%s: a per-token array of %v cannot be padded", key, a.Elem)
}
