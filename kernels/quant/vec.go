package quant

import "fmt"

// Vec is an activation row prepared for products with weight rows of one
// type: kept as float32 for float weights, quantized to 8 bits for the
// quantized ones (ActivationType says which). Reuse one Vec per row buffer:
// Prepare keeps its slices, so steady-state decoding allocates nothing.
type Vec struct {
	Type Type      // the activation type: F32, Q8_0, Q8_1 or Q8_K
	F32  []float32 // (n,) the row when Type is F32
	Q    []byte    // the row in Type's block layout otherwise

	blocks int // blocks of Type in the row (elements when Type is F32)
}

// ActivationType is the type an activation row is converted to for products
// with weights of type w, as in llama.cpp's CPU backend: float32 for float
// weights (ggml rounds to F16/BF16 instead; float32 keeps F16 models exact
// against an fp32 reference), Q8_0 for the 32-element symmetric types, Q8_1
// for Q4_1 and Q5_1 (their offset needs the block sums), Q8_K for the
// K-quants and IQ4_XS. It returns F32 for types without products; DotFunc and
// Prepare reject those.
func ActivationType(w Type) Type {
	k, ok := scalarKernel(w)
	if !ok {
		return F32
	}
	return k.act
}

// Prepare converts x for products with weight rows of type w, reusing v's
// buffers. len(x) must be a whole number of w's blocks.
func (v *Vec) Prepare(w Type, x []float32) error {
	k, ok := scalarKernel(w)
	if !ok {
		return fmt.Errorf("quant: prepare for %v weights: %w", w, unsupported(w))
	}
	if bs := w.BlockSize(); len(x)%bs != 0 {
		return fmt.Errorf("quant: prepare for %v weights: %d elements: %w of %d", w, len(x), ErrBlockAlign, bs)
	}
	v.Type = k.act
	if k.act == F32 {
		v.F32 = append(v.F32[:0], x...)
		v.Q = v.Q[:0]
		v.blocks = len(x)
		return nil
	}
	v.blocks = len(x) / k.act.BlockSize()
	size := v.blocks * k.act.TypeSize()
	if cap(v.Q) < size {
		v.Q = make([]byte, size)
	}
	v.Q = v.Q[:size]
	v.F32 = v.F32[:0]
	return Quantize(k.act, x, v.Q)
}

// Len is the number of elements in the prepared row.
func (v *Vec) Len() int { return v.blocks * v.Type.BlockSize() }

// Fits reports whether a weight row of type w holding rowBytes bytes can be
// multiplied with v; a matmul checks this once per matrix, so that the dot
// function in its inner loop never sees a mismatch.
func (v *Vec) Fits(w Type, rowBytes int) error {
	k, ok := scalarKernel(w)
	if !ok {
		return fmt.Errorf("quant: %v weights: %w", w, unsupported(w))
	}
	if v.Type != k.act {
		return fmt.Errorf("quant: %v weights need %v activations, vec holds %v: %w", w, k.act, v.Type, ErrUnsupported)
	}
	if want := v.blocks * w.TypeSize(); rowBytes != want {
		return fmt.Errorf("quant: %v row of %d elements needs %d bytes, have %d: %w", w, v.Len(), want, rowBytes, ErrSize)
	}
	return nil
}
