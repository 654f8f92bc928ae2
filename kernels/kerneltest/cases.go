package kerneltest

import (
	"fmt"
	"math"
	"slices"

	"github.com/tandem-run/tandem/kernels"
	"github.com/tandem-run/tandem/kernels/quant"
)

// WeightTypes are the weight types the matmul and get_rows cases cover.
var WeightTypes = []quant.Type{
	quant.F32, quant.F16, quant.BF16,
	quant.Q4_0, quant.Q4_1, quant.Q5_0, quant.Q5_1, quant.Q8_0,
	quant.Q2_K, quant.Q3_K, quant.Q4_K, quant.Q5_K, quant.Q6_K,
	quant.IQ4_NL, quant.IQ4_XS, quant.MXFP4,
}

func cases() []opCase {
	var cs []opCase
	for _, wt := range WeightTypes {
		cs = append(cs,
			opCase{"mat_mul/" + wt.String(), func(h *harness) { matMulCase(h, wt) }},
			opCase{"get_rows/" + wt.String(), func(h *harness) { getRowsCase(h, wt) }},
		)
	}
	return append(cs,
		opCase{"mat_mul/shared_input", sharedInputCase},
		opCase{"set_rows/F32", func(h *harness) { setRowsCase(h, quant.F32) }},
		opCase{"set_rows/F16", func(h *harness) { setRowsCase(h, quant.F16) }},
		opCase{"set_rows/Q8_0", func(h *harness) { setRowsCase(h, quant.Q8_0) }},
		opCase{"set_rows/Q4_0", func(h *harness) { setRowsCase(h, quant.Q4_0) }},
		opCase{"rms_norm", rmsNormCase},
		opCase{"add", func(h *harness) { binaryCase(h, "add") }},
		opCase{"mul", func(h *harness) { binaryCase(h, "mul") }},
		opCase{"swiglu", func(h *harness) { binaryCase(h, "swiglu") }},
		opCase{"rope/neox", func(h *harness) { ropeCase(h, true) }},
		opCase{"rope/interleaved", func(h *harness) { ropeCase(h, false) }},
		opCase{"attention/F32", func(h *harness) { attentionCase(h, quant.F32, quant.F32) }},
		opCase{"attention/F16", func(h *harness) { attentionCase(h, quant.F16, quant.F16) }},
		opCase{"attention/Q8_0", func(h *harness) { attentionCase(h, quant.Q8_0, quant.Q8_0) }},
		opCase{"attention/Q4_0", func(h *harness) { attentionCase(h, quant.Q4_0, quant.Q4_0) }},
		opCase{"attention/K_Q8_0_V_Q4_0", func(h *harness) { attentionCase(h, quant.Q8_0, quant.Q4_0) }},
		opCase{"attention/K_F16_V_Q8_0", func(h *harness) { attentionCase(h, quant.F16, quant.Q8_0) }},
		opCase{"attention/K_Q4_0_V_F16", func(h *harness) { attentionCase(h, quant.Q4_0, quant.F16) }},
		opCase{"attention/K_F32_V_Q8_0", func(h *harness) { attentionCase(h, quant.F32, quant.Q8_0) }},
		opCase{"attention/window/F32", func(h *harness) { attentionWindowCase(h, quant.F32, quant.F32, 5) }},
		opCase{"attention/window/F16", func(h *harness) { attentionWindowCase(h, quant.F16, quant.F16, 5) }},
		opCase{"attention/window/Q8_0", func(h *harness) { attentionWindowCase(h, quant.Q8_0, quant.Q8_0, 5) }},
		opCase{"geglu", func(h *harness) { binaryCase(h, "geglu") }},
		opCase{"scale", scaleCase},
		opCase{"softmax", softmaxCase},
		opCase{"argmax", argmaxCase},
		opCase{"top_k", topKCase},
		opCase{"copy", copyCase},
		opCase{"moe/F32", func(h *harness) { moeCase(h, quant.F32) }},
		opCase{"moe/F16", func(h *harness) { moeCase(h, quant.F16) }},
		opCase{"moe/Q8_0", func(h *harness) { moeCase(h, quant.Q8_0) }},
		opCase{"moe/Q4_K", func(h *harness) { moeCase(h, quant.Q4_K) }},
		opCase{"program_order", orderCase},
	)
}

// randomRows is rows of typ holding random non-zero values, and their
// float64 values. Float and 8-bit types are quantized from N(0,1); for the
// others (Q4_0 too, though it has a quantizer) random block bytes are drawn, keeping blocks whose values are
// finite, non-zero and of moderate size, so every bit pattern the kernels
// decode is exercised without any per-type encoder.
func (h *harness) randomRows(typ quant.Type, rows, cols int) ([]byte, []float64) {
	h.t.Helper()
	rb, err := typ.RowBytes(int64(cols))
	if err != nil {
		h.t.Fatal(err)
	}
	data := make([]byte, int64(rows)*rb)
	vals := make([]float32, rows*cols)
	if typ == quant.Q4_0 {
		// no quantization: keep the draw below
	} else if err := quant.Quantize(typ, h.normal(rows*cols, 1), data); err == nil {
		if err := quant.Dequantize(typ, data, vals); err != nil {
			h.t.Fatal(err)
		}
		return data, widen(vals)
	}
	bs, ts := typ.BlockSize(), typ.TypeSize()
	for b := 0; b < rows*cols/bs; b++ {
		blk, out := data[b*ts:(b+1)*ts], vals[b*bs:(b+1)*bs]
		for tries := 0; ; tries++ {
			for i := range blk {
				blk[i] = byte(h.rng.Uint32())
			}
			if err := quant.Dequantize(typ, blk, out); err != nil {
				h.t.Fatalf("%v: %v", typ, err)
			}
			if m := maxAbs32(out); m > 1e-2 && m < 1e2 && finite(out) {
				break
			}
			if tries > 10000 {
				h.t.Fatalf("%v: no usable random block", typ)
			}
		}
	}
	return data, widen(vals)
}

// cacheRows is rows of a KV cache of typ: N(0,1) values quantized as
// SetRows stores them, and their float64 values.
func (h *harness) cacheRows(typ quant.Type, rows, cols int) ([]byte, []float64) {
	h.t.Helper()
	rb, err := typ.RowBytes(int64(cols))
	if err != nil {
		h.t.Fatal(err)
	}
	data := make([]byte, int64(rows)*rb)
	vals := make([]float32, rows*cols)
	if err := quant.Quantize(typ, h.normal(rows*cols, 1), data); err != nil {
		h.t.Fatal(err)
	}
	if err := quant.Dequantize(typ, data, vals); err != nil {
		h.t.Fatal(err)
	}
	return data, widen(vals)
}

func widen(v []float32) []float64 {
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = float64(x)
	}
	return out
}

func finite(v []float32) bool {
	for _, x := range v {
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			return false
		}
	}
	return true
}

func matMulCase(h *harness, wt quant.Type) {
	tol := tolDot
	if quant.ActivationType(wt) == quant.Q8_1 {
		// Q4_1/Q5_1 products take each activation block's sum from its
		// binary16 field, as ggml does: one more rounding per block.
		tol = 5 * tolDot
	}
	// Decode, short verification batches (around the CPU's four-row
	// kernels), prefill tiles with edges, and a long batch.
	for _, s := range []struct{ b, in, out int }{{1, 256, 7}, {3, 512, 64}, {5, 256, 4}, {17, 256, 33},
		{64, 768, 5}, {128, 512, 37}, {4096, 256, 3}} {
		wData, w := h.randomRows(wt, s.out, s.in)
		x := h.normal(s.b*s.in, 1)
		W := h.tensor(wt, s.out, s.in, wData)
		X := h.f32(s.b, s.in, x)
		Dst := h.tensor(quant.F32, s.b, s.out, nil)
		if !h.run(kernels.MatMul{Dst: Dst, W: W, X: X}) {
			return
		}
		got := h.readF32(Dst)
		want, scale := refMatMul(w, h.activations(wt, x), s.b, s.in, s.out)
		for i := range got {
			d := math.Abs(float64(got[i]) - want[i])
			if !(d <= tol*scale[i]) {
				h.t.Errorf("[%d,%d]x[%d,%d]: out %d = %g, want %g (tolerance %.3g)", s.b, s.in, s.out, s.in, i, got[i], want[i], tol*scale[i])
				break
			}
		}
	}
}

// activations is x as products with wt weights see it: rounded to
// quant.ActivationType(wt).
func (h *harness) activations(wt quant.Type, x []float32) []float64 {
	at := quant.ActivationType(wt)
	if at == quant.F32 {
		return widen(x)
	}
	rb, err := at.RowBytes(int64(len(x)))
	if err != nil {
		h.t.Fatal(err)
	}
	q, r := make([]byte, rb), make([]float32, len(x))
	if err := quant.Quantize(at, x, q); err != nil {
		h.t.Fatal(err)
	}
	if err := quant.Dequantize(at, q, r); err != nil {
		h.t.Fatal(err)
	}
	return widen(r)
}

// refMatMul is X W^T with, per output, the scale sum |w||x| its error is
// judged against.
func refMatMul(w, x []float64, b, in, out int) (vals, scale []float64) {
	vals, scale = make([]float64, b*out), make([]float64, b*out)
	for r := range b {
		for o := range out {
			var s, a float64
			for i := range in {
				p := w[o*in+i] * x[r*in+i]
				s += p
				a += math.Abs(p)
			}
			vals[r*out+o], scale[r*out+o] = s, a
		}
	}
	return vals, scale
}

// sharedInputCase is Q, K and V from one input, the middle one of another
// type: a backend that fuses products sharing an input must keep them apart.
func sharedInputCase(h *harness) {
	const b, in = 5, 256
	x := h.normal(b*in, 1)
	X := h.f32(b, in, x)
	var ops []kernels.Op
	var want [][]float64
	var outs []kernels.Tensor
	for i, wt := range []quant.Type{quant.Q8_0, quant.F16, quant.Q8_0} {
		rows := 16 + 8*i
		data, w := h.randomRows(wt, rows, in)
		dst := h.tensor(quant.F32, b, rows, nil)
		ops = append(ops, kernels.MatMul{Dst: dst, W: h.tensor(wt, rows, in, data), X: X})
		v, _ := refMatMul(w, h.activations(wt, x), b, in, rows)
		want, outs = append(want, v), append(outs, dst)
	}
	if !h.run(ops...) {
		return
	}
	for i, dst := range outs {
		h.closeTo(fmt.Sprintf("product %d", i), h.readF32(dst), want[i], 1e-4, maxAbs(want[i]))
	}
}

func getRowsCase(h *harness, st quant.Type) {
	const rows, cols = 50, 256
	data, src := h.randomRows(st, rows, cols)
	idx := []int32{3, 0, 49, 3, 17}
	Src := h.tensor(st, rows, cols, data)
	Dst := h.tensor(quant.F32, len(idx), cols, nil)
	if !h.run(kernels.GetRows{Dst: Dst, Src: Src, Idx: h.i32(idx)}) {
		return
	}
	var want []float64
	for _, r := range idx {
		want = append(want, src[int(r)*cols:(int(r)+1)*cols]...)
	}
	h.closeTo("rows", h.readF32(Dst), want, tolElementwise, maxAbs(want))
}

func setRowsCase(h *harness, dt quant.Type) {
	const rows, cols = 12, 128
	src := h.normal(3*cols, 1)
	idx := []int32{7, 0, 11}
	Dst := h.tensor(dt, rows, cols, nil)
	if !h.run(kernels.SetRows{Dst: Dst, Src: h.f32(3, cols, src), Idx: h.i32(idx)}) {
		return
	}
	raw := make([]byte, Dst.Bytes())
	if err := h.be.Read(raw, Dst); err != nil {
		h.t.Fatal(err)
	}
	got := make([]float32, rows*cols)
	if err := quant.Dequantize(dt, raw, got); err != nil {
		h.t.Fatal(err)
	}
	want := make([]float64, rows*cols) // untouched rows stay zero
	for i, r := range idx {
		for c := range cols {
			want[int(r)*cols+c] = float64(src[i*cols+c])
		}
	}
	// Each type's rounding bound, relative to the largest value: half a
	// binary16 ulp; a Q8_0 step of amax/127 halved, plus its f16 scale; a
	// Q4_0 step of amax/8, whole for the value opposite a block's peak.
	tol := map[quant.Type]float64{quant.F32: tolElementwise, quant.F16: 1e-3, quant.Q8_0: 5e-3, quant.Q4_0: 0.13}[dt]
	h.closeTo("cache rows", got, want, tol, maxAbs(want))
	if dt == quant.Q8_0 || dt == quant.Q4_0 {
		// The contract is the quantizer's bytes, so every backend's cache
		// holds the same values.
		rb := int(Dst.RowBytes())
		row := make([]byte, rb)
		for i, r := range idx {
			if err := quant.Quantize(dt, src[i*cols:(i+1)*cols], row); err != nil {
				h.t.Fatal(err)
			}
			if got := raw[int(r)*rb : (int(r)+1)*rb]; string(got) != string(row) {
				h.t.Errorf("row %d: bytes differ from quant.Quantize's", r)
			}
		}
	}
}

func rmsNormCase(h *harness) {
	for _, s := range []struct{ b, n int }{{1, 384}, {7, 64}, {33, 1024}} {
		x, w := h.normal(s.b*s.n, 3), h.normal(s.n, 1)
		X := h.f32(s.b, s.n, x)
		Dst := h.tensor(quant.F32, s.b, s.n, nil)
		const eps = 1e-6
		if !h.run(kernels.RMSNorm{Dst: Dst, X: X, W: h.f32(1, s.n, w), Eps: eps}) {
			return
		}
		want := make([]float64, s.b*s.n)
		for r := range s.b {
			var ss float64
			for _, v := range x[r*s.n : (r+1)*s.n] {
				ss += float64(v) * float64(v)
			}
			k := 1 / math.Sqrt(ss/float64(s.n)+eps)
			for i := range s.n {
				want[r*s.n+i] = float64(x[r*s.n+i]) * k * float64(w[i])
			}
		}
		h.closeTo(fmt.Sprintf("[%d,%d]", s.b, s.n), h.readF32(Dst), want, tolElementwise, maxAbs(want))
	}
}

func binaryCase(h *harness, name string) {
	fns := map[string]func(a, b float64) float64{
		"add":    func(a, b float64) float64 { return a + b },
		"mul":    func(a, b float64) float64 { return a * b },
		"swiglu": func(g, u float64) float64 { return g / (1 + math.Exp(-g)) * u },
		"geglu": func(g, u float64) float64 {
			return 0.5 * g * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(g+0.044715*g*g*g))) * u
		},
	}
	for _, bRows := range []int{0, 1} { // 0: same shape as A
		const rows, cols = 9, 200
		if (name == "swiglu" || name == "geglu") && bRows == 1 {
			continue // no broadcast form
		}
		n := rows
		if bRows == 1 {
			n = 1
		}
		a, b := h.normal(rows*cols, 2), h.normal(n*cols, 2)
		A, B := h.f32(rows, cols, a), h.f32(n, cols, b)
		Dst := A // in place, as models use them
		var op kernels.Op
		switch name {
		case "add":
			op = kernels.Add{Dst: Dst, A: A, B: B}
		case "mul":
			op = kernels.Mul{Dst: Dst, A: A, B: B}
		case "geglu":
			op = kernels.GeGLU{Dst: Dst, Gate: A, Up: B}
		default:
			op = kernels.SwiGLU{Dst: Dst, Gate: A, Up: B}
		}
		if !h.run(op) {
			return
		}
		want := make([]float64, rows*cols)
		for i := range want {
			want[i] = fns[name](float64(a[i]), float64(b[i%(n*cols)]))
		}
		h.closeTo(fmt.Sprintf("broadcast=%v", n == 1), h.readF32(Dst), want, tolElementwise, maxAbs(want))
	}
}

func ropeCase(h *harness, neox bool) {
	for _, s := range []struct {
		headDim, dims int
		factors       bool
		scale         float32
	}{{64, 64, false, 1}, {128, 96, false, 0.5}, {64, 64, true, 1}} {
		const rows, heads = 5, 3
		base := float32(10000)
		if neox {
			base = 1e6
		}
		x := h.normal(rows*heads*s.headDim, 1)
		pos := []int32{0, 1, 17, 300, 999}
		X := h.f32(rows, heads*s.headDim, x)
		op := kernels.Rope{Dst: X, X: X, Pos: h.i32(pos), HeadDim: s.headDim, Dims: s.dims,
			Base: base, Scale: s.scale, Neox: neox}
		factors := make([]float32, s.dims/2)
		for i := range factors {
			factors[i] = 1
			if s.factors {
				factors[i] = 1 + float32(i%5)
			}
		}
		if s.factors {
			op.Factors = h.f32(1, s.dims/2, factors)
		}
		if !h.run(op) {
			return
		}
		want := widen(x)
		for r := range rows {
			for hd := range heads {
				v := want[(r*heads+hd)*s.headDim : (r*heads+hd+1)*s.headDim]
				for j := range s.dims / 2 {
					theta := float64(pos[r]) * float64(s.scale) * math.Pow(float64(base), -2*float64(j)/float64(s.dims)) / float64(factors[j])
					a, b := 2*j, 2*j+1
					if neox {
						a, b = j, j+s.dims/2
					}
					c, sn := math.Cos(theta), math.Sin(theta)
					v[a], v[b] = v[a]*c-v[b]*sn, v[a]*sn+v[b]*c
				}
			}
		}
		h.closeTo(fmt.Sprintf("head %d dims %d factors %v", s.headDim, s.dims, s.factors), h.readF32(X), want, tolRope, maxAbs(want))
	}
}

func attentionCase(h *harness, kType, vType quant.Type) { attentionWindowCase(h, kType, vType, 0) }

// attentionWindowCase is attentionCase with sliding-window attention of
// window (0: none); positions past the window check that older rows drop
// out, earlier ones that the window never reaches back past row 0.
func attentionWindowCase(h *harness, kType, vType quant.Type, window int) {
	const nctx, heads, kvHeads, hd = 64, 6, 2, 64
	kvDim := kvHeads * hd
	for _, pos := range [][]int32{{37}, {0, 1, 2, 3, 4, 5, 6, 7, 8}, {20, 21, 22, 23}} {
		b := len(pos)
		kData, k := h.cacheRows(kType, nctx, kvDim)
		vData, v := h.cacheRows(vType, nctx, kvDim)
		q := h.normal(b*heads*hd, 1)
		Dst := h.tensor(quant.F32, b, heads*hd, nil)
		scale := float32(1 / math.Sqrt(hd))
		if !h.run(kernels.Attention{Dst: Dst, Q: h.f32(b, heads*hd, q),
			K: h.tensor(kType, nctx, kvDim, kData), V: h.tensor(vType, nctx, kvDim, vData),
			Pos: h.i32(pos), NHead: heads, NKVHead: kvHeads, HeadDim: hd, Scale: scale, Window: window}) {
			return
		}
		want := make([]float64, b*heads*hd)
		for r := range b {
			for hh := range heads {
				g := hh / (heads / kvHeads)
				n := int(pos[r]) + 1
				first := 0
				if window > 0 {
					first = max(0, n-window)
				}
				s := make([]float64, n)
				m := math.Inf(-1)
				for t := first; t < n; t++ {
					for d := range hd {
						s[t] += float64(q[(r*heads+hh)*hd+d]) * k[t*kvDim+g*hd+d]
					}
					s[t] *= float64(scale)
					m = max(m, s[t])
				}
				var sum float64
				for t := first; t < n; t++ {
					s[t] = math.Exp(s[t] - m)
					sum += s[t]
				}
				for t := first; t < n; t++ {
					for d := range hd {
						want[(r*heads+hh)*hd+d] += s[t] / sum * v[t*kvDim+g*hd+d]
					}
				}
			}
		}
		tol := tolAttention
		switch {
		case kType == quant.Q8_0 || kType == quant.Q4_0:
			// The query may be quantized to Q8_0 for the product with a
			// quantized K, as llama.cpp's flash attention does.
			tol = tolAttentionQ8
		case kType == quant.F16 || vType == quant.F16:
			// F16 caches may be attended with F16 queries and an F16
			// accumulator, as llama.cpp's CPU flash attention does.
			tol = tolAttentionF16
		}
		h.closeTo(fmt.Sprintf("K %v V %v positions %v window %d", kType, vType, pos, window), h.readF32(Dst), want, tol, maxAbs(v))
	}
}

func scaleCase(h *harness) {
	const rows, cols, c = 5, 300, 8.0
	x := h.normal(rows*cols, 2)
	X := h.f32(rows, cols, x)
	if !h.run(kernels.Scale{Dst: X, X: X, C: c}) {
		return
	}
	want := make([]float64, len(x))
	for i, v := range x {
		want[i] = float64(v) * c
	}
	h.closeTo("scale", h.readF32(X), want, tolElementwise, maxAbs(want))
}

func softmaxCase(h *harness) {
	const rows, cols = 4, 1000
	x := h.normal(rows*cols, 5)
	X := h.f32(rows, cols, x)
	Dst := h.tensor(quant.F32, rows, cols, nil)
	if !h.run(kernels.Softmax{Dst: Dst, X: X}) {
		return
	}
	want := make([]float64, rows*cols)
	for r := range rows {
		row := widen(x[r*cols : (r+1)*cols])
		m := maxOf(row)
		var sum float64
		for _, v := range row {
			sum += math.Exp(v - m)
		}
		for i, v := range row {
			want[r*cols+i] = math.Exp(v-m) / sum
		}
	}
	h.closeTo("probabilities", h.readF32(Dst), want, tolElementwise, maxAbs(want))
}

func maxOf(v []float64) float64 {
	m := math.Inf(-1)
	for _, x := range v {
		m = max(m, x)
	}
	return m
}

func argmaxCase(h *harness) {
	const rows, cols = 3, 5000
	x := h.normal(rows*cols, 1)
	x[2*cols+10], x[2*cols+4000] = 9, 9 // a tie: the lower index wins
	Dst := h.tensor(quant.I32, 1, rows, nil)
	if !h.run(kernels.Argmax{Dst: Dst, X: h.f32(rows, cols, x)}) {
		return
	}
	got := h.readI32(Dst)
	for r := range rows {
		row := x[r*cols : (r+1)*cols]
		want := 0
		for i, v := range row {
			if v > row[want] {
				want = i
			}
		}
		if int(got[r]) != want {
			h.t.Errorf("row %d: argmax %d, want %d", r, got[r], want)
		}
	}
}

func topKCase(h *harness) {
	const rows, cols, k = 3, 3000, 40
	x := h.normal(rows*cols, 1)
	x[100], x[200] = 7, 7 // a tie near the top of row 0
	Ids, Vals := h.tensor(quant.I32, rows, k, nil), h.tensor(quant.F32, rows, k, nil)
	if !h.run(kernels.TopK{Ids: Ids, Vals: Vals, X: h.f32(rows, cols, x)}) {
		return
	}
	ids, vals := h.readI32(Ids), h.readF32(Vals)
	for r := range rows {
		row := x[r*cols : (r+1)*cols]
		order := make([]int32, cols)
		for i := range order {
			order[i] = int32(i)
		}
		slices.SortStableFunc(order, func(a, b int32) int {
			switch {
			case row[a] > row[b]:
				return -1
			case row[a] < row[b]:
				return 1
			}
			return 0
		})
		if !slices.Equal(ids[r*k:(r+1)*k], order[:k]) {
			h.t.Errorf("row %d: ids %v, want %v", r, ids[r*k:(r+1)*k], order[:k])
		}
		for i, id := range order[:k] {
			if vals[r*k+i] != row[id] {
				h.t.Errorf("row %d: value %d = %g, want %g", r, i, vals[r*k+i], row[id])
				break
			}
		}
	}
}

// copyCase converts F32 to F16 into a column slice of a wider tensor (the
// EAGLE-3 capture) and back.
func copyCase(h *harness) {
	const rows, cols = 6, 64
	x := h.normal(rows*cols, 1)
	wide := h.tensor(quant.F16, rows, 3*cols, nil)
	back := h.tensor(quant.F32, rows, cols, nil)
	slot := wide.ColSlice(cols, cols)
	if !h.run(kernels.Copy{Dst: slot, Src: h.f32(rows, cols, x)}, kernels.Copy{Dst: back, Src: slot}) {
		return
	}
	want := make([]float64, rows*cols)
	for i, v := range x {
		var b [2]byte
		var r [1]float32
		_ = quant.Quantize(quant.F16, []float32{v}, b[:])
		_ = quant.Dequantize(quant.F16, b[:], r[:])
		want[i] = float64(r[0])
	}
	h.closeTo("round trip", h.readF32(back), want, 0, 1)
}

// orderCase checks that ops run in program order: (a + b) * b, in place.
func orderCase(h *harness) {
	const rows, cols = 3, 100
	a, b := h.normal(rows*cols, 1), h.normal(rows*cols, 1)
	A, B := h.f32(rows, cols, a), h.f32(rows, cols, b)
	if !h.run(kernels.Add{Dst: A, A: A, B: B}, kernels.Mul{Dst: A, A: A, B: B}) {
		return
	}
	want := make([]float64, rows*cols)
	for i := range want {
		want[i] = (float64(a[i]) + float64(b[i])) * float64(b[i])
	}
	h.closeTo("(a+b)*b", h.readF32(A), want, tolElementwise, maxAbs(want))
}
