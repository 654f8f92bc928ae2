package quant

import (
	"math/rand/v2"
	"testing"
)

// BenchmarkDot multiplies a 256 x 1024 weight matrix (a few hundred KB, so
// it sits in L2 as a small model's layers do during decode) with one
// prepared row, per type and kernel. Bytes/s counts weight bytes: compare
// with the ~10-20 GB/s one core streams from memory.
func BenchmarkDot(b *testing.B) {
	const rows, n = 256, 1024
	t := &testing.T{}
	for _, typ := range dotTypes {
		rng := rand.New(rand.NewPCG(1, uint64(typ)))
		matrix := randomRow(t, rng, typ, rows*n)
		rowBytes := len(matrix) / rows
		var v Vec
		if err := v.Prepare(typ, randomFloats(rng, n)); err != nil {
			b.Fatal(err)
		}
		scalar, _ := scalarKernel(typ)
		kernels := []struct {
			name string
			k    kernel
		}{{"scalar", scalar}}
		if fast, ok := fastKernel(typ); ok {
			kernels = append(kernels, struct {
				name string
				k    kernel
			}{"fast", fast})
		}
		for _, kc := range kernels {
			b.Run(typ.String()+"/"+kc.name, func(b *testing.B) {
				b.SetBytes(int64(len(matrix)))
				var sink float32
				for b.Loop() {
					for r := range rows {
						row := matrix[r*rowBytes : (r+1)*rowBytes]
						if kc.k.act == F32 {
							sink += kc.k.float(row, v.F32)
						} else {
							sink += kc.k.quant(row, v.Q)
						}
					}
				}
				if sink != sink {
					b.Log("NaN") // keeps sink live
				}
			})
		}
	}
}

// BenchmarkPrepare measures converting one 1024-element activation row.
func BenchmarkPrepare(b *testing.B) {
	x := randomFloats(rand.New(rand.NewPCG(1, 2)), 1024)
	for _, w := range []Type{F16, Q8_0, Q4_1, Q4_K} {
		b.Run(ActivationType(w).String(), func(b *testing.B) {
			b.SetBytes(int64(4 * len(x)))
			var v Vec
			for b.Loop() {
				if err := v.Prepare(w, x); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkDequantize decodes a 256 x 1024 matrix per type (what a
// get_rows of the token embedding does per token, times the vocabulary).
func BenchmarkDequantize(b *testing.B) {
	const n = 256 * 1024
	t := &testing.T{}
	dst := make([]float32, n)
	for _, typ := range dotTypes {
		src := randomRow(t, rand.New(rand.NewPCG(3, uint64(typ))), typ, n)
		b.Run(typ.String(), func(b *testing.B) {
			b.SetBytes(int64(len(src)))
			for b.Loop() {
				if err := Dequantize(typ, src, dst); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
