package cpu

import (
	"context"
	"fmt"

	"github.com/tandem-run/tandem/kernels"
)

// step is one compiled op: operands resolved to host memory, scratch
// allocated, so running it allocates nothing.
type step interface {
	exec(p *pool) error
}

// program runs its steps in order on the backend's pool.
type program struct {
	b     *Backend
	steps []step
	names []string
}

// Compile implements kernels.Backend. Consecutive MatMuls that read the same
// activations (Q, K and V; gate and up) become one step, so the activations
// are prepared once and the workers are woken once.
func (b *Backend) Compile(ops []kernels.Op) (kernels.Program, error) {
	prog := &program{b: b}
	angles := map[ropeKey]*ropeAngles{}
	for i := 0; i < len(ops); i++ {
		if err := kernels.Check(ops[i]); err != nil {
			return nil, fmt.Errorf("cpu: op %d: %w", i, err)
		}
		if !b.Supports(ops[i]) {
			return nil, fmt.Errorf("cpu: op %d: %s: %w", i, describe(ops[i]), kernels.ErrUnsupported)
		}
		if mm, ok := ops[i].(kernels.MatMul); ok {
			group := []kernels.MatMul{mm}
			for i+1 < len(ops) {
				next, ok := ops[i+1].(kernels.MatMul)
				if !ok || !sameActivations(mm, next) || kernels.Check(next) != nil || !b.Supports(next) {
					break
				}
				group = append(group, next)
				i++
			}
			s, err := b.newMatMul(group)
			if err != nil {
				return nil, fmt.Errorf("cpu: op %d: mat_mul: %w", i, err)
			}
			prog.steps = append(prog.steps, s)
			prog.names = append(prog.names, "mat_mul")
			continue
		}
		s, err := b.compile(ops[i], angles)
		if err != nil {
			return nil, fmt.Errorf("cpu: op %d: %s: %w", i, ops[i].Name(), err)
		}
		prog.steps = append(prog.steps, s)
		prog.names = append(prog.names, ops[i].Name())
	}
	return prog, nil
}

// compile makes the step of op; rope ops of one program share their angles
// through angles.
func (b *Backend) compile(op kernels.Op, angles map[ropeKey]*ropeAngles) (step, error) {
	switch o := op.(type) {
	case kernels.GetRows:
		return b.newGetRows(o)
	case kernels.SetRows:
		return b.newSetRows(o)
	case kernels.RMSNorm:
		return b.newRMSNorm(o)
	case kernels.Add:
		return b.newBinary(o.Dst, o.A, o.B, addRow)
	case kernels.Mul:
		return b.newBinary(o.Dst, o.A, o.B, mulRow)
	case kernels.SwiGLU:
		return b.newBinary(o.Dst, o.Gate, o.Up, swigluRow)
	case kernels.Rope:
		return b.newRope(o, angles)
	case kernels.Attention:
		return b.newAttention(o)
	case kernels.Softmax:
		return b.newSoftmax(o)
	case kernels.Argmax:
		return b.newArgmax(o)
	case kernels.TopK:
		return b.newTopK(o)
	case kernels.Copy:
		return b.newCopy(o)
	}
	return nil, kernels.ErrUnsupported
}

// Supports implements kernels.Backend: every op, with weights of every type
// kernels/quant can take a product with (MatMul) or dequantize (GetRows).
func (b *Backend) Supports(op kernels.Op) bool {
	switch o := op.(type) {
	case kernels.MatMul:
		return supportsDot(o.W.Type)
	case kernels.GetRows:
		return supportsDequant(o.Src.Type)
	case kernels.SetRows, kernels.RMSNorm, kernels.Add, kernels.Mul, kernels.SwiGLU,
		kernels.Rope, kernels.Attention, kernels.Softmax, kernels.Argmax, kernels.TopK, kernels.Copy:
		return true
	}
	return false
}

func describe(op kernels.Op) string {
	switch o := op.(type) {
	case kernels.MatMul:
		return fmt.Sprintf("%s with %v weights", o.Name(), o.W.Type)
	case kernels.GetRows:
		return fmt.Sprintf("%s from %v", o.Name(), o.Src.Type)
	}
	return op.Name()
}

// Run implements kernels.Program.
func (p *program) Run(ctx context.Context) error {
	if p.b.pool == nil {
		return fmt.Errorf("cpu: %s: backend closed", p.b.name)
	}
	for i, s := range p.steps {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := s.exec(p.b.pool); err != nil {
			return fmt.Errorf("cpu: %s: %w", p.names[i], err)
		}
	}
	return nil
}

// Close implements kernels.Program; a CPU program holds only Go memory.
func (p *program) Close() error { return nil }
