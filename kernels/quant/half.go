package quant

import (
	"encoding/binary"
	"math"
)

// IEEE half and bfloat16 conversions. They are written here rather than
// taken from a library because each is a dozen lines of exact bit
// manipulation, both directions are tested exhaustively over all 65536
// inputs, and the hot paths (F16 products) use the F16C instruction instead.

// halfToFloat converts an IEEE 754 binary16 value to float32 exactly.
// Shifted into float32 position, a half's exponent is biased by 15 instead
// of 127; multiplying by 2^112 rebiases it, for normal and subnormal halves
// alike (a float32 denormal times 2^112 is exact), without branches.
func halfToFloat(h uint16) float32 {
	bits := uint32(h&0x7fff) << 13
	f := math.Float32frombits(bits) * 0x1p112
	if h&0x7c00 == 0x7c00 { // infinity or NaN: keep the payload
		f = math.Float32frombits(bits | 0x7f800000)
	}
	return math.Float32frombits(math.Float32bits(f) | uint32(h&0x8000)<<16)
}

// floatToHalf converts float32 to binary16, rounding to nearest even as the
// F16C instruction and ggml do; overflow gives infinity, NaN stays NaN.
func floatToHalf(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int32(b>>23) & 0xff
	mant := b & 0x7fffff
	if exp == 0xff {
		if mant != 0 {
			return sign | 0x7e00 // quiet NaN
		}
		return sign | 0x7c00
	}
	e := exp - 127 + 15 // half exponent
	if e >= 0x1f {
		return sign | 0x7c00
	}
	if e <= 0 {
		// Half subnormal (or zero): keep mant * 2^(exp-150) as m * 2^-24.
		if e < -10 {
			return sign // below half the smallest subnormal
		}
		mant |= 0x800000
		shift := uint32(14 - e)
		m := mant >> shift
		rem := mant & (1<<shift - 1)
		halfway := uint32(1) << (shift - 1)
		if rem > halfway || rem == halfway && m&1 == 1 {
			m++ // may carry into the smallest normal, which is the right encoding
		}
		return sign | uint16(m)
	}
	h := uint32(e)<<10 | mant>>13
	rem := mant & 0x1fff
	if rem > 0x1000 || rem == 0x1000 && h&1 == 1 {
		h++ // may carry into the exponent, up to infinity: still correct
	}
	return sign | uint16(h)
}

// bf16ToFloat converts bfloat16 (the top half of a float32) exactly.
func bf16ToFloat(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// floatToBF16 rounds to nearest even as ggml does, keeping NaNs quiet.
func floatToBF16(f float32) uint16 {
	b := math.Float32bits(f)
	if b&0x7fffffff > 0x7f800000 {
		return uint16(b>>16) | 0x40
	}
	return uint16((b + 0x7fff + (b>>16)&1) >> 16)
}

// loadF16 reads a little-endian binary16 at b[0:2] as float32.
func loadF16(b []byte) float32 { return halfToFloat(binary.LittleEndian.Uint16(b)) }

// storeF16 writes f as a little-endian binary16 at b[0:2].
func storeF16(b []byte, f float32) { binary.LittleEndian.PutUint16(b, floatToHalf(f)) }

// loadF32 reads a little-endian float32 at b[0:4].
func loadF32(b []byte) float32 { return math.Float32frombits(binary.LittleEndian.Uint32(b)) }
