package cuda

import (
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"math"
	"math/rand/v2"
	"os"
	"testing"

	"github.com/tandem-run/tandem/kernels"
	"github.com/tandem-run/tandem/kernels/cpu"
	"github.com/tandem-run/tandem/kernels/quant"
	"github.com/tandem-run/tandem/kernels/synth"
)

var kernelDir = flag.String("cuda.kernels", "", "directory holding ptx/*.ptx to load instead of the embedded kernels")

// testOptions are device 0's, with the kernels of -cuda.kernels if given.
func testOptions() Options {
	var o Options
	if *kernelDir != "" {
		o.Kernels = os.DirFS(*kernelDir)
	}
	return o
}

// openGPU opens device 0 or skips the test on a machine without one.
func openGPU(t testing.TB) *Backend { return openGPUWith(t, testOptions()) }

// openGPUWith is openGPU with options o.
func openGPUWith(t testing.TB, o Options) *Backend {
	t.Helper()
	be, err := Open(o)
	if errors.Is(err, ErrNoDriver) || errors.Is(err, ErrNoDevice) || errors.Is(err, ErrInvalidDevice) {
		t.Skipf("no CUDA device: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := be.Close(); err != nil {
			t.Error(err)
		}
	})
	return be
}

// harness runs the same ops on the CPU reference backend and on the GPU,
// with the same inputs, and compares the outputs. Each check runs three
// rounds with fresh inputs: the first eager, the second captured into a
// graph, the third a replay of it.
type harness struct {
	t   *testing.T
	rng *rand.Rand
	cpu *cpu.Backend
	gpu *Backend
}

func newHarness(t *testing.T) *harness { return newHarnessWith(t, testOptions()) }

// newHarnessWith is newHarness on a GPU opened with o.
func newHarnessWith(t *testing.T, o Options) *harness {
	gpu := openGPUWith(t, o)
	c := cpu.New(cpu.Options{Threads: 2})
	t.Cleanup(func() { c.Close() })
	return &harness{t: t, rng: rand.New(rand.NewPCG(7, uint64(len(t.Name())))), cpu: c, gpu: gpu}
}

// pair is one operand on both backends; gen makes its contents for a
// round (nil: outputs, poisoned with NaN before each GPU run).
type pair struct {
	c, g kernels.Tensor
	gen  func() []byte
}

var testLabel = kernels.Label{Owner: "test", Cat: kernels.Scratch}

// tensor allocates a [rows, cols] operand of type typ on both backends.
func (h *harness) tensor(typ quant.Type, rows, cols int, gen func() []byte) *pair {
	h.t.Helper()
	rb, err := typ.RowBytes(int64(cols))
	if err != nil {
		h.t.Fatal(err)
	}
	size := rb * int64(rows)
	cb, err := h.cpu.Alloc(testLabel, size)
	if err != nil {
		h.t.Fatal(err)
	}
	gb, err := h.gpu.Alloc(testLabel, size)
	if err != nil {
		h.t.Fatal(err)
	}
	return &pair{c: kernels.NewTensor(cb, typ, rows, cols, 0), g: kernels.NewTensor(gb, typ, rows, cols, 0), gen: gen}
}

// random is an input of random data of typ (normal values for floats).
func (h *harness) random(typ quant.Type, rows, cols int) *pair { return h.scaled(typ, rows, cols, 1) }

// scaled is a random input of typ with values of standard deviation std
// (synth.Fill's).
func (h *harness) scaled(typ quant.Type, rows, cols int, std float64) *pair {
	var p *pair
	p = h.tensor(typ, rows, cols, func() []byte {
		b := make([]byte, p.c.Bytes())
		if err := synth.Fill(h.rng, typ, b, std); err != nil {
			h.t.Fatal(err)
		}
		return b
	})
	return p
}

// ints is an I32 input [1, n] whose values gen draws per round.
func (h *harness) ints(n int, gen func(i int) int32) *pair {
	return h.tensor(quant.I32, 1, n, func() []byte {
		v := make([]int32, n)
		for i := range v {
			v[i] = gen(i)
		}
		return append([]byte(nil), kernels.I32Bytes(v)...)
	})
}

// output is an operand the ops write.
func (h *harness) output(typ quant.Type, rows, cols int) *pair { return h.tensor(typ, rows, cols, nil) }

// run fills the inputs, runs ops (built for one side by build) on both
// backends, and returns the programs' outputs for compare.
func (h *harness) check(build func(side func(*pair) kernels.Tensor) []kernels.Op, operands []*pair, compare func(round int)) {
	h.t.Helper()
	cpuOps := build(func(p *pair) kernels.Tensor { return p.c })
	gpuOps := build(func(p *pair) kernels.Tensor { return p.g })
	if !h.cpu.Supports(cpuOps[0]) {
		h.t.Skipf("the CPU backend does not run %s", cpuOps[0].Name())
	}
	cp, err := h.cpu.Compile(cpuOps)
	if err != nil {
		h.t.Fatal(err)
	}
	defer cp.Close()
	gp, err := h.gpu.Compile(gpuOps)
	if err != nil {
		h.t.Fatal(err)
	}
	defer gp.Close()
	for round := 0; round < 3; round++ {
		h.round(cp, gp, operands)
		compare(round)
	}
}

// launches compiles the ops build makes for the GPU side and returns the
// kernels the program launches, in order.
func (h *harness) launches(build func(side func(*pair) kernels.Tensor) []kernels.Op) []string {
	h.t.Helper()
	p, err := h.gpu.Compile(build(func(p *pair) kernels.Tensor { return p.g }))
	if err != nil {
		h.t.Fatal(err)
	}
	defer p.Close()
	var names []string
	for _, s := range p.(*program).steps {
		names = append(names, s.kernel)
	}
	return names
}

// round fills the inputs afresh, poisons the GPU's outputs, and runs cp on
// the CPU and gp on the GPU.
func (h *harness) round(cp, gp kernels.Program, operands []*pair) {
	h.t.Helper()
	for _, p := range operands {
		data := p.gen
		if data == nil { // an output: poison the GPU side
			if err := h.gpu.Write(p.g, nanBytes(p.g.Bytes())); err != nil {
				h.t.Fatal(err)
			}
			continue
		}
		b := data()
		if err := h.cpu.Write(p.c, b); err != nil {
			h.t.Fatal(err)
		}
		if err := h.gpu.Write(p.g, b); err != nil {
			h.t.Fatal(err)
		}
	}
	ctx := context.Background()
	if err := cp.Run(ctx); err != nil {
		h.t.Fatal(err)
	}
	if err := gp.Run(ctx); err != nil {
		h.t.Fatal(err)
	}
	if err := h.gpu.Sync(); err != nil {
		h.t.Fatal(err)
	}
}

// nanBytes is n bytes of F32 NaNs (a trailing part word left zero), the
// poison an output holds until a kernel writes it.
func nanBytes(n int64) []byte {
	nan := make([]byte, n)
	for i := 0; i+4 <= len(nan); i += 4 {
		binary.LittleEndian.PutUint32(nan[i:], 0x7fc00000)
	}
	return nan
}

// floats reads an F32 or F16 operand from both sides as float64.
func (h *harness) floats(p *pair) (c, g []float64) {
	h.t.Helper()
	return h.read(h.cpu, p.c), h.read(h.gpu, p.g)
}

func (h *harness) read(be kernels.Backend, t kernels.Tensor) []float64 {
	h.t.Helper()
	b := make([]byte, t.Bytes())
	if err := be.Read(b, t); err != nil {
		h.t.Fatal(err)
	}
	return decode(h.t, t.Type, b)
}

func decode(t testing.TB, typ quant.Type, b []byte) []float64 {
	if typ == quant.I32 {
		v := make([]float64, len(b)/4)
		for i := range v {
			v[i] = float64(int32(binary.LittleEndian.Uint32(b[4*i:])))
		}
		return v
	}
	n := len(b) / typ.TypeSize() * typ.BlockSize()
	f := make([]float32, n)
	if err := quant.Dequantize(typ, b, f); err != nil {
		t.Fatal(err)
	}
	v := make([]float64, n)
	for i, x := range f {
		v[i] = float64(x)
	}
	return v
}

// relErr is ||got - want|| / ||want||; NaN anywhere is +Inf.
func relErr(got, want []float64) float64 {
	var num, den float64
	for i := range want {
		if math.IsNaN(got[i]) || math.IsInf(got[i], 0) {
			return math.Inf(1)
		}
		d := got[i] - want[i]
		num += d * d
		den += want[i] * want[i]
	}
	if den == 0 {
		return math.Sqrt(num)
	}
	return math.Sqrt(num / den)
}

// expectClose compares p's two sides within tol.
func (h *harness) expectClose(p *pair, tol float64, what string) {
	h.t.Helper()
	c, g := h.floats(p)
	if e := relErr(g, c); !(e <= tol) {
		h.t.Errorf("%s: relative error %.3g against the CPU, tolerance %.1g", what, e, tol)
	}
}

// expectEqual requires p's two sides to be identical.
func (h *harness) expectEqual(p *pair, what string) {
	h.t.Helper()
	c, g := h.floats(p)
	for i := range c {
		if c[i] != g[i] {
			h.t.Errorf("%s: element %d is %v on the GPU, %v on the CPU", what, i, g[i], c[i])
			return
		}
	}
}
