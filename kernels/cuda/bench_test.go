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
	s, d := deviceTensor(b, gpu, lbl, quant.I8, 1, n), deviceTensor(b, gpu, lbl, quant.I8, 1, n)
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

// deviceTensor is a [rows, cols] tensor of typ on be, freed when the test
// or benchmark ends.
func deviceTensor(t testing.TB, be *Backend, lbl kernels.Label, typ quant.Type, rows, cols int) kernels.Tensor {
	t.Helper()
	rb, err := typ.RowBytes(int64(cols))
	if err != nil {
		t.Fatal(err)
	}
	buf, err := be.Alloc(lbl, rb*int64(rows))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { be.Free(buf) })
	return kernels.NewTensor(buf, typ, rows, cols, 0)
}

// benchFill writes random values of standard deviation std (synth.Fill's)
// into each of ts.
func benchFill(b *testing.B, gpu *Backend, rng *rand.Rand, std float64, ts ...kernels.Tensor) {
	b.Helper()
	for _, t := range ts {
		data := make([]byte, t.Bytes())
		if err := synth.Fill(rng, t.Type, data, std); err != nil {
			b.Fatal(err)
		}
		if err := gpu.Write(t, data); err != nil {
			b.Fatal(err)
		}
	}
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
					ws, mat := uploadStack(b, gpu, rng, lbl, typ, s.rows, s.n, 0)
					xt, yt := benchRowsIO(b, gpu, rng, lbl, batch, s.n, s.rows)
					var ops []kernels.Op
					for _, w := range ws {
						ops = append(ops, kernels.MatMul{Dst: yt, W: w, X: xt})
					}
					benchProgram(b, gpu, ops, mat*int64(len(ws)))
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
			k, v := deviceTensor(b, gpu, lbl, quant.F16, ctxLen, nKV*hd), deviceTensor(b, gpu, lbl, quant.F16, ctxLen, nKV*hd)
			q, y := deviceTensor(b, gpu, lbl, quant.F32, 1, nHead*hd), deviceTensor(b, gpu, lbl, quant.F32, 1, nHead*hd)
			pos := deviceTensor(b, gpu, lbl, quant.I32, 1, 1)
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
	x := deviceTensor(b, gpu, kernels.Label{Owner: "bench", Cat: kernels.Scratch}, quant.F32, 1, 1024)
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
	tensor := func(typ quant.Type, rows, cols int) kernels.Tensor { return deviceTensor(b, gpu, lbl, typ, rows, cols) }
	q, k, v := tensor(quant.F32, 1, nHead*hd), tensor(quant.F32, 1, nKV*hd), tensor(quant.F32, 1, nKV*hd)
	kc, vc := tensor(quant.F16, ctxLen, nKV*hd), tensor(quant.F16, ctxLen, nKV*hd)
	qw, kw := tensor(quant.F32, 1, hd), tensor(quant.F32, 1, hd)
	pos := tensor(quant.I32, 1, 1)
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
				ws, mat := uploadStack(b, gpu, rng, lbl, typ, s.rows, s.n, 0)
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

// uploadStack uploads copies distinct rows x n matrices of typ (one
// random matrix, many copies; copies 0: about a GiB of them) and returns
// them and one's bytes.
func uploadStack(b *testing.B, gpu *Backend, rng *rand.Rand, lbl kernels.Label, typ quant.Type, rows, n, copies int) ([]kernels.Tensor, int64) {
	rb, _ := typ.RowBytes(int64(n))
	mat := rb * int64(rows)
	data := make([]byte, mat)
	if err := synth.Fill(rng, typ, data, 0.02); err != nil {
		b.Fatal(err)
	}
	if copies == 0 {
		copies = int((1<<30)/mat) + 1
	}
	var ws []kernels.Tensor
	for range copies {
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
	xt, yt := benchRowsIO(b, gpu, rng, lbl, batch, n, rows)
	var ops []kernels.Op
	for _, w := range ws {
		ops = append(ops, kernels.MatMul{Dst: yt, W: w, X: xt})
	}
	benchProgram(b, gpu, ops, mat*int64(len(ws)))
	perRun := b.Elapsed().Seconds() / float64(b.N)
	b.ReportMetric(2*float64(batch)*float64(rows)*float64(n)*float64(len(ws))/perRun/1e12, "TFLOP/s")
}

// benchRowsIO is a product's batch rows of n random activations (normal
// values) and its [batch, rows] output.
func benchRowsIO(b *testing.B, gpu *Backend, rng *rand.Rand, lbl kernels.Label, batch, n, rows int) (x, y kernels.Tensor) {
	x = deviceTensor(b, gpu, lbl, quant.F32, batch, n)
	benchFill(b, gpu, rng, 1, x)
	return x, deviceTensor(b, gpu, lbl, quant.F32, batch, rows)
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
			k, v := deviceTensor(b, gpu, lbl, quant.F16, ctxLen, nKV*hd), deviceTensor(b, gpu, lbl, quant.F16, ctxLen, nKV*hd)
			q, y := deviceTensor(b, gpu, lbl, quant.F32, c.rows, nHead*hd), deviceTensor(b, gpu, lbl, quant.F32, c.rows, nHead*hd)
			pos := deviceTensor(b, gpu, lbl, quant.I32, 1, c.rows)
			benchFill(b, gpu, rand.New(rand.NewPCG(5, 5)), 1, k, v, q)
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
				k, v := deviceTensor(b, gpu, lbl, quant.F16, capacity, nKV*hd), deviceTensor(b, gpu, lbl, quant.F16, capacity, nKV*hd)
				q, y := deviceTensor(b, gpu, lbl, quant.F32, 1, nHead*hd), deviceTensor(b, gpu, lbl, quant.F32, 1, nHead*hd)
				pos := deviceTensor(b, gpu, lbl, quant.I32, 1, 1)
				benchFill(b, gpu, rand.New(rand.NewPCG(3, 3)), 1, k, v, q)
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
				ws, mat := uploadStack(b, gpu, rng, lbl, typ, s.rows, s.n, 4)
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
