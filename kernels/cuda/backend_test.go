package cuda

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"
	"testing"

	"github.com/tandem-run/tandem/kernels"
	"github.com/tandem-run/tandem/kernels/quant"
)

// Without a GPU (CI), Open must fail with an error naming the cause, not
// crash; with one it must open.
func TestOpen(t *testing.T) {
	be, err := Open(testOptions())
	if err != nil {
		if !errors.Is(err, ErrNoDriver) && !errors.Is(err, ErrNoDevice) && !errors.Is(err, ErrInvalidDevice) {
			t.Fatalf("Open: %v (want ErrNoDriver, ErrNoDevice or ErrInvalidDevice)", err)
		}
		t.Logf("no device, as expected here: %v", err)
		return
	}
	defer be.Close()
	info := be.Info()
	if info.Name == "" || info.Multiprocessors == 0 || info.TotalMemory == 0 {
		t.Errorf("device info incomplete: %+v", info)
	}
	t.Logf("%s: %+v", be.Name(), info)
	if _, err := Open(Options{Ordinal: 1 << 20}); !errors.Is(err, ErrInvalidDevice) {
		t.Errorf("Open of a missing ordinal: %v, want ErrInvalidDevice", err)
	}
}

// Every kernel the compiler can ask for is in the embedded PTX (checked
// from the PTX text, so this runs without a GPU).
func TestEmbeddedKernels(t *testing.T) {
	// Both variants (ptx for compute_75, ptx/sm90 for dependent launch)
	// must define every kernel.
	for _, dir := range []string{"ptx", dependentPTX} {
		t.Run(dir, func(t *testing.T) { checkKernels(t, dir) })
	}
	t.Run(archPTX, func(t *testing.T) {
		have := map[string]bool{}
		entries, err := fs.ReadDir(ptxFiles, archPTX)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			src, err := ptxFiles.ReadFile(path.Join(archPTX, e.Name()))
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(src), "\n.target sm_90a") {
				t.Errorf("%s: not built for sm_90a", e.Name())
			}
			for _, name := range ptxEntries(src) {
				have[name] = true
			}
		}
		for _, nt := range []int{8, 16} {
			for ns := 4; ns <= 6; ns++ {
				if !have[mmtwKernel(nt, ns)] {
					t.Errorf("%s misses %s", archPTX, mmtwKernel(nt, ns))
				}
			}
		}
	})
}

// On a GPU of compute capability 9.0 the backend must load the sm_90a
// kernels it carries, or the F16 prefill runs the slower tiles unseen.
func TestArchKernelsLoad(t *testing.T) {
	be := openGPU(t)
	if be.info.ComputeMajor != 9 || be.info.ComputeMinor != 0 {
		t.Skipf("compute capability %d.%d: no sm_90a kernels", be.info.ComputeMajor, be.info.ComputeMinor)
	}
	fsys := testOptions().Kernels
	if fsys == nil {
		fsys = ptxFiles
	}
	if hasDir(fsys, archPTX) && !be.wgmma {
		t.Errorf("the kernels of %s did not load", archPTX)
	}
}

func checkKernels(t *testing.T, dir string) {
	have := map[string]bool{}
	entries, err := fs.ReadDir(ptxFiles, dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.IsDir() || path.Ext(e.Name()) != ".ptx" {
			continue
		}
		src, err := ptxFiles.ReadFile(path.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range ptxEntries(src) {
			have[name] = true
		}
	}
	want := []string{"quantize_q8", "rms_norm", "rms_norm_q8", "swiglu_q8", "softmax", "argmax", "top_k_chunk", "top_k_merge",
		"get_rows_f32_any", "set_rows_f32", "set_rows_f16", "add_f32", "mul_f32", "swiglu_f32",
		"copy_f32_f32", "copy_f32_f16", "copy_f16_f32", "copy_f16_f16", "rope_f32",
		"attention_f32", "attention_f16", "attention_seqs_f32", "attention_seqs_f16", "spin"}
	want = append(want, "moe_topk", "moe_group", "moe_sum", "geglu_f32", "scale_f32")
	for _, name := range moeTypes {
		want = append(want, "moe_logits_"+name, "moe_gate_up_"+name, "moe_down_"+name)
	}
	for _, k := range windowCaches {
		for _, v := range windowCaches {
			want = append(want, "attention_window_"+k+"_"+v)
		}
	}
	for _, name := range weightKernels {
		want = append(want, "mm_"+name, "get_rows_"+name)
		for _, nb := range []int{1, 2, 4, 8} {
			want = append(want, fmt.Sprintf("mv_%s_%d", name, nb))
		}
	}
	for _, nb := range []int{1, 2, 4, 8} {
		for _, name := range []string{"mvv_f16", "mvq_q8_0", "mvq_q4_k", "mvq_q6_k", "mvq_glu_q8_0", "mvq_glu_q4_k", "mvq_glu_q6_k",
			"mvv2_f16", "mvq2_q8_0", "mvq2_q4_k", "mvq2_q6_k"} {
			want = append(want, fmt.Sprintf("%s_%d", name, nb))
		}
	}
	want = append(want, "attention_rows_f32", "attention_rows_f32_t16", "attention_rows_f16")
	for _, name := range []string{"f16", "q4_k", "q6_k", "q8_0"} {
		want = append(want, "mmt_"+name, "mmt_"+name+"_128")
		pre := "mmtq_"
		if name == "f16" {
			pre = "mmth_"
		}
		for _, d := range []string{"", "_3", "_4"} {
			want = append(want, pre+name+d, pre+name+"_128"+d)
		}
	}
	want = append(want, "attention_fa_f16_64", "attention_fa_f16_128")
	want = append(want, "set_rows_kv", "attn_prep_kv", "mvx_q4_k_8", "mvx_q4_k_16", "mvx2_q4_k_8", "mvx_q6_k_8", "mvx_q6_k_16",
		"mvx_q8_0_8", "mvx_q8_0_16", "mvxp_q4_k_2", "mvxp_q4_k_4", "mvxp4_q4_k_2",
		"mvxp_q6_k_4", "mvxp_q6_k_8")
	for kt, k := range kvCaches {
		for vt, v := range kvCaches {
			if !floatPair(kt, vt) {
				want = append(want, "attention_kv_"+k.name+"_"+v.name, "attention_rows_kv_"+k.name+"_"+v.name)
			}
		}
	}
	for _, sh := range mmaShapes {
		if sh[0] == 0 {
			continue // the prefill tiles, mmt
		}
		for _, name := range []string{"mmf16", "mmq_q8_0", "mmq_q4_k", "mmq_q6_k"} {
			want = append(want, fmt.Sprintf("%s_%dx%d", name, sh[0], sh[1]))
		}
	}
	for _, name := range want {
		if !have[name] {
			t.Errorf("kernel %s missing from %s (run go generate on a machine with nvcc)", name, dir)
		}
	}
}

// openCapped opens a virtual device of GPU 0 capped at limit bytes, closed
// when the test ends.
func openCapped(t *testing.T, limit int64) *Backend {
	o := testOptions()
	o.Name, o.MemoryLimit = "cuda0-small", limit
	return openGPUWith(t, o)
}

// Usage counts every byte by label; Free returns it; a capped (virtual)
// device refuses what would pass its cap with ErrOutOfMemory.
func TestAllocAccounting(t *testing.T) {
	gpu := openGPU(t)
	vd := openCapped(t, 1<<20)
	weights := kernels.Label{Owner: "target", Cat: kernels.Weights}
	kv := kernels.Label{Owner: "target", Cat: kernels.KV}
	a, err := vd.Alloc(weights, 600<<10)
	if err != nil {
		t.Fatal(err)
	}
	b, err := vd.Upload(kv, make([]byte, 300<<10))
	if err != nil {
		t.Fatal(err)
	}
	if u := vd.Usage(); u[weights] != 600<<10 || u[kv] != 300<<10 || u.Total() != 900<<10 {
		t.Errorf("usage %v", u)
	}
	if _, err := vd.Alloc(kv, 200<<10); !errors.Is(err, kernels.ErrOutOfMemory) {
		t.Errorf("alloc past the cap: %v, want ErrOutOfMemory", err)
	}
	if err := vd.Free(a); err != nil {
		t.Fatal(err)
	}
	if err := vd.Free(a); err == nil {
		t.Error("double free accepted")
	}
	if err := gpu.Free(b); !errors.Is(err, kernels.ErrForeignBuffer) {
		t.Errorf("free on another backend: %v, want ErrForeignBuffer", err)
	}
	if u := vd.Usage(); u.Total() != 300<<10 {
		t.Errorf("usage after free %v", u)
	}
	// The driver's own out-of-memory is an ErrOutOfMemory too.
	if _, err := gpu.Alloc(weights, 1<<50); !errors.Is(err, kernels.ErrOutOfMemory) {
		t.Errorf("alloc of 1 PiB: %v, want ErrOutOfMemory", err)
	}
}

// Uploads and Allocs after ReserveSlab lie back to back in one allocation:
// their contents round-trip (Allocs zeroed), they count under their labels,
// one that does not fit gets an allocation of its own, the device's free memory drops by the
// reservation (rounded to the driver's 2 MiB page) and not per upload, and
// the slab goes with its last upload. A reservation past a virtual
// device's cap is refused.
func TestUploadSlab(t *testing.T) {
	gpu := openGPU(t)
	lbl := kernels.Label{Owner: "target", Cat: kernels.Weights}
	// Ten buffers just over a page each: one allocation apiece would take
	// two pages each, 40 MiB.
	const page = 2 << 20
	sizes := make([]int64, 10)
	var reserved int64
	for i := range sizes {
		sizes[i] = page + 4096 + int64(i)
		reserved += alignUp(sizes[i])
	}
	free0, _, err := gpu.MemoryInfo()
	if err != nil {
		t.Fatal(err)
	}
	if err := gpu.ReserveSlab(sizes); err != nil {
		t.Fatal(err)
	}
	var bufs []kernels.Buffer
	var datas [][]byte
	var total int64
	for i, n := range append(sizes, 1<<20) { // the last one does not fit
		data := make([]byte, n)
		var b kernels.Buffer
		var err error
		if i%2 == 0 { // Alloc: zeroed
			b, err = gpu.Alloc(lbl, n)
		} else {
			for j := range data {
				data[j] = byte(i*31 + j*7)
			}
			b, err = gpu.Upload(lbl, data)
		}
		if err != nil {
			t.Fatal(err)
		}
		bufs, datas, total = append(bufs, b), append(datas, data), total+n
	}
	free1, _, err := gpu.MemoryInfo()
	if err != nil {
		t.Fatal(err)
	}
	slab := (reserved + page - 1) / page * page
	if used := free0 - free1; used < slab || used > slab+page {
		t.Errorf("free memory dropped by %d bytes, want the slab's %d and up to a page for the upload that did not fit", used, slab)
	}
	for i, b := range bufs {
		cb := b.(*buffer)
		if (cb.slab != nil) != (i < len(sizes)) {
			t.Errorf("upload %d in a slab: %v", i, cb.slab != nil)
		}
		got := make([]byte, len(datas[i]))
		if err := gpu.Read(got, kernels.NewTensor(b, quant.I8, 1, len(got), 0)); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, datas[i]) {
			t.Errorf("upload %d does not round-trip", i)
		}
	}
	if u := gpu.Usage(); u[lbl] != total {
		t.Errorf("usage %v, want %d under %v", u, total, lbl)
	}
	for _, b := range bufs {
		if err := gpu.Free(b); err != nil {
			t.Fatal(err)
		}
	}
	if free2, _, err := gpu.MemoryInfo(); err != nil || free2 < free0-page {
		t.Errorf("free memory %d after freeing every upload, %d before (%v)", free2, free0, err)
	}

	vd := openCapped(t, 1<<20)
	if err := vd.ReserveSlab([]int64{600 << 10, 600 << 10}); !errors.Is(err, kernels.ErrOutOfMemory) {
		t.Errorf("reservation past the cap: %v, want ErrOutOfMemory", err)
	}
}

// Alloc zeroes; Write, Read and Copy round-trip, strided too; CopyFrom
// moves a tensor between two virtual devices on one GPU.
func TestMemoryRoundTrip(t *testing.T) {
	gpu := openGPU(t)
	o := testOptions()
	o.Name, o.MemoryLimit = "cuda0-b", 64<<20
	other := openGPUWith(t, o)
	lbl := kernels.Label{Owner: "test", Cat: kernels.Scratch}
	buf, err := gpu.Alloc(lbl, 4*64)
	if err != nil {
		t.Fatal(err)
	}
	all := kernels.NewTensor(buf, quant.F32, 8, 8, 0)
	got := make([]float32, 64)
	if err := gpu.Read(kernels.F32Bytes(got), all); err != nil {
		t.Fatal(err)
	}
	for i, v := range got {
		if v != 0 {
			t.Fatalf("Alloc left element %d = %v", i, v)
		}
	}
	src := make([]float32, 32)
	for i := range src {
		src[i] = float32(i) + 0.5
	}
	top := kernels.NewTensor(buf, quant.F32, 4, 8, 0)
	if err := gpu.Write(top, kernels.F32Bytes(src)); err != nil {
		t.Fatal(err)
	}
	// copy columns 0..4 of rows 0..4 into columns 4..8 of rows 4..8
	if err := gpu.Copy(all.RowSlice(4, 4).ColSlice(4, 4), top.ColSlice(0, 4)); err != nil {
		t.Fatal(err)
	}
	if err := gpu.Read(kernels.F32Bytes(got), all); err != nil {
		t.Fatal(err)
	}
	for r := 0; r < 4; r++ {
		for c := 0; c < 4; c++ {
			if g, w := got[(r+4)*8+4+c], src[r*8+c]; g != w {
				t.Fatalf("strided copy: [%d][%d] = %v, want %v", r+4, c+4, g, w)
			}
		}
	}
	ob, err := other.Alloc(lbl, 4*32)
	if err != nil {
		t.Fatal(err)
	}
	dst := kernels.NewTensor(ob, quant.F32, 4, 8, 0)
	if err := other.CopyFrom(dst, gpu, top); err != nil {
		t.Fatal(err)
	}
	back := make([]float32, 32)
	if err := other.Read(kernels.F32Bytes(back), dst); err != nil {
		t.Fatal(err)
	}
	for i := range back {
		if back[i] != src[i] {
			t.Fatalf("CopyFrom: element %d = %v, want %v", i, back[i], src[i])
		}
	}
	if err := gpu.Write(top, make([]byte, 3)); !errors.Is(err, kernels.ErrShape) {
		t.Errorf("short write: %v, want ErrShape", err)
	}
}

// A cancelled context stops Run before it enqueues anything.
func TestRunCancelled(t *testing.T) {
	gpu := openGPU(t)
	lbl := kernels.Label{Owner: "test", Cat: kernels.Scratch}
	buf, err := gpu.Alloc(lbl, 4*16)
	if err != nil {
		t.Fatal(err)
	}
	x := kernels.NewTensor(buf, quant.F32, 1, 16, 0)
	p, err := gpu.Compile([]kernels.Op{kernels.Add{Dst: x, A: x, B: x}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := p.Run(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Run on a cancelled context: %v", err)
	}
	if _, err := gpu.Compile([]kernels.Op{kernels.Add{Dst: x, A: x, B: x.Reshape(2, 8)}}); err == nil {
		t.Error("Compile accepted mismatched shapes")
	}
}

// A chain of kernels each reading what the one before wrote: with
// dependent launch (sm_90) a kernel may be scheduled before its
// predecessor ends, so a missing wait would show here as a lost increment.
// 400 launches of x += 1 over 1M values, eager, captured and replayed.
func TestDependentChain(t *testing.T) {
	gpu := openGPU(t)
	t.Logf("dependent launch: %v", gpu.DependentLaunch())
	const n, steps = 1 << 20, 400
	lbl := kernels.Label{Owner: "test", Cat: kernels.Scratch}
	xb, err := gpu.Alloc(lbl, 4*n)
	if err != nil {
		t.Fatal(err)
	}
	ob, err := gpu.Alloc(lbl, 4*n)
	if err != nil {
		t.Fatal(err)
	}
	x, one := kernels.NewTensor(xb, quant.F32, 1, n, 0), kernels.NewTensor(ob, quant.F32, 1, n, 0)
	ones := make([]float32, n)
	for i := range ones {
		ones[i] = 1
	}
	if err := gpu.Write(one, kernels.F32Bytes(ones)); err != nil {
		t.Fatal(err)
	}
	if err := gpu.Write(x, kernels.F32Bytes(make([]float32, n))); err != nil {
		t.Fatal(err)
	}
	ops := make([]kernels.Op, steps)
	for i := range ops {
		ops[i] = kernels.Add{Dst: x, A: x, B: one}
	}
	p, err := gpu.Compile(ops)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	got := make([]float32, n)
	for run := 1; run <= 3; run++ { // eager, capture, replay
		if err := p.Run(context.Background()); err != nil {
			t.Fatal(err)
		}
		if err := gpu.Read(kernels.F32Bytes(got), x); err != nil {
			t.Fatal(err)
		}
		for i, v := range got {
			if v != float32(run*steps) {
				t.Fatalf("run %d: x[%d] = %v, want %d", run, i, v, run*steps)
			}
		}
	}
}
