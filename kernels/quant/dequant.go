package quant

import "fmt"

// Dequantize decodes len(dst) elements of type t from src, which must hold
// exactly t.RowBytes(len(dst)) bytes in ggml's little-endian block layout.
func Dequantize(t Type, src []byte, dst []float32) error {
	f := fastDequantizer(t)
	if f == nil {
		f = dequantizer(t)
	}
	if f == nil {
		return fmt.Errorf("quant: dequantize %v: %w", t, unsupported(t))
	}
	if err := checkSize(t, len(dst), len(src)); err != nil {
		return fmt.Errorf("quant: dequantize: %w", err)
	}
	f(src, dst)
	return nil
}

func dequantizer(t Type) func(src []byte, dst []float32) {
	switch t {
	case F32:
		return dequantF32
	case F16:
		return dequantF16
	case BF16:
		return dequantBF16
	case Q4_0:
		return dequantQ4_0
	case Q4_1:
		return dequantQ4_1
	case Q5_0:
		return dequantQ5_0
	case Q5_1:
		return dequantQ5_1
	case Q8_0:
		return dequantQ8_0
	case Q8_1:
		return dequantQ8_1
	case Q2_K:
		return dequantQ2_K
	case Q3_K:
		return dequantQ3_K
	case Q4_K:
		return dequantQ4_K
	case Q5_K:
		return dequantQ5_K
	case Q6_K:
		return dequantQ6_K
	case Q8_K:
		return dequantQ8_K
	case IQ4_NL:
		return dequantIQ4_NL
	case IQ4_XS:
		return dequantIQ4_XS
	case MXFP4:
		return dequantMXFP4
	}
	return nil
}

// checkSize reports whether n elements of t take exactly size bytes.
func checkSize(t Type, n, size int) error {
	want, err := t.RowBytes(int64(n))
	if err != nil {
		return err
	}
	if int64(size) != want {
		return fmt.Errorf("%v: %d elements need %d bytes, have %d: %w", t, n, want, size, ErrSize)
	}
	return nil
}

// unsupported is ErrUnknownType for a type without a layout, else ErrUnsupported.
func unsupported(t Type) error {
	if !t.Known() {
		return ErrUnknownType
	}
	return ErrUnsupported
}
