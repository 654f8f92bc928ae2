package cuda

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/tandem-run/tandem/kernels"
	"github.com/tandem-run/tandem/kernels/cuda/workspace"
	"github.com/tandem-run/tandem/kernels/quant"
)

// step is one kernel launch of a compiled program, its parameters fixed.
type step struct {
	op          string
	kernel      string
	fn          cuFunction
	grid, block [3]uint32
	shared      uint32
	args        []uint64
	// group is an all-reduce's (rank: the backend's place in it), whose
	// launches the thread counts (worker.roundOpen); nil for other kernels.
	group *group
	rank  int
}

// compiler turns ops into steps. It runs twice: first to size the scratch
// regions the steps use (base is 0), then with the backend's workspace
// grown to hold them (scratch.go).
type compiler struct {
	be     *Backend
	steps  []step
	need   workspace.Sizes
	base   devicePtr       // the workspace
	layout workspace.Sizes // its regions

	// q8 is the tensor whose quantized copy the Q8 region holds, if any,
	// q8Off bytes into it. q8Final: the op just compiled quantized the
	// final values of what it and the ops fused into it wrote.
	q8      kernels.Tensor
	q8Off   int64
	q8Set   bool
	q8Final bool
}

// scratch returns region r of the workspace, recording that n bytes of it
// are needed. Ops run one after another on one stream, so every op (of
// every program) uses a region from its start.
func (c *compiler) scratch(r workspace.Region, n int64) devicePtr {
	c.need[r] = max(c.need[r], n)
	if c.base == 0 {
		return 0
	}
	return c.base + devicePtr(c.layout.Offset(r))
}

// add appends a launch of kernel with its parameters.
func (c *compiler) add(op, kernel string, grid, block [3]uint32, shared uint32, args ...uint64) error {
	fn, err := c.be.functionShared(kernel, shared)
	if err != nil {
		return err
	}
	c.steps = append(c.steps, step{op: op, kernel: kernel, fn: fn, grid: grid, block: block, shared: shared, args: args})
	return nil
}

// Kernel parameter encodings (little-endian slots of 8 bytes).
func argPtr(p devicePtr) uint64 { return uint64(p) }
func argInt(v int) uint64       { return uint64(uint32(int32(v))) }
func argI64(v int64) uint64     { return uint64(v) }
func argF32(v float32) uint64   { return uint64(math.Float32bits(v)) }

// ceilDiv is a/b rounded up, as a grid dimension.
func ceilDiv(a, b int) uint32 { return uint32((a + b - 1) / b) }

// stride is t's row stride in elements (F32, F16, I32 tensors).
func stride(t kernels.Tensor) int64 { return t.Stride / elemSize(t.Type) }

// Supports reports whether the backend runs op with its operand types
// (the weight type of MatMul and GetRows, the cache types of SetRows and
// Attention: F32, F16, Q8_0 and Q4_0, K and V of any two, F32 and F16
// for sliding-window attention, up to VerifyRows rows of several
// sequences (Rows) on F32 or F16 caches without a window; MoE's router and experts, gate and up of
// one type; every other op is supported). Shape limits (widths in whole 32-element groups, head
// sizes up to 256) are Compile's to report.
func (be *Backend) Supports(op kernels.Op) bool {
	switch o := op.(type) {
	case kernels.MatMul:
		_, ok := weightKernels[o.W.Type]
		return ok
	case kernels.GetRows:
		_, ok := weightKernels[o.Src.Type]
		return ok
	case kernels.SetRows:
		_, ok := kvCaches[o.Dst.Type]
		return ok
	case kernels.Attention:
		_, kOK := kvCaches[o.K.Type]
		_, vOK := kvCaches[o.V.Type]
		if o.Rows.Valid() {
			return seqsSupported(o) == nil
		}
		if o.Window > 0 {
			return supportsWindow(o)
		}
		return kOK && vOK
	case kernels.MoE:
		return supportsMoE(o)
	case kernels.AllReduce:
		g, ok := o.Group.(*group)
		return ok && g.rank(be) >= 0
	}
	return true
}

// Compile validates ops and builds a program of kernel launches.
func (be *Backend) Compile(ops []kernels.Op) (kernels.Program, error) {
	for i, op := range ops {
		if err := kernels.Check(op); err != nil {
			return nil, fmt.Errorf("cuda: op %d: %w", i, err)
		}
		if err := supported(op); err != nil {
			return nil, fmt.Errorf("cuda: op %d: %s: %w", i, op.Name(), err)
		}
	}
	c := &compiler{be: be}
	if err := c.compile(ops); err != nil {
		return nil, err
	}
	reduces := slices.ContainsFunc(ops, func(op kernels.Op) bool { _, ok := op.(kernels.AllReduce); return ok })
	if reduces {
		if err := be.preload(c.steps); err != nil {
			return nil, err
		}
	}
	p := &program{be: be, ops: slices.Clone(ops), need: c.need, reduces: reduces}
	if c.need == (workspace.Sizes{}) {
		p.steps = c.steps
		return p, nil
	}
	if err := p.build(); err != nil {
		return nil, err
	}
	return p, nil
}

func (c *compiler) compile(ops []kernels.Op) error {
	c.steps = c.steps[:0]
	c.q8Set = false
	for i := 0; i < len(ops); {
		// An op that writes over the quantized tensor makes the copy stale;
		// dropped before the op, which may quantize its own output anew.
		for _, out := range outputs(ops[i]) {
			if c.q8Set && overlaps(out, c.q8) {
				c.q8Set = false
			}
		}
		c.q8Final = false
		n, err := c.op(ops, i)
		if err != nil {
			return fmt.Errorf("cuda: op %d: %s: %w", i, ops[i].Name(), err)
		}
		// Ops fused into op i write too: an older copy may be stale.
		for _, op := range ops[i+1 : i+n] {
			if c.q8Final {
				break
			}
			for _, out := range outputs(op) {
				if c.q8Set && overlaps(out, c.q8) {
					c.q8Set = false
				}
			}
		}
		i += n
	}
	return nil
}

// op compiles ops[i], possibly fused with the ops after it, and returns how
// many ops it consumed.
func (c *compiler) op(ops []kernels.Op, i int) (int, error) {
	switch o := ops[i].(type) {
	case kernels.MatMul:
		return c.matMuls(ops, i)
	case kernels.GetRows:
		return 1, c.getRows(o)
	case kernels.SetRows:
		if next, ok := pairSetRows(ops, i); ok {
			return 2, c.setRows(o, next)
		}
		return 1, c.setRows(o)
	case kernels.RMSNorm:
		if p, n, ok := matchAttnPrep(ops, i); ok {
			return n, c.attnPrep(p)
		}
		return 1, c.rmsNorm(o, c.quantizesNext(ops, i+1, o.Dst))
	case kernels.Add:
		return 1, c.binary("add_f32", o.Dst, o.A, o.B)
	case kernels.Mul:
		return 1, c.binary("mul_f32", o.Dst, o.A, o.B)
	case kernels.SwiGLU:
		if c.quantizesNext(ops, i+1, o.Dst) && o.Dst.Cols%32 == 0 {
			return 1, c.swiGLUQ8(o)
		}
		return 1, c.binary("swiglu_f32", o.Dst, o.Gate, o.Up)
	case kernels.Rope:
		if p, n, ok := matchAttnPrep(ops, i); ok {
			return n, c.attnPrep(p)
		}
		if next, ok := pairRope(ops, i); ok {
			return 2, c.rope(o, next)
		}
		return 1, c.rope(o)
	case kernels.Attention:
		if o.Window > 0 {
			return 1, c.windowAttention(o)
		}
		return 1, c.attention(o, c.quantizesNext(ops, i+1, o.Dst))
	case kernels.MoE:
		return 1, c.moe(o)
	case kernels.GeGLU:
		return 1, c.binary("geglu_f32", o.Dst, o.Gate, o.Up)
	case kernels.Scale:
		return 1, c.scale(o)
	case kernels.Softmax:
		return 1, c.softmax(o)
	case kernels.Argmax:
		return 1, c.argmax(o)
	case kernels.TopK:
		return 1, c.topK(o)
	case kernels.Copy:
		return 1, c.copyOp(o)
	case kernels.AllReduce:
		return 1, c.allReduce(o)
	}
	return 0, fmt.Errorf("%w: %T", kernels.ErrUnsupported, ops[i])
}

// outputs are the tensors an op writes.
func outputs(op kernels.Op) []kernels.Tensor {
	switch o := op.(type) {
	case kernels.MatMul:
		return []kernels.Tensor{o.Dst}
	case kernels.GetRows:
		return []kernels.Tensor{o.Dst}
	case kernels.SetRows:
		return []kernels.Tensor{o.Dst}
	case kernels.RMSNorm:
		return []kernels.Tensor{o.Dst}
	case kernels.Add:
		return []kernels.Tensor{o.Dst}
	case kernels.Mul:
		return []kernels.Tensor{o.Dst}
	case kernels.SwiGLU:
		return []kernels.Tensor{o.Dst}
	case kernels.Rope:
		return []kernels.Tensor{o.Dst}
	case kernels.Attention:
		return []kernels.Tensor{o.Dst}
	case kernels.Softmax:
		return []kernels.Tensor{o.Dst}
	case kernels.Argmax:
		return []kernels.Tensor{o.Dst}
	case kernels.TopK:
		return []kernels.Tensor{o.Ids, o.Vals}
	case kernels.Copy:
		return []kernels.Tensor{o.Dst}
	case kernels.MoE:
		return []kernels.Tensor{o.Dst}
	case kernels.GeGLU:
		return []kernels.Tensor{o.Dst}
	case kernels.Scale:
		return []kernels.Tensor{o.Dst}
	case kernels.AllReduce:
		return []kernels.Tensor{o.Dst}
	}
	return nil
}

// inputs are the tensors an op reads.
func inputs(op kernels.Op) []kernels.Tensor {
	switch o := op.(type) {
	case kernels.MatMul:
		return []kernels.Tensor{o.W, o.X}
	case kernels.GetRows:
		return []kernels.Tensor{o.Src, o.Idx}
	case kernels.SetRows:
		return []kernels.Tensor{o.Src, o.Idx}
	case kernels.RMSNorm:
		return []kernels.Tensor{o.X, o.W}
	case kernels.Add:
		return []kernels.Tensor{o.A, o.B}
	case kernels.Mul:
		return []kernels.Tensor{o.A, o.B}
	case kernels.SwiGLU:
		return []kernels.Tensor{o.Gate, o.Up}
	case kernels.Rope:
		return []kernels.Tensor{o.X, o.Pos, o.Factors}
	case kernels.Attention:
		return []kernels.Tensor{o.Q, o.K, o.V, o.Pos, o.Rows}
	case kernels.Softmax:
		return []kernels.Tensor{o.X}
	case kernels.Argmax:
		return []kernels.Tensor{o.X}
	case kernels.TopK:
		return []kernels.Tensor{o.X}
	case kernels.Copy:
		return []kernels.Tensor{o.Src}
	case kernels.MoE:
		return []kernels.Tensor{o.X, o.Router, o.Gate, o.Up, o.Down}
	case kernels.GeGLU:
		return []kernels.Tensor{o.Gate, o.Up}
	case kernels.Scale:
		return []kernels.Tensor{o.X}
	case kernels.AllReduce:
		return append([]kernels.Tensor{o.A}, o.Shares...)
	}
	return nil
}

// overlaps reports whether a and b share bytes of one buffer.
func overlaps(a, b kernels.Tensor) bool {
	return a.Buf == b.Buf && a.Off < b.Off+b.Bytes() && b.Off < a.Off+a.Bytes()
}

// supported rejects what the kernels cannot do (after kernels.Check).
func supported(op kernels.Op) error {
	switch o := op.(type) {
	case kernels.MatMul:
		if _, ok := weightKernels[o.W.Type]; !ok {
			return fmt.Errorf("%w: weights %v", kernels.ErrUnsupported, o.W.Type)
		}
		if o.W.Cols%32 != 0 {
			return fmt.Errorf("%w: %d columns, not a multiple of 32", kernels.ErrUnsupported, o.W.Cols)
		}
	case kernels.GetRows:
		if _, ok := weightKernels[o.Src.Type]; !ok {
			return fmt.Errorf("%w: rows of %v", kernels.ErrUnsupported, o.Src.Type)
		}
		if o.Src.Type != quant.F32 && o.Src.Cols%32 != 0 {
			return fmt.Errorf("%w: %d columns, not a multiple of 32", kernels.ErrUnsupported, o.Src.Cols)
		}
	case kernels.SetRows:
		if _, ok := kvCaches[o.Dst.Type]; !ok {
			return fmt.Errorf("%w: a %v cache", kernels.ErrUnsupported, o.Dst.Type)
		}
		if kvCaches[o.Dst.Type].quantized { // F32 and F16 rows are written by element
			if err := cacheAligned(o.Dst); err != nil {
				return err
			}
		}
	case kernels.Attention:
		if o.Rows.Valid() {
			if err := seqsSupported(o); err != nil {
				return err
			}
		}
		if o.Window > 0 {
			return windowSupported(o)
		}
		_, kOK := kvCaches[o.K.Type]
		_, vOK := kvCaches[o.V.Type]
		if !kOK || !vOK {
			return fmt.Errorf("%w: K %v, V %v caches", kernels.ErrUnsupported, o.K.Type, o.V.Type)
		}
		if o.HeadDim%32 != 0 || o.HeadDim > 256 {
			return fmt.Errorf("%w: head size %d (multiples of 32 up to 256)", kernels.ErrUnsupported, o.HeadDim)
		}
		for _, t := range []kernels.Tensor{o.K, o.V} {
			if err := cacheAligned(t); err != nil {
				return err
			}
		}
	case kernels.TopK:
		if chunks := (o.X.Cols + topKChunk - 1) / topKChunk; chunks*o.Ids.Cols > topKMaxCandidates {
			return fmt.Errorf("%w: top %d of %d", kernels.ErrUnsupported, o.Ids.Cols, o.X.Cols)
		}
	case kernels.MoE:
		return moeSupported(o)
	case kernels.AllReduce:
		if _, ok := o.Group.(*group); !ok {
			return fmt.Errorf("%w: a group of %T", kernels.ErrUnsupported, o.Group)
		}
	}
	return nil
}

// cacheAligned checks the alignment the cache kernels read and write
// with: F32 and F16 rows in 16-byte vectors, Q8_0 and Q4_0 blocks by
// halves (attention_kv.cu).
func cacheAligned(t kernels.Tensor) error {
	align := int64(2)
	if !kvCaches[t.Type].quantized {
		align = 16
	}
	if t.Off%align != 0 || (t.Rows > 1 && t.Stride%align != 0) {
		return fmt.Errorf("%w: cache rows of %v not %d-byte aligned", kernels.ErrUnsupported, t, align)
	}
	return nil
}

// program is a compiled op list. It runs eagerly the first time, then is
// captured as a CUDA graph and replayed with one launch per run. Its steps
// address the backend's workspace: when that grows (another program needed
// more), Run compiles the ops again against the new one first.
type program struct {
	be      *Backend
	ops     []kernels.Op
	need    workspace.Sizes // of the workspace; zero: the steps do not use it
	gen     int             // the workspace generation the steps address
	steps   []step
	runs    int
	noGraph bool // capture failed once: stay eager
	// reduces: the program has an AllReduce, which waits on the device
	// for other backends' programs. It is not profiled: the profiler
	// waits for each program on the thread that may have yet to post
	// the others'.
	reduces bool
	graph   cuGraph
	exec    cuGraphExec
	// stale are graphs (exec, graph) of older steps, handed to the next
	// run's job on the thread to destroy (build).
	stale [][2]uintptr
}

// build compiles the steps against the workspace, growing it to p.need,
// and leaves a graph of older steps to the next run to destroy on the
// thread, in the run's own job, so that a program with a reduce posts
// nothing else while another member's reduce may wait for it
// (worker.roundOpen); a group's round destroys it before any member
// launches (group.Run).
func (p *program) build() error {
	base, layout, gen, err := p.be.growScratch(p.need)
	if err != nil {
		return err
	}
	c := &compiler{be: p.be, base: base, layout: layout}
	if err := c.compile(p.ops); err != nil {
		return err
	}
	if p.exec != 0 || p.graph != 0 {
		p.stale = append(p.stale, [2]uintptr{uintptr(p.exec), uintptr(p.graph)})
	}
	p.exec, p.graph = 0, 0
	p.steps, p.gen, p.runs, p.noGraph = c.steps, gen, 0, false
	return nil
}

// destroyGraphs destroys graphs (exec, graph); thread only.
func (p *program) destroyGraphs(graphs [][2]uintptr) error {
	var errs []error
	for _, g := range graphs {
		if g[0] != 0 {
			errs = append(errs, p.be.drv.graphExecDestroy(cuGraphExec(g[0])))
		}
		if g[1] != 0 {
			errs = append(errs, p.be.drv.graphDestroy(cuGraph(g[1])))
		}
	}
	return errors.Join(errs...)
}

// Run enqueues the program; Read or Sync waits for it. A program with a
// reduce is best run through its group's Run, with the other members'
// programs of the round (group.Run says why).
func (p *program) Run(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	be := p.be
	if err := p.stage(); err != nil {
		return err
	}
	if be.profiling() && !p.reduces {
		// Not a launch job: the profiler waits for its events.
		return be.post(func() error { return be.prof.runProfiled(be, p.steps) })
	}
	if p.reduces {
		// Once posted, a run with a reduce launches whole: the other
		// members' runs wait on the device for each of its reduces.
		ctx = context.WithoutCancel(ctx)
	}
	launch := p.eager
	switch {
	case p.exec != 0:
		launch = func(context.Context, bool) error { return p.launchGraph() }
	case p.captureDue():
		launch = func(ctx context.Context, _ bool) error { return p.capture(ctx) }
	}
	stale := p.stale
	p.stale = nil
	return be.postLaunch(func() error {
		if err := p.destroyGraphs(stale); err != nil {
			return err
		}
		return launch(ctx, true)
	})
}

// stage readies a run on the host: the steps compiled anew against the
// workspace if it has changed since, and the run counted.
func (p *program) stage() error {
	if p.need != (workspace.Sizes{}) && p.be.scratchGen() != p.gen {
		if err := p.build(); err != nil {
			return err
		}
	}
	p.runs++
	return nil
}

// captureDue reports whether the staged run is the one that captures.
func (p *program) captureDue() bool { return p.exec == 0 && p.runs >= 2 && !p.noGraph }

// eager launches the steps one by one; counted: they run now (not into a
// capture), so the reduces among them count as launched.
func (p *program) eager(ctx context.Context, counted bool) error {
	for i := range p.steps {
		if err := ctx.Err(); err != nil {
			return err
		}
		s := &p.steps[i]
		if err := p.be.launch(s.fn, s.grid, s.block, s.shared, s.args); err != nil {
			return fmt.Errorf("cuda: %s (%s): %w", s.op, s.kernel, err)
		}
		if counted && s.group != nil {
			s.group.launched[s.rank]++
		}
	}
	return nil
}

// launchGraph launches the captured graph and counts its reduces.
func (p *program) launchGraph() error {
	if err := p.be.drv.graphLaunch(p.exec, p.be.stream); err != nil {
		return err
	}
	for i := range p.steps {
		if s := &p.steps[i]; s.group != nil {
			s.group.launched[s.rank]++
		}
	}
	return nil
}

// capture records the steps into a graph and launches it; if the driver
// refuses, the program stays eager.
func (p *program) capture(ctx context.Context) error {
	if !p.record() {
		return p.eager(ctx, true)
	}
	return p.launchGraph()
}

// record captures the steps into a graph without running them and puts
// it on the device (p.exec), so that its launches are launches alone;
// where the driver refuses, it reports false and the program stays eager
// for good. Thread only.
func (p *program) record() bool {
	d, be := p.be.drv, p.be
	if err := d.beginCapture(be.stream); err != nil {
		p.noGraph = true
		return false
	}
	runErr := p.eager(context.Background(), false)
	g, endErr := d.endCapture(be.stream)
	if runErr != nil || endErr != nil {
		if g != 0 {
			d.graphDestroy(g)
		}
		p.noGraph = true
		return false
	}
	exec, err := d.graphInstantiate(g)
	if err == nil {
		if err = d.graphUpload(exec, be.stream); err != nil {
			d.graphExecDestroy(exec)
		}
	}
	if err != nil {
		d.graphDestroy(g)
		p.noGraph = true
		return false
	}
	p.graph, p.exec = g, exec
	return true
}

// Close frees the graph, and any that build replaced and no run has
// destroyed yet. The workspace stays with the backend.
func (p *program) Close() error {
	graphs := p.stale
	if p.exec != 0 || p.graph != 0 {
		graphs = append(graphs, [2]uintptr{uintptr(p.exec), uintptr(p.graph)})
	}
	p.stale, p.exec, p.graph = nil, 0, 0
	if len(graphs) == 0 {
		return nil
	}
	return p.be.do(func() error { return p.destroyGraphs(graphs) })
}
