package cuda

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/tandem-run/tandem/kernels"
	"github.com/tandem-run/tandem/kernels/quant"
	"github.com/tandem-run/tandem/kernels/synth"
)

// The roofline: a large device-to-device copy, bytes read plus written.
func BenchmarkCopyRoofline(b *testing.B) {
	gpu := openGPU(b)
	const n = 1 << 30
	lbl := kernels.Label{Owner: "bench", Cat: kernels.Scratch}
	src, err := gpu.Alloc(lbl, n)
	if err != nil {
		b.Fatal(err)
	}
	dst, err := gpu.Alloc(lbl, n)
	if err != nil {
		b.Fatal(err)
	}
	s, d := kernels.NewTensor(src, quant.I8, 1, n, 0), kernels.NewTensor(dst, quant.I8, 1, n, 0)
	if err := gpu.Sync(); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(2 * n)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := gpu.Copy(d, s); err != nil {
			b.Fatal(err)
		}
	}
	if err := gpu.Sync(); err != nil {
		b.Fatal(err)
	}
}

// benchProgram times replays of a compiled program (a captured graph after
// the second run), b.N runs then one sync.
func benchProgram(b *testing.B, gpu *Backend, ops []kernels.Op, bytes int64) {
	p, err := gpu.Compile(ops)
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	ctx := context.Background()
	for i := 0; i < 3; i++ { // eager, capture, replay
		if err := p.Run(ctx); err != nil {
			b.Fatal(err)
		}
	}
	if err := gpu.Sync(); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(bytes)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := p.Run(ctx); err != nil {
			b.Fatal(err)
		}
	}
	if err := gpu.Sync(); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(ops))/1e3, "us/op")
}

// Decode-shaped matrix-vector products (Qwen3-1.7B and -8B widths, and the
// 1.7B head). Each run reads a stack of distinct matrices much larger than
// the 60 MB L2, so the bytes per second are the weight-reading speed,
// launch gaps included, to set against the copy roofline.
func BenchmarkMatVec(b *testing.B) {
	gpu := openGPU(b)
	rng := rand.New(rand.NewPCG(1, 1))
	lbl := kernels.Label{Owner: "bench", Cat: kernels.Weights}
	shapes := []struct{ rows, n int }{{2048, 2048}, {6144, 2048}, {2048, 6144}, {12288, 4096}, {151936, 2048}}
	for _, typ := range []quant.Type{quant.F16, quant.Q8_0, quant.Q4_K, quant.Q6_K, quant.Q5_0, quant.BF16} {
		for _, s := range shapes {
			for _, batch := range []int{1, 4} {
				if batch > 1 && s.rows > 20000 {
					continue
				}
				b.Run(fmt.Sprintf("%v/%dx%d/b%d", typ, s.rows, s.n, batch), func(b *testing.B) {
					rb, _ := typ.RowBytes(int64(s.n))
					mat := rb * int64(s.rows)
					count := int((1<<30)/mat) + 1 // about a GiB of weights per run
					data := make([]byte, mat)
					if err := synth.Fill(rng, typ, data, 0.02); err != nil {
						b.Fatal(err)
					}
					x := make([]float32, batch*s.n)
					for i := range x {
						x[i] = float32(rng.NormFloat64())
					}
					xb, err := gpu.Alloc(lbl, int64(4*len(x)))
					if err != nil {
						b.Fatal(err)
					}
					defer gpu.Free(xb)
					xt := kernels.NewTensor(xb, quant.F32, batch, s.n, 0)
					if err := gpu.Write(xt, kernels.F32Bytes(x)); err != nil {
						b.Fatal(err)
					}
					yb, err := gpu.Alloc(lbl, int64(4*batch*s.rows))
					if err != nil {
						b.Fatal(err)
					}
					defer gpu.Free(yb)
					yt := kernels.NewTensor(yb, quant.F32, batch, s.rows, 0)
					var ops []kernels.Op
					for i := 0; i < count; i++ {
						wb, err := gpu.Upload(lbl, data)
						if err != nil {
							b.Fatal(err)
						}
						defer gpu.Free(wb)
						ops = append(ops, kernels.MatMul{Dst: yt, W: kernels.NewTensor(wb, typ, s.rows, s.n, 0), X: xt})
					}
					benchProgram(b, gpu, ops, mat*int64(count))
				})
			}
		}
	}
}

// Decode attention over a long cache (Qwen3-8B heads), bytes = the K/V
// rows read.
func BenchmarkAttention(b *testing.B) {
	gpu := openGPU(b)
	lbl := kernels.Label{Owner: "bench", Cat: kernels.KV}
	for _, ctxLen := range []int{512, 4096, 32768} {
		b.Run(fmt.Sprintf("ctx%d", ctxLen), func(b *testing.B) {
			const nHead, nKV, hd = 32, 8, 128
			alloc := func(size int64) kernels.Buffer {
				buf, err := gpu.Alloc(lbl, size)
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { gpu.Free(buf) })
				return buf
			}
			k := kernels.NewTensor(alloc(int64(2*ctxLen*nKV*hd)), quant.F16, ctxLen, nKV*hd, 0)
			v := kernels.NewTensor(alloc(int64(2*ctxLen*nKV*hd)), quant.F16, ctxLen, nKV*hd, 0)
			q := kernels.NewTensor(alloc(4*nHead*hd), quant.F32, 1, nHead*hd, 0)
			y := kernels.NewTensor(alloc(4*nHead*hd), quant.F32, 1, nHead*hd, 0)
			pos := kernels.NewTensor(alloc(4), quant.I32, 1, 1, 0)
			if err := gpu.Write(pos, kernels.I32Bytes([]int32{int32(ctxLen - 1)})); err != nil {
				b.Fatal(err)
			}
			op := kernels.Attention{Dst: y, Q: q, K: k, V: v, Pos: pos, NHead: nHead, NKVHead: nKV, HeadDim: hd, Scale: 0.088}
			benchProgram(b, gpu, []kernels.Op{op}, 2*int64(2*ctxLen*nKV*hd))
		})
	}
}

// The cost of one small op: eager launches through purego against graph
// replay, 1000 tiny adds per run.
func BenchmarkLaunch(b *testing.B) {
	gpu := openGPU(b)
	buf, err := gpu.Alloc(kernels.Label{Owner: "bench", Cat: kernels.Scratch}, 4*1024)
	if err != nil {
		b.Fatal(err)
	}
	x := kernels.NewTensor(buf, quant.F32, 1, 1024, 0)
	ops := make([]kernels.Op, 1000)
	for i := range ops {
		ops[i] = kernels.Add{Dst: x, A: x, B: x}
	}
	b.Run("graph", func(b *testing.B) { benchProgram(b, gpu, ops, 0) })
	b.Run("eager", func(b *testing.B) {
		p, err := gpu.Compile(ops)
		if err != nil {
			b.Fatal(err)
		}
		defer p.Close()
		pr := p.(*program)
		pr.noGraph = true
		for i := 0; i < b.N; i++ {
			if err := p.Run(context.Background()); err != nil {
				b.Fatal(err)
			}
		}
		if err := gpu.Sync(); err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/1000/1e3, "us/op")
	})
}

// The step between a decode token's Q/K/V products and attention (Qwen3-8B
// heads): per-head norms, rotations and cache writes, as one launch; bytes
// = Q, K and V read and written plus the cache rows written.
func BenchmarkAttnPrep(b *testing.B) {
	gpu := openGPU(b)
	lbl := kernels.Label{Owner: "bench", Cat: kernels.KV}
	const nHead, nKV, hd, ctxLen = 32, 8, 128, 4096
	alloc := func(size int64) kernels.Buffer {
		buf, err := gpu.Alloc(lbl, size)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { gpu.Free(buf) })
		return buf
	}
	q := kernels.NewTensor(alloc(4*nHead*hd), quant.F32, 1, nHead*hd, 0)
	k := kernels.NewTensor(alloc(4*nKV*hd), quant.F32, 1, nKV*hd, 0)
	v := kernels.NewTensor(alloc(4*nKV*hd), quant.F32, 1, nKV*hd, 0)
	kc := kernels.NewTensor(alloc(int64(2*ctxLen*nKV*hd)), quant.F16, ctxLen, nKV*hd, 0)
	vc := kernels.NewTensor(alloc(int64(2*ctxLen*nKV*hd)), quant.F16, ctxLen, nKV*hd, 0)
	qw := kernels.NewTensor(alloc(4*hd), quant.F32, 1, hd, 0)
	kw := kernels.NewTensor(alloc(4*hd), quant.F32, 1, hd, 0)
	pos := kernels.NewTensor(alloc(4), quant.I32, 1, 1, 0)
	if err := gpu.Write(pos, kernels.I32Bytes([]int32{ctxLen / 2})); err != nil {
		b.Fatal(err)
	}
	rope := func(x kernels.Tensor) kernels.Rope {
		return kernels.Rope{Dst: x, X: x, Pos: pos, HeadDim: hd, Dims: hd, Base: 1e6, Scale: 1, Neox: true}
	}
	qh, kh := q.Reshape(nHead, hd), k.Reshape(nKV, hd)
	ops := []kernels.Op{
		kernels.RMSNorm{Dst: qh, X: qh, W: qw, Eps: 1e-6},
		kernels.RMSNorm{Dst: kh, X: kh, W: kw, Eps: 1e-6},
		rope(q), rope(k),
		kernels.SetRows{Dst: kc, Src: k, Idx: pos},
		kernels.SetRows{Dst: vc, Src: v, Idx: pos},
	}
	benchProgram(b, gpu, ops, 4*2*(nHead+nKV)*hd+4*nKV*hd+2*2*nKV*hd)
}

// Products of several rows, as verification (1-16 rows) and prefill (512)
// run them: a stack of distinct matrices larger than the L2 per run (a GiB,
// uploaded once per type and shape), so bytes/s is the weight-reading speed
// to set against the copy roofline, and TFLOP/s the tensor cores' rate at
// 512 rows, which runs once per tile shape (the suffix) to choose
// mmaShape's.
func BenchmarkMatMulRows(b *testing.B) {
	gpu := openGPU(b)
	rng := rand.New(rand.NewPCG(2, 2))
	lbl := kernels.Label{Owner: "bench", Cat: kernels.Weights}
	shapes := []struct{ rows, n int }{{6144, 2048}, {2048, 6144}, {12288, 4096}, {151936, 2048}}
	for _, typ := range []quant.Type{quant.Q4_K, quant.Q6_K, quant.Q8_0, quant.F16} {
		for _, s := range shapes {
			b.Run(fmt.Sprintf("%v/%dx%d", typ, s.rows, s.n), func(b *testing.B) {
				ws, mat := uploadStack(b, gpu, rng, lbl, typ, s.rows, s.n)
				for _, batch := range []int{1, 2, 5, 9, 16, 512} {
					if batch > 16 && s.rows > 20000 {
						continue
					}
					tiles := [][2]int{{-1, -1}} // the default
					if batch > 16 {
						tiles = nil
						for _, tl := range mmaShapes {
							if tl[0] > 0 || mmtType(typ) {
								tiles = append(tiles, tl)
							}
						}
					}
					for _, tl := range tiles {
						name := fmt.Sprintf("r%d", batch)
						if tl[0] >= 0 {
							name += fmt.Sprintf("/%dx%d", tl[0], tl[1])
						}
						b.Run(name, func(b *testing.B) {
							if tl[0] >= 0 {
								gpu.shape = func(int) (int, int) { return tl[0], tl[1] }
								defer func() { gpu.shape = nil }()
							}
							// compute-bound at 512 rows: a quarter of the stack, still
							// four times the L2
							use := ws
							if batch > 16 {
								use = ws[:(len(ws)+3)/4]
							}
							benchRows(b, gpu, rng, lbl, use, mat, batch)
						})
					}
				}
			})
		}
	}
}

// uploadStack uploads about a GiB of distinct rows x n matrices of typ
// (one random matrix, many copies) and returns them and one's bytes.
func uploadStack(b *testing.B, gpu *Backend, rng *rand.Rand, lbl kernels.Label, typ quant.Type, rows, n int) ([]kernels.Tensor, int64) {
	rb, _ := typ.RowBytes(int64(n))
	mat := rb * int64(rows)
	data := make([]byte, mat)
	if err := synth.Fill(rng, typ, data, 0.02); err != nil {
		b.Fatal(err)
	}
	var ws []kernels.Tensor
	for i := 0; i < int((1<<30)/mat)+1; i++ {
		wb, err := gpu.Upload(lbl, data)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { gpu.Free(wb) })
		ws = append(ws, kernels.NewTensor(wb, typ, rows, n, 0))
	}
	return ws, mat
}

// benchRows times one product of batch random rows with each of ws.
func benchRows(b *testing.B, gpu *Backend, rng *rand.Rand, lbl kernels.Label, ws []kernels.Tensor, mat int64, batch int) {
	rows, n := ws[0].Rows, ws[0].Cols
	x := make([]float32, batch*n)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	xb, err := gpu.Alloc(lbl, int64(4*len(x)))
	if err != nil {
		b.Fatal(err)
	}
	defer gpu.Free(xb)
	xt := kernels.NewTensor(xb, quant.F32, batch, n, 0)
	if err := gpu.Write(xt, kernels.F32Bytes(x)); err != nil {
		b.Fatal(err)
	}
	yb, err := gpu.Alloc(lbl, int64(4*batch*rows))
	if err != nil {
		b.Fatal(err)
	}
	defer gpu.Free(yb)
	yt := kernels.NewTensor(yb, quant.F32, batch, rows, 0)
	var ops []kernels.Op
	for _, w := range ws {
		ops = append(ops, kernels.MatMul{Dst: yt, W: w, X: xt})
	}
	benchProgram(b, gpu, ops, mat*int64(len(ws)))
	perRun := b.Elapsed().Seconds() / float64(b.N)
	b.ReportMetric(2*float64(batch)*float64(rows)*float64(n)*float64(len(ws))/perRun/1e12, "TFLOP/s")
}

// Attention of several query rows (Qwen3-8B heads, F16 cache): a 5-row
// verification at 4096 cached keys and a 512-row prefill from position 0;
// bytes = the K/V rows one read of the cache takes.
func BenchmarkAttentionRows(b *testing.B) {
	gpu := openGPU(b)
	lbl := kernels.Label{Owner: "bench", Cat: kernels.KV}
	for _, c := range []struct{ rows, first int }{{5, 4091}, {16, 4080}, {512, 0}} {
		b.Run(fmt.Sprintf("r%d/pos%d", c.rows, c.first), func(b *testing.B) {
			const nHead, nKV, hd, ctxLen = 32, 8, 128, 4096
			alloc := func(size int64) kernels.Buffer {
				buf, err := gpu.Alloc(lbl, size)
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { gpu.Free(buf) })
				return buf
			}
			k := kernels.NewTensor(alloc(int64(2*ctxLen*nKV*hd)), quant.F16, ctxLen, nKV*hd, 0)
			v := kernels.NewTensor(alloc(int64(2*ctxLen*nKV*hd)), quant.F16, ctxLen, nKV*hd, 0)
			q := kernels.NewTensor(alloc(int64(4*c.rows*nHead*hd)), quant.F32, c.rows, nHead*hd, 0)
			y := kernels.NewTensor(alloc(int64(4*c.rows*nHead*hd)), quant.F32, c.rows, nHead*hd, 0)
			pos := kernels.NewTensor(alloc(int64(4*c.rows)), quant.I32, 1, c.rows, 0)
			rng := rand.New(rand.NewPCG(5, 5))
			for _, t := range []kernels.Tensor{k, v, q} {
				data := make([]byte, t.Bytes())
				if err := synth.Fill(rng, t.Type, data, 1); err != nil {
					b.Fatal(err)
				}
				if err := gpu.Write(t, data); err != nil {
					b.Fatal(err)
				}
			}
			p := make([]int32, c.rows)
			for i := range p {
				p[i] = int32(c.first + i)
			}
			if err := gpu.Write(pos, kernels.I32Bytes(p)); err != nil {
				b.Fatal(err)
			}
			op := kernels.Attention{Dst: y, Q: q, K: k, V: v, Pos: pos, NHead: nHead, NKVHead: nKV, HeadDim: hd, Scale: 0.088}
			keys := int64(c.first + c.rows)
			benchProgram(b, gpu, []kernels.Op{op}, 2*2*keys*nKV*hd)
		})
	}
}

// Decode attention at a short context in caches of two capacities
// (Qwen3-1.7B heads, F16, random contents): 28 launches a run, one a
// layer, as a decode step's graph holds them. The grid is cut for the
// capacity and only the slices the keys fill take part, so the two
// capacities should cost the same; bytes = the K/V rows read.
func BenchmarkAttentionCapacity(b *testing.B) {
	gpu := openGPU(b)
	lbl := kernels.Label{Owner: "bench", Cat: kernels.KV}
	const nHead, nKV, hd, layers = 16, 8, 128, 28
	for _, keys := range []int{140, 500, 2000} {
		for _, capacity := range []int{512, 4096} {
			if keys > capacity {
				continue
			}
			b.Run(fmt.Sprintf("keys%d/cap%d", keys, capacity), func(b *testing.B) {
				alloc := func(size int64) kernels.Buffer {
					buf, err := gpu.Alloc(lbl, size)
					if err != nil {
						b.Fatal(err)
					}
					b.Cleanup(func() { gpu.Free(buf) })
					return buf
				}
				k := kernels.NewTensor(alloc(int64(2*capacity*nKV*hd)), quant.F16, capacity, nKV*hd, 0)
				v := kernels.NewTensor(alloc(int64(2*capacity*nKV*hd)), quant.F16, capacity, nKV*hd, 0)
				q := kernels.NewTensor(alloc(4*nHead*hd), quant.F32, 1, nHead*hd, 0)
				y := kernels.NewTensor(alloc(4*nHead*hd), quant.F32, 1, nHead*hd, 0)
				pos := kernels.NewTensor(alloc(4), quant.I32, 1, 1, 0)
				rng := rand.New(rand.NewPCG(3, 3))
				for _, t := range []kernels.Tensor{k, v, q} {
					data := make([]byte, t.Bytes())
					if err := synth.Fill(rng, t.Type, data, 1); err != nil {
						b.Fatal(err)
					}
					if err := gpu.Write(t, data); err != nil {
						b.Fatal(err)
					}
				}
				if err := gpu.Write(pos, kernels.I32Bytes([]int32{int32(keys - 1)})); err != nil {
					b.Fatal(err)
				}
				ops := make([]kernels.Op, layers)
				for i := range ops {
					ops[i] = kernels.Attention{Dst: y, Q: q, K: k, V: v, Pos: pos, NHead: nHead, NKVHead: nKV, HeadDim: hd, Scale: 0.088}
				}
				benchProgram(b, gpu, ops, layers*2*2*int64(keys*nKV*hd))
			})
		}
	}
}

// Prefill products at Qwen3-8B's shapes (q/o 4096x4096, k/v 1024x4096,
// gate/up 12288x4096, down 4096x12288) of 512 rows (and 4096 for q/o),
// once per tile that can take them (2x8 on Q8_0 only, as mmaShape; the
// register-set prefill tiles at each load depth, the cp.async ones at 3
// and 4 stages where the weights have them, the wgmma ones at 4 to 6 on
// F16 where the GPU loads them): TFLOP/s against the H200's
// tensor-core rate.
// Four distinct copies of the matrix a run, so that the weights do not sit
// in L2 from one product to the next.
func BenchmarkPrefillTiles(b *testing.B) {
	gpu := openGPU(b)
	rng := rand.New(rand.NewPCG(3, 3))
	lbl := kernels.Label{Owner: "bench", Cat: kernels.Weights}
	shapes := []struct{ rows, n int }{{4096, 4096}, {1024, 4096}, {12288, 4096}, {4096, 12288}}
	for _, typ := range []quant.Type{quant.Q4_K, quant.Q6_K, quant.Q8_0, quant.F16} {
		for _, s := range shapes {
			b.Run(fmt.Sprintf("%v/%dx%d", typ, s.rows, s.n), func(b *testing.B) {
				rb, _ := typ.RowBytes(int64(s.n))
				mat := rb * int64(s.rows)
				data := make([]byte, mat)
				if err := synth.Fill(rng, typ, data, 0.02); err != nil {
					b.Fatal(err)
				}
				var ws []kernels.Tensor
				for range 4 {
					wb, err := gpu.Upload(lbl, data)
					if err != nil {
						b.Fatal(err)
					}
					b.Cleanup(func() { gpu.Free(wb) })
					ws = append(ws, kernels.NewTensor(wb, typ, s.rows, s.n, 0))
				}
				for _, batch := range []int{512, 4096} {
					if batch > 512 && s.rows != s.n {
						continue // one square product of a 4096-token prompt
					}
					// {mt, nt, load depth of the register-set prefill
					// tiles, stages of the cp.async ones (-1: none),
					// stages of the wgmma ones (F16 on sm_90a)}
					for _, tl := range [][5]int{{-1, -1, 0, 0, 0}, {2, 4, 0, 0, -1}, {2, 8, 0, 0, -1}, {0, 8, 2, -1, -1}, {0, 8, 3, -1, -1},
						{0, 8, 4, -1, -1}, {0, 8, 0, 3, -1}, {0, 8, 0, 4, -1}, {0, 16, 2, -1, -1}, {0, 16, 3, -1, -1}, {0, 16, 4, -1, -1},
						{0, 16, 0, 3, -1}, {0, 16, 0, 4, -1}, {0, 8, 0, 0, 4}, {0, 8, 0, 0, 5}, {0, 8, 0, 0, 6}, {0, 16, 0, 0, 4},
						{0, 16, 0, 0, 5}, {0, 16, 0, 0, 6}} {
						if tl[0] == 2 && tl[1] == 8 && typ != quant.Q8_0 || tl[4] > 0 && (typ != quant.F16 || !gpu.wgmma) {
							continue
						}
						name := fmt.Sprintf("r%d/default", batch)
						if tl[0] >= 0 {
							name = fmt.Sprintf("r%d/%dx%d", batch, tl[0], tl[1])
						}
						if tl[2] > 0 {
							name += fmt.Sprintf("/d%d", tl[2])
						}
						if tl[3] > 0 {
							name += fmt.Sprintf("/ring%d", tl[3])
						}
						if tl[4] > 0 {
							name += fmt.Sprintf("/wg%d", tl[4])
						}
						b.Run(name, func(b *testing.B) {
							if tl[0] >= 0 {
								gpu.shape = func(int) (int, int) { return tl[0], tl[1] }
								gpu.pDepth, gpu.pRing, gpu.pWG = tl[2], tl[3], tl[4]
								defer func() { gpu.shape, gpu.pDepth, gpu.pRing, gpu.pWG = nil, 0, 0, 0 }()
							}
							benchRows(b, gpu, rng, lbl, ws, mat, batch)
						})
					}
				}
			})
		}
	}
}
