package cuda

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/tandem-run/tandem/kernels"
	"github.com/tandem-run/tandem/kernels/quant"
)

// copyRoofline is the H200's device-to-device copy, bytes read plus
// written (BenchmarkCopyRoofline, ../shared/bench/anchors.md).
const copyRoofline = 4.3e12

// Products of the few rows a verification pass has, at Qwen3-8B widths
// (attention output, gate/up, down), on each path: the tensor-core
// kernels (mma: mmaWarps' warps a block; mma4, mma8: that many), and the
// matrix-vector kernels with one weight row a warp (mv1) or two (mv2).
// Bytes are the weights one pass reads; "roof" is their rate over the
// copy roofline. Each run reads a stack of distinct matrices much larger
// than the L2.
func BenchmarkMatVecRows(b *testing.B) {
	gpu := openGPU(b)
	rng := rand.New(rand.NewPCG(3, 3))
	lbl := kernels.Label{Owner: "bench", Cat: kernels.Weights}
	shapes := []struct{ rows, n int }{{4096, 4096}, {12288, 4096}, {4096, 12288}}
	variants := []struct {
		name            string
		vec, wrs, warps int
	}{{"mma", 1, 1, 0}, {"mma4", 1, 1, 4}, {"mma8", 1, 1, 8}, {"mv1", 8, 1, 0}, {"mv2", 8, 2, 0}}
	for _, typ := range []quant.Type{quant.Q4_K, quant.Q6_K, quant.Q8_0, quant.F16} {
		for _, s := range shapes {
			b.Run(fmt.Sprintf("%v/%dx%d", typ, s.rows, s.n), func(b *testing.B) {
				ws, mat := uploadStack(b, gpu, rng, lbl, typ, s.rows, s.n, 0)
				for _, batch := range []int{1, 2, 3, 4, 5, 8} {
					for _, v := range variants {
						if batch == 1 && v.vec == 1 {
							continue
						}
						b.Run(fmt.Sprintf("r%d/%s", batch, v.name), func(b *testing.B) {
							vec, wrs, warps := gpu.vecRows, gpu.wRows, gpu.warps
							gpu.vecRows, gpu.wRows, gpu.warps = v.vec, v.wrs, v.warps
							defer func() { gpu.vecRows, gpu.wRows, gpu.warps = vec, wrs, warps }()
							benchRows(b, gpu, rng, lbl, ws, mat, batch)
							perRun := b.Elapsed().Seconds() / float64(b.N)
							b.ReportMetric(float64(mat)*float64(len(ws))/perRun/copyRoofline, "roof")
						})
					}
				}
			})
		}
	}
}

// The integer products of a verification pass at Qwen3-8B widths on the
// default paths, which keep decode's rounding (mvx_<type>, or the
// matrix-vector kernels up to defaultVecRows; Q4_K's mvxp_q4_k up to
// defaultMVXPairRows; mvx: Q4_K's mvx_q4_k there instead; mvxp: Q6_K's
// 3-8 rows on mvxp_q6_k; mvxp4: Q4_K's 2 rows on mvxp4_q4_k_2, four
// blocks a multiprocessor; mvx32: Q4_K's 32 weight rows a block), against the tensor-core kernels that do not keep it
// (mma) and the matrix-vector kernels (mv2, which do, up to 8 rows), and
// decode's one row (r1).
func BenchmarkVerifyRows(b *testing.B) {
	gpu := openGPU(b)
	rng := rand.New(rand.NewPCG(3, 3))
	lbl := kernels.Label{Owner: "bench", Cat: kernels.Weights}
	for _, typ := range []quant.Type{quant.Q4_K, quant.Q6_K, quant.Q8_0} {
		for _, s := range []struct{ rows, n int }{{4096, 4096}, {12288, 4096}, {4096, 12288}} {
			b.Run(fmt.Sprintf("%v/%dx%d", typ, s.rows, s.n), func(b *testing.B) {
				ws, mat := uploadStack(b, gpu, rng, lbl, typ, s.rows, s.n, 0)
				for _, batch := range []int{1, 2, 3, 4, 8, 16} {
					for _, v := range []struct {
						name           string
						vec, mvx, mvxp int
						occ4           bool
					}{{"default", 0, 0, 0, false}, {"mvx", 0, 0, -1, false}, {"mvxp", 0, 0, 8, false}, {"mvxp4", 0, 0, 0, true},
						{"mvx32", 0, 32, 0, false}, {"mma", 1, 0, 0, false}, {"mv2", 8, 0, 0, false}} {
						if (batch == 1 && v.name != "default") || (batch > 8 && v.vec == 8) || (typ != quant.Q4_K && (v.mvx == 32 || v.occ4)) ||
							(v.mvxp == -1 && (typ != quant.Q4_K || batch > defaultMVXPairRows(typ))) || (v.occ4 && batch != 2) ||
							(v.mvxp == 8 && (typ != quant.Q6_K || batch < 3 || batch > 8)) {
							continue
						}
						b.Run(fmt.Sprintf("r%d/%s", batch, v.name), func(b *testing.B) {
							vec, mvx, mvxp, occ4 := gpu.vecRows, gpu.mvxRows, gpu.mvxpRows, gpu.mvxpOcc4
							gpu.vecRows, gpu.mvxRows, gpu.mvxpRows, gpu.mvxpOcc4 = v.vec, v.mvx, v.mvxp, v.occ4
							defer func() { gpu.vecRows, gpu.mvxRows, gpu.mvxpRows, gpu.mvxpOcc4 = vec, mvx, mvxp, occ4 }()
							benchRows(b, gpu, rng, lbl, ws, mat, batch)
							perRun := b.Elapsed().Seconds() / float64(b.N)
							b.ReportMetric(float64(mat)*float64(len(ws))/perRun/copyRoofline, "roof")
						})
					}
				}
			})
		}
	}
}
