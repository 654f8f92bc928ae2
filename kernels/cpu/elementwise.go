package cpu

import "github.com/tandem-run/tandem/kernels"

// binary is an elementwise op of two F32 tensors, b optionally one row
// broadcast over a's rows: Add, Mul and SwiGLU.
type binary struct {
	dst, a, b view
	fn        func(dst, a, b []float32)
}

func (b *Backend) newBinary(dstT, aT, bT kernels.Tensor, fn func(dst, a, b []float32)) (*binary, error) {
	dst, err := b.writable(dstT)
	if err != nil {
		return nil, err
	}
	a, err := b.rows(aT)
	if err != nil {
		return nil, err
	}
	bv, err := b.rows(bT)
	if err != nil {
		return nil, err
	}
	return &binary{dst: dst, a: a, b: bv, fn: fn}, nil
}

func (s *binary) exec(p *pool) error {
	p.parallel(s, s.a.rows, p.grainFor(s.a.rows, rowGrain(s.a.cols)))
	return nil
}

func (s *binary) run(_, lo, hi int) {
	for r := lo; r < hi; r++ {
		br := 0
		if s.b.rows > 1 {
			br = r
		}
		s.fn(s.dst.f32(r), s.a.f32(r), s.b.f32(br))
	}
}

// addRowGo is dst = a + b.
func addRowGo(dst, a, b []float32) {
	b = b[:len(a)]
	dst = dst[:len(a)]
	for i, v := range a {
		dst[i] = v + b[i]
	}
}

func mulRow(dst, a, b []float32) {
	b = b[:len(a)]
	dst = dst[:len(a)]
	for i, v := range a {
		dst[i] = v * b[i]
	}
}

// swigluGo is silu(gate) * up, with ggml's exp (see expApprox).
func swigluGo(dst, gate, up []float32) {
	up = up[:len(gate)]
	dst = dst[:len(gate)]
	for i, g := range gate {
		dst[i] = g / (1 + expApprox(0-g)) * up[i]
	}
}
