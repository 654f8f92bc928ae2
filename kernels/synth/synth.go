// Package synth makes random tensor data of any ggml weight type: what
// kernel tests feed their kernels, and what synthetic models (real shapes,
// random weights) are made of. Quantized blocks get random quants and
// small positive scales, so every block decodes to finite values of about
// the magnitude trained weights have.
//
// Blocks are random bytes rather than quantized random floats because the
// repository's quantizers cover only the float and 8-bit types, and
// because a kernel must be right for every bit pattern a file can hold.
package synth

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/tandem-run/tandem/kernels/quant"
)

// halfFields are the byte offsets of each block's F16 scale fields (d,
// dmin, m) and the scale they get: weights then span roughly ±Scale*4.
var halfFields = map[quant.Type]struct {
	offsets []int
	scale   float64
}{
	quant.Q4_0:   {[]int{0}, 2e-3},
	quant.Q4_1:   {[]int{0, 2}, 2e-3},
	quant.Q5_0:   {[]int{0}, 1e-3},
	quant.Q5_1:   {[]int{0, 2}, 1e-3},
	quant.Q8_0:   {[]int{0}, 2e-4},
	quant.IQ4_NL: {[]int{0}, 2e-4},
	quant.Q2_K:   {[]int{80, 82}, 2e-3},
	quant.Q3_K:   {[]int{108}, 1e-3},
	quant.Q4_K:   {[]int{0, 2}, 1e-4},
	quant.Q5_K:   {[]int{0, 2}, 5e-5},
	quant.Q6_K:   {[]int{208}, 2e-4},
	quant.IQ4_XS: {[]int{0}, 2e-4},
}

// Supported reports whether Fill can make data of type t.
func Supported(t quant.Type) bool {
	_, ok := halfFields[t]
	return ok || t == quant.F32 || t == quant.F16 || t == quant.BF16
}

// Fill fills dst, a whole number of blocks of type t, with random data.
// Float types get normal values of standard deviation std; quantized types
// ignore std.
func Fill(rng *rand.Rand, t quant.Type, dst []byte, std float64) error {
	bs := t.TypeSize()
	if bs == 0 || len(dst)%bs != 0 {
		return fmt.Errorf("synth: %d bytes of %v: %w", len(dst), t, quant.ErrBlockAlign)
	}
	switch t {
	case quant.F32, quant.F16, quant.BF16:
		v := make([]float32, len(dst)/bs)
		for i := range v {
			v[i] = float32(rng.NormFloat64() * std)
		}
		return quant.Quantize(t, v, dst)
	}
	f, ok := halfFields[t]
	if !ok {
		return fmt.Errorf("synth: %v: %w", t, quant.ErrUnknownType)
	}
	for i := 0; i+8 <= len(dst); i += 8 {
		binary.LittleEndian.PutUint64(dst[i:], rng.Uint64())
	}
	for i := len(dst) &^ 7; i < len(dst); i++ {
		dst[i] = byte(rng.Uint32())
	}
	for b := 0; b < len(dst); b += bs {
		for _, off := range f.offsets {
			binary.LittleEndian.PutUint16(dst[b+off:], half(f.scale*(0.5+rng.Float64())))
		}
	}
	return nil
}

// half encodes a positive normal float as IEEE binary16 (truncating).
func half(v float64) uint16 {
	bits := math.Float32bits(float32(v))
	exp := int(bits>>23&0xff) - 127 + 15
	if exp <= 0 {
		return 0
	}
	if exp >= 31 {
		return 0x7bff
	}
	return uint16(exp)<<10 | uint16(bits>>13&0x3ff)
}
