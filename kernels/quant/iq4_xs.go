package quant

import "encoding/binary"

// IQ4_XS: 256 elements in 136 bytes, 8 sub-blocks of 32 with 6-bit scales
// and IQ4_NL's codebook.
//
//	d        f16        scale of the scales
//	scalesH  uint16     top two bits of sub-block ib's scale at bits 2ib..2ib+1
//	scalesL  [4]byte    low four bits: nibble ib%2 of byte ib/2
//	qs       [128]byte  16 bytes per sub-block, packed as IQ4_NL
//
// x = d * (scale-32) * iq4nlValues[q]. Products take Q8_K activations.
const iq4_xsBytes = 136

// iq4XSScale is the signed scale of sub-block ib (0..7).
func iq4XSScale(b []byte, ib int) int32 {
	h := binary.LittleEndian.Uint16(b[2:])
	lo := int32(b[4+ib/2]>>(4*(ib%2))) & 15
	return (lo | int32(h>>(2*ib)&3)<<4) - 32
}

func dequantIQ4_XS(src []byte, dst []float32) {
	for i := range len(dst) / 256 {
		b := src[i*iq4_xsBytes : (i+1)*iq4_xsBytes]
		d := loadF16(b)
		y := dst[i*256 : i*256+256]
		for ib := range 8 {
			dl := d * float32(iq4XSScale(b, ib))
			for j, q := range b[8+16*ib : 8+16*ib+16] {
				y[32*ib+j] = dl * float32(iq4nlValues[q&15])
				y[32*ib+16+j] = dl * float32(iq4nlValues[q>>4])
			}
		}
	}
}

func dotIQ4_XS(x, y []byte) float32 {
	var sum float32
	for i := range len(x) / iq4_xsBytes {
		bx := x[i*iq4_xsBytes : (i+1)*iq4_xsBytes]
		by := y[i*q8_KBytes : (i+1)*q8_KBytes]
		qy := by[4:260]
		var sumq int32
		for ib := range 8 {
			var s int32
			for j, q := range bx[8+16*ib : 8+16*ib+16] {
				s += int32(iq4nlValues[q&15])*int32(int8(qy[32*ib+j])) +
					int32(iq4nlValues[q>>4])*int32(int8(qy[32*ib+16+j]))
			}
			sumq += iq4XSScale(bx, ib) * s
		}
		sum += loadF32(by) * loadF16(bx) * float32(sumq)
	}
	return sum
}
