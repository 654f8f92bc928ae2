package quant

import "fmt"

// Quantize encodes src as type t into dst, which must hold exactly
// t.RowBytes(len(src)) bytes. It supports the float types, the 8-bit
// activation types (Q8_0, Q8_1, Q8_K) and Q4_0; Q8_0 and Q4_0 also serve
// as KV-cache types. Rounding follows ggml's x86 CPU backend.
func Quantize(t Type, src []float32, dst []byte) error {
	f := fastQuantizer(t)
	if f == nil {
		f = quantizer(t)
	}
	if f == nil {
		return fmt.Errorf("quant: quantize %v: %w", t, unsupported(t))
	}
	if err := checkSize(t, len(src), len(dst)); err != nil {
		return fmt.Errorf("quant: quantize: %w", err)
	}
	f(src, dst)
	return nil
}

func quantizer(t Type) func(src []float32, dst []byte) {
	switch t {
	case F32:
		return quantizeF32
	case F16:
		return quantizeF16
	case BF16:
		return quantizeBF16
	case Q8_0:
		return quantizeQ8_0
	case Q4_0:
		return quantizeQ4_0
	case Q8_1:
		return quantizeQ8_1
	case Q8_K:
		return quantizeQ8_K
	}
	return nil
}
