package model

import (
	"context"
	"testing"
)

// BenchmarkDecode times one token through the demo target after a short
// prompt, reporting tokens/s and weight bytes streamed per second.
func BenchmarkDecode(b *testing.B) {
	for _, file := range []string{"factory-target-F16.gguf", "factory-target-Q4_K_M.gguf", "factory-draft-Q8_0.gguf"} {
		b.Run(file, func(b *testing.B) {
			m := openModel(b, file, Options{Context: 512})
			ctx := context.Background()
			prompt := []int32{1, 7570, 203, 5139, 1372, 368, 280, 285}
			if _, err := m.Forward(ctx, prompt, 0, nil); err != nil {
				b.Fatal(err)
			}
			b.SetBytes(m.weightBytes())
			b.ResetTimer()
			for i := range b.N {
				pos := len(prompt) + i%256
				if _, err := m.Forward(ctx, []int32{int32(i % 100)}, pos, nil); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "tok/s")
		})
	}
}

// BenchmarkPrefill times a 128-token batch.
func BenchmarkPrefill(b *testing.B) {
	for _, file := range []string{"factory-target-F16.gguf", "factory-target-Q4_K_M.gguf"} {
		b.Run(file, func(b *testing.B) {
			m := openModel(b, file, Options{Context: 512})
			ctx := context.Background()
			prompt := make([]int32, 128)
			for i := range prompt {
				prompt[i] = int32(i * 37 % 8192)
			}
			b.SetBytes(m.weightBytes())
			b.ResetTimer()
			for range b.N {
				if _, err := m.Forward(ctx, prompt, 0, nil); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N*len(prompt))/b.Elapsed().Seconds(), "tok/s")
		})
	}
}
