package quant

import "encoding/binary"

// Helpers shared by the K-quants (256-element super-blocks of 16 or 8
// sub-blocks, each with its own small integer scale).

// kScaleMin unpacks the 6-bit scale and min of sub-block j (0..7) from the
// 12 bytes Q4_K and Q5_K use: sub-blocks 0-3 sit in the low six bits of
// bytes 0-3 (scales) and 4-7 (mins); sub-blocks 4-7 keep their low four bits
// in bytes 8-11 and their top two bits in the spare bits of bytes 0-7.
func kScaleMin(s []byte, j int) (sc, m int32) {
	if j < 4 {
		return int32(s[j] & 63), int32(s[j+4] & 63)
	}
	return int32(s[j+4]&15 | s[j-4]>>6<<4), int32(s[j+4]>>4 | s[j]>>6<<4)
}

// q8KBlockSum is the sum of the 16 activation quants of group g (0..15) of a
// Q8_K block, precomputed by quantizeQ8_K.
func q8KBlockSum(b []byte, g int) int32 {
	return int32(int16(binary.LittleEndian.Uint16(b[260+2*g:])))
}
