package cuda

import (
	"fmt"
	"math/bits"

	"github.com/tandem-run/tandem/kernels"
	"github.com/tandem-run/tandem/kernels/cuda/workspace"
	"github.com/tandem-run/tandem/kernels/quant"
)

// weightKernels names the kernel suffix of each weight type src/*.cu
// instantiates (mv_<name>_<NB>, mm_<name>, get_rows_<name>).
var weightKernels = map[quant.Type]string{
	quant.F32: "f32", quant.F16: "f16", quant.BF16: "bf16",
	quant.Q4_0: "q4_0", quant.Q4_1: "q4_1", quant.Q5_0: "q5_0", quant.Q5_1: "q5_1",
	quant.Q8_0: "q8_0", quant.IQ4_NL: "iq4_nl", quant.Q2_K: "q2_k", quant.Q3_K: "q3_k",
	quant.Q4_K: "q4_k", quant.Q5_K: "q5_k", quant.Q6_K: "q6_k", quant.IQ4_XS: "iq4_xs",
}

// mvMaxBatch is the largest batch the matrix-vector kernels take; above it
// the tensor-core kernels run, or the tiled matrix-matrix kernel for
// weight types without one.
const mvMaxBatch = workspace.MaxVectorRows

// batchVariant is the smallest compiled batch size (1, 2, 4, 8) >= nb.
func batchVariant(nb int) int {
	v := 1
	for v < nb {
		v *= 2
	}
	return v
}

// mvPath is how a MatMul runs.
type mvPath int

const (
	pathTiled   mvPath = iota // no tensor-core kernel, batch above mvMaxBatch: mm_<type>
	pathQ8                    // integer products on 8-bit activations: mvq_<type>
	pathF16Vec                // F16 in 16-byte vectors: mvv_f16
	pathGeneric               // dequantize 32 at a time: mv_<type>
	pathMMQ                   // tensor cores on 8-bit activations: mmq_<type>_<shape>
	pathMMF16                 // tensor cores, F16: mmf16_<shape>
	pathMVX                   // verification rows on tensor cores in decode's order: mvx_<type>_<8|16>
)

// pathOf is the path of o on a backend that runs products of up to vecRows
// rows on the matrix-vector kernels (0: defaultVecRows of the weight type,
// and the integer types' verification rows above it on mvx_<type>).
// Tensor-core kernels need whole units
// of 256 weights (integer types) or 32 (F16), 16-byte aligned rows where
// they load 16 bytes (Q4_K, F16), and two rows or more.
//
// By default a product of up to workspace.VerifyRows rows gives each row
// the bits decode's one-row product gives it wherever a kernel for that
// exists (Q4_K, Q6_K, Q8_0: mvx_<type>, or the matrix-vector kernels up
// to defaultVecRows; the generic types up to 8 rows: the matrix-vector
// kernels), so that greedy speculation with a
// quantized target is exactly the target alone. F16 products of several
// rows stay on tensor cores, which round the activations to F16.
func pathOf(o kernels.MatMul, vecRows int) mvPath {
	wAligned := o.W.Off%16 == 0 && (o.W.Rows == 1 || o.W.Stride%16 == 0)
	integer := workspace.QuantizesActivations(o.W.Type) && (o.W.Type != quant.Q4_K || wAligned)
	if vecRows == 0 {
		vecRows = defaultVecRows(o.W.Type)
		if integer && (o.W.Type == quant.Q8_0 || o.W.Cols%256 == 0) && o.X.Rows > vecRows && o.X.Rows <= workspace.VerifyRows {
			return pathMVX
		}
	}
	// Q8_0's tensor-core kernel stages rows with 8-byte loads
	mmqAligned := o.W.Type != quant.Q8_0 || o.W.Off%8 == 0 && (o.W.Rows == 1 || o.W.Stride%8 == 0)
	f16 := o.W.Type == quant.F16 && wAligned && o.W.Cols%8 == 0
	if o.X.Rows > max(vecRows, 1) {
		switch {
		case integer && o.W.Cols%256 == 0 && mmqAligned:
			return pathMMQ
		case f16 && o.W.Cols%32 == 0:
			return pathMMF16
		case o.X.Rows > mvMaxBatch:
			return pathTiled
		}
	}
	switch {
	case integer:
		return pathQ8
	case f16:
		return pathF16Vec
	}
	return pathGeneric
}

// defaultVecRows is the most rows a product of weights t runs on the
// matrix-vector kernels unless Options.MatVecRows says otherwise; above,
// mvx_<type> takes the verification rows. Both keep decode's rounding;
// the matrix-vector kernels grow with the rows (each warp re-reads every
// activation row from L1 for each weight row), mvx_<type> is flat from 2
// to 8 rows, so each type takes the faster (BenchmarkVerifyRows on the
// H200, us a 12288x4096 product, hspec2's call): Q6_K 2 rows mv2 25
// against mvx 36, 4 rows 47 against 36; Q8_0 2 rows 24 against 46, 4
// rows 46 against 46, 8 rows 94 against 46; Q4_K takes mvxp_q4_k or
// mvx_q4_k from 2. Q6_K's 2 rows again in hrow2's call 2: mv2 10.2 / 24.5 /
// 25.9 us at 4096x4096 / 12288x4096 / 4096x12288 against mvxp_q6_k_2's
// 11.6 / 27.1 / 29.7.
func defaultVecRows(t quant.Type) int {
	switch t {
	case quant.Q6_K:
		return 2
	case quant.Q8_0:
		return 4
	}
	return 1
}

// defaultWeightRows is how many weight rows a warp of the integer and F16
// matrix-vector kernels takes (mvq2_, mvv2_ when
// two). Two for the integer types: decode of the 8B Q4_K_M 3.372 ms a step
// against 3.412-3.421 with one (call 24, four runs), and the 2-row Q6_K
// and Q8_0 products above were measured so; one for F16, where two lost
// (8B F16 decode 4.91 against 4.60-4.63 ms).
func defaultWeightRows(t quant.Type) int {
	if workspace.QuantizesActivations(t) {
		return 2
	}
	return 1
}

// weightRows is the weight rows a warp of the matrix-vector kernels of be
// takes for a product of weights t and nb rows.
func (be *Backend) weightRows(t quant.Type, nb int) int {
	if be.wRows > 0 {
		return be.wRows
	}
	return defaultWeightRows(t)
}

// mvKernel is the matrix-vector kernel of prefix (mvq_<type>, mvv_f16)
// for nb rows with wr weight rows a warp (mvq2_<type>, mvv2_f16 for two).
func mvKernel(prefix, name string, nb, wr int) string {
	if wr == 2 {
		prefix += "2"
	}
	return fmt.Sprintf("%s_%s_%d", prefix, name, batchVariant(nb))
}

// mmaShape is the tile of a tensor-core product of nb rows of weights t
// with rows outputs: MT blocks of 16 weight rows by NT blocks of 8 batch
// rows, among the shapes mma.cu instantiates, or MT 0 for the
// shared-memory prefill tiles (mmt_<type>, 128 weight rows by 8*NT batch
// rows, NT 8 or 16). Up to TileRows rows, one block column holds the whole
// batch, so each weight is read once. Above, the fastest of
// BenchmarkPrefillTiles at 512 rows on the H200 (NOTES.md, hpp's call 2,
// us a product at 8B shapes): F16, Q4_K and Q6_K take the 128x128 tiles
// where they make 128 blocks or more (4096x4096 F16 97 against 2x4's 137,
// Q4_K 130 against 181, Q6_K 198 against 211), the 128x64 tiles where
// those make 256 (as before: 6144 rows), 2x4 below (1024x4096: Q4_K 51
// against 130 for 128x128); Q8_0 keeps 2x8 (130 against 211 for
// 128x128: its int8 mma beats the dequantized tiles).
func mmaShape(t quant.Type, nb, rows int) (mt, nt int) {
	switch {
	case nb <= 8:
		return 1, 1
	case nb <= 16:
		return 1, 2
	case nb <= workspace.TileRows:
		return 1, 4
	case t != quant.Q8_0 && (rows+127)/128*((nb+127)/128) >= 128:
		return 0, 16
	case t != quant.Q8_0 && (rows+127)/128*((nb+63)/64) >= 256:
		return 0, 8
	case t == quant.Q8_0:
		return 2, 8
	}
	return 2, 4
}

// mmtShared is the dynamic shared memory of mmt_<type>[_128]: two buffers
// of a 128-row weight tile and a bn-row activation tile, 40 halves a row.
func mmtShared(bn int) uint32 { return uint32(2 * (128 + bn) * 40 * 2) }

// mmtKernel is the prefill tile kernel of weights name and 8*nt batch rows.
func mmtKernel(name string, nt int) string {
	if nt == 16 {
		return "mmt_" + name + "_128"
	}
	return "mmt_" + name
}

// halfX is an F16 copy of x in the Aligned scratch, rows 16-byte
// aligned, and its row stride in halves: the prefill tiles of F16 weights
// read it, a quarter fewer bytes from L2 than x itself.
func (c *compiler) halfX(x kernels.Tensor) (devicePtr, int64, error) {
	p, err := c.be.addr(x)
	if err != nil {
		return 0, 0, err
	}
	n := int64(x.Cols+7) &^ 7
	dst := c.scratch(workspace.Aligned, workspace.HalfBytes(x.Rows, x.Cols))
	err = c.add("half", "copy_f32_f16", [3]uint32{ceilDiv(x.Cols, 256), uint32(x.Rows), 1}, [3]uint32{256, 1, 1}, 0,
		argPtr(p), argI64(stride(x)), argPtr(dst), argI64(n), argInt(x.Cols))
	return dst, n, err
}

// mmtDepth is how many steps ahead the prefill tiles of 8-bit and F16
// activations load by default: 4 (hpp's call 2: 8B F16 pp512 10146 ->
// 11386 tok/s from depth 2, 8B Q4_K_M 7768 -> 8089; BenchmarkPrefillTiles
// F16 4096x4096 106 -> 97 us).
const mmtDepth = 4

// mmtDepthSuffix names the kernel variant of the backend's load depth
// (mma.cu: none for 2, _3, _4).
func (be *Backend) mmtDepthSuffix() string {
	d := be.pDepth
	if d == 0 {
		d = mmtDepth
	}
	if d == 2 {
		return ""
	}
	return fmt.Sprintf("_%d", d)
}

// mmtcDefault is the shared-memory stages of the cp.async prefill tiles
// (mmtc) by default: 4 (hpre's call: 8B Q4_K_M pp512 10179-10189 tok/s
// against 10130 at 3 and 8022-8049 on the register-set tiles; 8B F16
// 13499-13594 against 13466 and 11264-11340).
const mmtcDefault = 4

// mmtcStages is the stages of the cp.async prefill tile (prefill.cu:
// mmtc_<type>_<stages>, mmtc64_ for 64 batch rows) for the products of
// group on a tile of 8*nt batch rows, or 0 where the register-set tiles
// (mmt) run them: weights other than F16, Q4_K and Q6_K, an inner
// dimension not in whole steps of 64 (F16), rows not 16-byte aligned
// (cp.async copies 16 bytes; Q6_K's 210-byte blocks leave rows aligned
// only when n is a multiple of 2048), GPUs before sm_80 (no cp.async) or
// with too little shared memory a block, and Options.PrefillRing -1 or
// PrefillF32.
func (be *Backend) mmtcStages(group []kernels.MatMul, nt int) int {
	ns := be.pRing
	if ns == 0 {
		ns = mmtcDefault
	}
	t := group[0].W.Type
	if ns < 0 || nt != 8 && nt != 16 || be.pF32 || be.info.ComputeMajor < 8 || int(mmtcShared(t, nt, ns)) > be.info.SharedOptin {
		return 0
	}
	if t != quant.F16 && t != quant.Q4_K && t != quant.Q6_K || group[0].W.Cols%64 != 0 {
		return 0
	}
	for _, o := range group {
		if o.W.Off%16 != 0 || o.W.Rows > 1 && o.W.Stride%16 != 0 {
			return 0
		}
	}
	return ns
}

// mmtwDefault is the shared-memory stages of the wgmma prefill tiles
// (mmtw) by default: 5 (hf16's call, BenchmarkPrefillTiles F16 r512 128x128
// us at 4 / 5 / 6 stages: 4096x4096 47.9 / 46.1 / 57.2, 12288x4096 121.4 /
// 115.2 / 116.0, 4096x12288 125.0 / 125.6 / 121.8; 8B F16 pp512 22374 /
// 22847 / 23010 tok/s, within run-to-run spread of each other, against
// 13600 on the mma.sync tiles).
const mmtwDefault = 5

// mmtwStages is the stages of the wgmma prefill tile of F16 weights
// (src/sm90a/prefill_wgmma.cu: mmtw_f16_<stages>, mmtw64_ for 64 batch
// rows) for the products of group on a tile of 8*nt batch rows, or 0
// where it does not run: other weight types, GPUs without the sm_90a
// kernels loaded (all but compute capability 9.0), Options.PrefillWGMMA -1
// or a PrefillRing other than 0, and what rules out the cp.async tiles
// (mmtcStages: it copies the same way).
func (be *Backend) mmtwStages(group []kernels.MatMul, nt int) int {
	ns := be.pWG
	if ns == 0 {
		ns = mmtwDefault
	}
	if ns < 0 || !be.wgmma || be.pRing != 0 || group[0].W.Type != quant.F16 || be.mmtcStages(group, nt) == 0 ||
		int(mmtwShared(nt, ns)) > be.info.SharedOptin {
		return 0
	}
	return ns
}

// mmtwShared is the dynamic shared memory of the wgmma tile of 8*nt batch
// rows and ns stages: each stage 128 weight rows and 8*nt activation rows
// of 128 bytes, and 1024 bytes to start the ring at a multiple of 1024
// (the swizzle's period).
func mmtwShared(nt, ns int) uint32 { return uint32(ns*(128+8*nt)*128 + 1024) }

// mmtwKernel is the wgmma prefill tile of 8*nt batch rows and ns stages.
func mmtwKernel(nt, ns int) string {
	if nt == 8 {
		return fmt.Sprintf("mmtw64_f16_%d", ns)
	}
	return fmt.Sprintf("mmtw_f16_%d", ns)
}

// mmtcShared is the dynamic shared memory of the cp.async tile of 8*nt
// batch rows and ns stages: each stage an F16 activation tile (8*nt rows
// of 144 bytes) and the raw weights (128 rows of 144, 48 or 160 bytes for
// F16, Q4_K, Q6_K), and for Q4_K and Q6_K two dequantized F16 weight
// tiles.
func mmtcShared(t quant.Type, nt, ns int) uint32 {
	const tile = 128 * 144
	raw, deq := 0, 2*tile
	switch t {
	case quant.F16:
		raw, deq = tile, 0
	case quant.Q4_K:
		raw = 128 * 48
	case quant.Q6_K:
		raw = 128 * 160
	}
	return uint32(ns*(8*nt*144+raw) + deq)
}

// mmtcKernel is the cp.async prefill tile of weights name, 8*nt batch
// rows and ns stages.
func mmtcKernel(name string, nt, ns int) string {
	if nt == 8 {
		return fmt.Sprintf("mmtc64_%s_%d", name, ns)
	}
	return fmt.Sprintf("mmtc_%s_%d", name, ns)
}

// mmtQ8 reports whether the prefill tiles of weights t read the 8-bit
// copy of the activations (mmtq_<type>: the integer types, unless
// Options.PrefillF32) rather than F32 ones; F16 weights read an F16 copy
// (halfX, mmth_f16) unless Options.PrefillF32.
func (be *Backend) mmtQ8(t quant.Type) bool { return t != quant.F16 && !be.pF32 }

// mmtType reports whether weights t have prefill tiles (mmt).
func mmtType(t quant.Type) bool {
	return t == quant.F16 || t == quant.Q4_K || t == quant.Q6_K || t == quant.Q8_0
}

// mmaWarps is the warps of a tensor-core block for a matrix of rows by n:
// they split n, so that a matrix of few rows still has enough loads in
// flight. The F16 few-row shapes (up to 16 warps, MMQ_MAXW in mma.cu) aim
// at about 4096 warps in all (32 a multiprocessor of an H200), each with
// a unit of work at least (two spans of 32): with 16 warps on every
// matrix, a 12288x4096 Q4_K product of 2 rows took 1.6x its 4-warp time
// (call 21). The integer few-row shapes take 8 (fewer where n has fewer
// 256-weight units): at 16 a 4096-row block (72 registers a thread) is
// alone on its multiprocessor, so 256 blocks run in two rounds with
// nothing in flight while one reduces, and at 6 (12288 rows) the 16 units
// of a 4096-wide row split 3-3-3-3-2-2; 8 was the fastest or within 7% of
// it on every 8B matrix and row count 2-8 (BenchmarkMatVecRows, call 24:
// Q4_K 12288x4096 16 us against 20, 4096x4096 8 against 9, Q6_K 4096x4096
// 13 against 15), while F16 kept its own (8 warps: 15 us against 12). The
// others have blocks enough across the batch and take 4.
func mmaWarps(path mvPath, mt, nt, rows, n int) int {
	if mt != 1 || nt > 4 {
		return 4
	}
	if path == pathMMQ {
		return min(8, max(n/256, 4))
	}
	units := n / 64
	blocks := (rows + 15) / 16
	want := (4096 + blocks - 1) / blocks
	return min(max(want, 4), 16, max(units, 4))
}

// mmaShared is the dynamic shared memory of a tensor-core block: the
// warps' tiles added at the end, or Q8_0's staging (mma.cu, Q8_STAGE).
func mmaShared(t quant.Type, mt, nt, warps int) uint32 {
	n := (warps - 1) * mt * nt * 4 * 32 * 4
	if t == quant.Q8_0 {
		n = max(n, warps*16*mt*q8Stage)
	}
	return uint32(n)
}

// q8Stage is Q8_STAGE of mma.cu.
const q8Stage = 144

// mmaShapes lists the shapes mma.cu instantiates (tests and benchmarks
// run each).
// (0, 8) and (0, 16) are the prefill tiles of 64 and 128 batch rows.
var mmaShapes = [][2]int{{1, 1}, {1, 2}, {1, 4}, {1, 8}, {2, 4}, {2, 8}, {0, 8}, {0, 16}}

// maxJobs is how many products sharing activations one launch takes.
const maxJobs = 3

// matMuls compiles the MatMul at ops[i] with the products after it that
// share its activations, weight type and kernel (Q, K, V; gate, up) as one
// launch, and folds a following residual Add into it when the product's
// own output is not read again. It returns how many ops it consumed.
func (c *compiler) matMuls(ops []kernels.Op, i int) (int, error) {
	first := ops[i].(kernels.MatMul)
	path := c.pathOf(first)
	group := []kernels.MatMul{first}
	if path == pathQ8 || path == pathF16Vec || path == pathMMQ || path == pathMMF16 || path == pathMVX {
		for j := i + 1; j < len(ops) && len(group) < maxJobs; j++ {
			next, ok := ops[j].(kernels.MatMul)
			if !ok || next.X != first.X || next.W.Type != first.W.Type || c.pathOf(next) != path || overlapsAny(next.Dst, group) {
				break
			}
			group = append(group, next)
		}
	}
	if sw, ok := c.matchGLU(ops, i, group, path); ok {
		return 3, c.glu(group[0], group[1], sw)
	}
	consumed := len(group)
	accumulate := 0
	if len(group) == 1 && i+1 < len(ops) {
		if add, ok := ops[i+1].(kernels.Add); ok && add.B == first.Dst && add.A == add.Dst &&
			kernels.SameShape(add.Dst, first.Dst) && !overlaps(add.Dst, first.X) && !overlaps(add.Dst, first.W) &&
			overwrittenBeforeRead(ops[i+2:], first.Dst) {
			group[0].Dst = add.Dst // y += W x straight into the residual
			accumulate = 1
			consumed = 2
		}
	}
	return consumed, c.matMul(group, path, accumulate)
}

// overlapsAny reports whether t shares bytes with an output of group.
func overlapsAny(t kernels.Tensor, group []kernels.MatMul) bool {
	for _, g := range group {
		if overlaps(t, g.Dst) || overlaps(t, g.X) {
			return true
		}
	}
	return false
}

// overwrittenBeforeRead reports whether an op of rest overwrites all of t
// before any op reads it: then a value put in t is never seen, inside or
// after the program, and need not be written.
func overwrittenBeforeRead(rest []kernels.Op, t kernels.Tensor) bool {
	for _, op := range rest {
		for _, in := range inputs(op) {
			if in.Valid() && overlaps(in, t) {
				return false
			}
		}
		for _, out := range outputs(op) {
			if covers(out, t) {
				return true
			}
		}
	}
	return false
}

// covers reports whether out spans every byte of t (both packed).
func covers(out, t kernels.Tensor) bool {
	return out.Buf == t.Buf && out.Packed() && t.Packed() && out.Off <= t.Off && t.Off+t.Bytes() <= out.Off+out.Bytes()
}

// matMul launches the products of group (same X, type and path).
func (c *compiler) matMul(group []kernels.MatMul, path mvPath, accumulate int) error {
	o := group[0]
	n, nb := o.W.Cols, o.X.Rows
	name := weightKernels[o.W.Type]
	if path == pathTiled || path == pathGeneric {
		w, y, _, err := c.addr3(o.W, o.Dst, kernels.Tensor{})
		if err != nil {
			return err
		}
		x, xstride, err := c.alignedX(o.X)
		if err != nil {
			return err
		}
		rows := o.W.Rows
		args := []uint64{argPtr(w), argI64(o.W.Stride), argPtr(x), argI64(xstride), argPtr(y), argI64(stride(o.Dst)),
			argInt(rows), argInt(n), argInt(nb), argInt(accumulate)}
		if path == pathTiled {
			return c.add(o.Name(), "mm_"+name, [3]uint32{ceilDiv(rows, 64), ceilDiv(nb, 64), 1}, [3]uint32{256, 1, 1}, 0, args...)
		}
		return c.add(o.Name(), fmt.Sprintf("mv_%s_%d", name, batchVariant(nb)),
			[3]uint32{ceilDiv(rows, mvWarps), 1, 1}, [3]uint32{32 * mvWarps, 1, 1}, 0, args...)
	}
	// job parameters, unused jobs with zero rows
	var args []uint64
	maxRows := 0
	for j := 0; j < maxJobs; j++ {
		if j >= len(group) {
			args = append(args, 0, 0, 0, 0, argInt(0))
			continue
		}
		g := group[j]
		w, y, _, err := c.addr3(g.W, g.Dst, kernels.Tensor{})
		if err != nil {
			return err
		}
		args = append(args, argPtr(w), argI64(g.W.Stride), argPtr(y), argI64(stride(g.Dst)), argInt(g.W.Rows))
		maxRows = max(maxRows, g.W.Rows)
	}
	wr := c.be.weightRows(o.W.Type, nb)
	grid := [3]uint32{ceilDiv(maxRows, wr*mvWarps), uint32(len(group)), 1}
	block := [3]uint32{32 * mvWarps, 1, 1}
	var kernel string
	shape := ""
	var shared uint32
	if path == pathMMQ || path == pathMMF16 {
		mt, nt := c.be.mmaShape(o.W.Type, nb, maxRows)
		if ns := c.be.mmtwStages(group, nt); mt == 0 && ns > 0 {
			xh, xstride, err := c.halfX(o.X)
			if err != nil {
				return err
			}
			args = append(args, argPtr(xh), argI64(xstride), argInt(n), argInt(nb), argInt(accumulate))
			return c.add(o.Name(), mmtwKernel(nt, ns),
				[3]uint32{ceilDiv(maxRows, 128), uint32(len(group)), ceilDiv(nb, 8*nt)}, [3]uint32{256, 1, 1},
				mmtwShared(nt, ns), args...)
		}
		if ns := c.be.mmtcStages(group, nt); mt == 0 && ns > 0 {
			xh, xstride, err := c.halfX(o.X)
			if err != nil {
				return err
			}
			args = append(args, argPtr(xh), argI64(xstride), argInt(n), argInt(nb), argInt(accumulate))
			return c.add(o.Name(), mmtcKernel(name, nt, ns),
				[3]uint32{ceilDiv(maxRows, 128), uint32(len(group)), ceilDiv(nb, 8*nt)}, [3]uint32{256, 1, 1},
				mmtcShared(o.W.Type, nt, ns), args...)
		}
		if mt == 0 && mmtType(o.W.Type) {
			kernel := mmtKernel(name, nt)
			if o.W.Type == quant.F16 && !c.be.pF32 {
				xh, xstride, err := c.halfX(o.X)
				if err != nil {
					return err
				}
				kernel = "mmth" + kernel[3:] + c.be.mmtDepthSuffix()
				args = append(args, argPtr(xh), argI64(xstride))
			} else if c.be.mmtQ8(o.W.Type) {
				xq, xd, err := c.quantizeQ8(o.X)
				if err != nil {
					return err
				}
				kernel = "mmtq" + kernel[3:] + c.be.mmtDepthSuffix()
				args = append(args, argPtr(xq), argPtr(xd))
			} else {
				x, xstride, err := c.alignedX(o.X)
				if err != nil {
					return err
				}
				args = append(args, argPtr(x), argI64(xstride))
			}
			args = append(args, argInt(n), argInt(nb), argInt(accumulate))
			return c.add(o.Name(), kernel, [3]uint32{ceilDiv(maxRows, 128), uint32(len(group)), ceilDiv(nb, 8*nt)},
				[3]uint32{256, 1, 1}, mmtShared(8*nt), args...)
		}
		mt, nt = max(mt, 1), max(nt, 1)
		shape = fmt.Sprintf("%dx%d", mt, nt)
		warps := mmaWarps(path, mt, nt, maxRows, n)
		if c.be.warps > 0 && mt == 1 && nt <= 4 {
			warps = c.be.warps
		}
		grid = [3]uint32{ceilDiv(maxRows, 16*mt), uint32(len(group)), ceilDiv(nb, 8*nt)}
		block = [3]uint32{uint32(32 * warps), 1, 1}
		shared = mmaShared(o.W.Type, mt, nt, warps)
	}
	mvxRows := c.be.mvxBlockRows(o.W.Type, nb)
	if path == pathMVX {
		grid = [3]uint32{ceilDiv(maxRows, mvxRows), uint32(len(group)), 1}
		block = [3]uint32{32 * mvxWarps, 1, 1}
	}
	if path == pathQ8 || path == pathMMQ || path == pathMVX {
		xq, xd, err := c.quantizeQ8(o.X)
		if err != nil {
			return err
		}
		kernel = mvKernel("mvq", name, nb, wr)
		switch path {
		case pathMMQ:
			kernel = fmt.Sprintf("mmq_%s_%s", name, shape)
		case pathMVX:
			kernel = c.be.mvxKernel(o.W.Type, name, nb)
		}
		args = append(args, argPtr(xq), argPtr(xd))
	} else {
		x, xstride, err := c.alignedX(o.X)
		if err != nil {
			return err
		}
		kernel = mvKernel("mvv", "f16", nb, wr)
		if path == pathMMF16 {
			kernel = "mmf16_" + shape
		}
		args = append(args, argPtr(x), argI64(xstride))
	}
	args = append(args, argInt(n), argInt(nb), argInt(accumulate))
	return c.add(o.Name(), kernel, grid, block, shared, args...)
}

// q8Region is where an op puts x's quantized copy: the start of the Q8
// scratch.
func (c *compiler) q8Region(x kernels.Tensor) (xq, xd devicePtr) { return c.q8RegionAt(x, 0) }

// q8RegionAt is a quantized copy of x off bytes into the Q8 scratch.
func (c *compiler) q8RegionAt(x kernels.Tensor, off int64) (xq, xd devicePtr) {
	scales, bytes := workspace.Q8Layout(x.Rows, x.Cols)
	base := c.scratch(workspace.Q8, off+bytes) + devicePtr(off)
	return base, base + devicePtr(scales)
}

// holdQ8 records that, if err is nil, the Q8 scratch holds t's quantized
// copy off bytes in.
func (c *compiler) holdQ8(t kernels.Tensor, off int64, err error) {
	c.q8, c.q8Off, c.q8Set = t, off, err == nil
}

// quantizesNext reports whether ops[i] is a product that will read t
// through the integer kernels, so t's producer can quantize it on the way.
func (c *compiler) quantizesNext(ops []kernels.Op, i int, t kernels.Tensor) bool {
	if i >= len(ops) {
		return false
	}
	mm, ok := ops[i].(kernels.MatMul)
	if !ok || mm.X != t || kernels.Check(mm) != nil {
		return false
	}
	p := c.pathOf(mm)
	return p == pathQ8 || p == pathMMQ || p == pathMVX
}

// pathOf is o's path on the compiler's backend.
func (c *compiler) pathOf(o kernels.MatMul) mvPath { return pathOf(o, c.be.vecRows) }

// mvxBlockRows is the weight rows a block of mvx_<type> takes for nb rows
// of weights t: 16 (mvx_<type>_8, _16), or for Q4_K 32 (mvx2_q4_k_8, up
// to 8 rows) where a benchmark asks for it.
func (be *Backend) mvxBlockRows(t quant.Type, nb int) int {
	if be.mvxRows == 32 && nb <= 8 && t == quant.Q4_K {
		return 32
	}
	return 16
}

// mvxKernel is the kernel of a pathMVX product of nb rows of weights t
// (name: the type's kernel suffix).
func (be *Backend) mvxKernel(t quant.Type, name string, nb int) string {
	switch {
	case be.mvxBlockRows(t, nb) == 32:
		return "mvx2_" + name + "_8"
	case nb <= 2 && t == quant.Q4_K && be.mvxpOcc4 && be.mvxPairRows(t) > 0:
		return "mvxp4_q4_k_2"
	case nb <= be.mvxPairRows(t):
		r := 1 << bits.Len(uint(nb-1))
		if t == quant.Q6_K {
			r = max(r, 4) // no 2-row kernel: 2 rows run on mvq2_q6_k_2
		}
		return fmt.Sprintf("mvxp_%s_%d", name, r)
	}
	return fmt.Sprintf("mvx_%s_%d", name, 8*ceilDiv(nb, 8))
}

// mvxPairRows is the most rows a product of weights t runs on mvxp_<type>
// (Options.MVXPairRows, at most the type's largest kernel; 0 when none).
func (be *Backend) mvxPairRows(t quant.Type) int {
	switch {
	case be.mvxpRows == -1 || t != quant.Q4_K && t != quant.Q6_K:
		return 0
	case be.mvxpRows == 0:
		return defaultMVXPairRows(t)
	case t == quant.Q4_K:
		return min(be.mvxpRows, 4)
	}
	return be.mvxpRows
}

// defaultMVXPairRows is the most rows a verification product of weights t
// runs on mvxp_<type> by default (kernels/cuda/NOTES.md, hrow2's calls):
// Q4_K 2 to 4 rows (mvxp_q4_k_2 5.5-11.9 us against mvx_q4_k_8's 6.8-16.0
// at the 8B widths, faster than decode's own 5.6-13.6). Q6_K none:
// mvxp_q6_k (Options.MVXPairRows) lost to the matrix-vector kernels at 2
// rows and to mvx_q6_k on the 8B's 4096x12288 at 4 and 8.
func defaultMVXPairRows(t quant.Type) int {
	if t == quant.Q4_K {
		return 4
	}
	return 0
}

// mvWarps is MV_WARPS of matvec.cu: rows per block; mvxWarps MVX_WARPS.
const (
	mvWarps  = 4
	mvxWarps = 8
)

// quantizeQ8 returns x quantized to 8 bits (values, then per-32 scales),
// adding the quantize step unless the region already holds x.
func (c *compiler) quantizeQ8(x kernels.Tensor) (xq, xd devicePtr, err error) {
	if c.q8Set && c.q8 == x {
		xq, xd = c.q8RegionAt(x, c.q8Off)
		return xq, xd, nil
	}
	xq, xd = c.q8Region(x)
	src, err := c.be.addr(x)
	if err != nil {
		return 0, 0, err
	}
	n, rows := x.Cols, x.Rows
	err = c.add("quantize", "quantize_q8", [3]uint32{ceilDiv(rows*n, 256), 1, 1}, [3]uint32{256, 1, 1}, 0,
		argPtr(src), argI64(stride(x)), argPtr(xq), argPtr(xd), argInt(n), argInt(rows))
	c.holdQ8(x, 0, err)
	return xq, xd, err
}

// alignedX returns x's address and row stride in elements, first copying
// it into scratch when its rows are not 16-byte aligned (the kernels read
// activations as float4).
func (c *compiler) alignedX(x kernels.Tensor) (devicePtr, int64, error) {
	p, err := c.be.addr(x)
	if err != nil {
		return 0, 0, err
	}
	if x.Off%16 == 0 && (x.Rows == 1 || x.Stride%16 == 0) {
		return p, stride(x), nil
	}
	n := int64(x.Cols+3) &^ 3
	dst := c.scratch(workspace.Aligned, workspace.AlignedBytes(x.Rows, x.Cols))
	err = c.add("align", "copy_f32_f32", [3]uint32{ceilDiv(x.Cols, 256), uint32(x.Rows), 1}, [3]uint32{256, 1, 1}, 0,
		argPtr(p), argI64(stride(x)), argPtr(dst), argI64(n), argInt(x.Cols))
	return dst, n, err
}
