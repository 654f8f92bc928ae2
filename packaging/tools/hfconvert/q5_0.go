package main

import (
	"encoding/binary"
	"math"

	"github.com/tandem-run/tandem/kernels/quant"
)

// quantizeQ5_0 encodes x (whole 32-value blocks) as Q5_0, the type
// llama.cpp's Q4_K_M falls back to for rows that are not whole 256-value
// K blocks. Neither kernels/quant nor kernels/synth encodes it. Like ggml's
// reference quantizer, the value of largest magnitude maps to q = 0 (d is
// it over -16) and the rest round half up onto 0..31.
func quantizeQ5_0(x []float32, dst []byte) {
	const bytes = 22
	for i := range len(x) / 32 {
		v, b := x[i*32:(i+1)*32], dst[i*bytes:(i+1)*bytes]
		var amax, peak float32
		for _, e := range v {
			if a := float32(math.Abs(float64(e))); a > amax {
				amax, peak = a, e
			}
		}
		d := peak / -16
		var id float32
		if d != 0 {
			id = 1 / d
		}
		// The scale is stored as F16; an F16 encode of one value cannot
		// fail for a 2-byte destination.
		_ = quant.Quantize(quant.F16, []float32{d}, b[:2])
		var qh uint32
		for j := range 16 {
			lo := min(31, int8(float32(v[j]*id)+16.5))
			hi := min(31, int8(float32(v[j+16]*id)+16.5))
			b[6+j] = byte(lo&15) | byte(hi&15)<<4
			qh |= uint32(lo>>4&1) << j
			qh |= uint32(hi>>4&1) << (j + 16)
		}
		binary.LittleEndian.PutUint32(b[2:], qh)
	}
}
