package kerneltest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/tandem-run/tandem/kernels"
	"github.com/tandem-run/tandem/kernels/quant"
)

// Bench times the ops that dominate a forward pass on be, reporting the
// bytes each must stream (weights for products, the cache for attention) per
// second: the number to hold against the device's memory bandwidth.
func Bench(b *testing.B, be kernels.Backend) {
	for _, wt := range []quant.Type{quant.F16, quant.Q8_0, quant.Q4_K, quant.Q6_K} {
		for _, batch := range []int{1, 64} {
			b.Run(fmt.Sprintf("mat_mul/%v/B=%d", wt, batch), func(b *testing.B) {
				const rows, cols = 2048, 2048
				h := &harness{t: b, be: be, rng: rand.New(rand.NewPCG(1, 2))}
				defer h.free()
				data, _ := h.randomRows(wt, rows, cols)
				op := kernels.MatMul{Dst: h.tensor(quant.F32, batch, rows, nil),
					W: h.tensor(wt, rows, cols, data), X: h.f32(batch, cols, h.normal(batch*cols, 1))}
				h.bench(b, int64(len(data)), op)
			})
		}
	}
	for _, kv := range []quant.Type{quant.F32, quant.F16, quant.Q8_0, quant.Q4_0} {
		b.Run(fmt.Sprintf("attention/%v/pos=1023", kv), func(b *testing.B) {
			const nctx, heads, kvHeads, hd = 1024, 16, 8, 128
			h := &harness{t: b, be: be, rng: rand.New(rand.NewPCG(1, 3))}
			defer h.free()
			data, _ := h.cacheRows(kv, nctx, kvHeads*hd)
			K, V := h.tensor(kv, nctx, kvHeads*hd, data), h.tensor(kv, nctx, kvHeads*hd, data)
			op := kernels.Attention{Dst: h.tensor(quant.F32, 1, heads*hd, nil), Q: h.f32(1, heads*hd, h.normal(heads*hd, 1)),
				K: K, V: V, Pos: h.i32([]int32{nctx - 1}), NHead: heads, NKVHead: kvHeads, HeadDim: hd, Scale: 0.088}
			h.bench(b, K.Bytes()+V.Bytes(), op)
		})
	}
	// One Qwen3-30B-A3B-shaped MoE block (width 2048, experts of 768, 8
	// routed) with 32 of its 128 experts: a token reads its 8 experts'
	// weights; a batch of 64 (512 routings) reads all of them.
	for _, batch := range []int{1, 64} {
		b.Run(fmt.Sprintf("moe/Q4_K/B=%d", batch), func(b *testing.B) {
			const n, ff, experts, used = 2048, 768, 32, 8
			h := &harness{t: b, be: be, rng: rand.New(rand.NewPCG(1, 5))}
			defer h.free()
			g, _ := h.randomRows(quant.Q4_K, experts*ff, n)
			u, _ := h.randomRows(quant.Q4_K, experts*ff, n)
			d, _ := h.randomRows(quant.Q4_K, experts*n, ff)
			op := kernels.MoE{Dst: h.tensor(quant.F32, batch, n, nil), X: h.f32(batch, n, h.normal(batch*n, 1)),
				Router: h.f32(experts, n, h.normal(experts*n, 0.05)), Gate: h.tensor(quant.Q4_K, experts*ff, n, g),
				Up: h.tensor(quant.Q4_K, experts*ff, n, u), Down: h.tensor(quant.Q4_K, experts*n, ff, d),
				Experts: experts, Used: used, Renorm: true}
			read := int64(len(g)+len(u)+len(d)) / experts * min(experts, int64(batch*used))
			h.bench(b, read, op)
		})
	}
	b.Run("rms_norm/B=64", func(b *testing.B) {
		const rows, cols = 64, 2048
		h := &harness{t: b, be: be, rng: rand.New(rand.NewPCG(1, 4))}
		defer h.free()
		X := h.f32(rows, cols, h.normal(rows*cols, 1))
		h.bench(b, 2*X.Bytes(), kernels.RMSNorm{Dst: X, X: X, W: h.f32(1, cols, h.normal(cols, 1)), Eps: 1e-6})
	})
}

func (h *harness) bench(b *testing.B, bytes int64, op kernels.Op) {
	if !h.be.Supports(op) {
		b.Skipf("%s: not supported by %s", describe(op), h.be.Name())
	}
	p, err := h.be.Compile([]kernels.Op{op})
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	ctx := context.Background()
	b.SetBytes(bytes)
	b.ResetTimer()
	for range b.N {
		if err := p.Run(ctx); err != nil {
			b.Fatal(err)
		}
	}
	if err := h.be.Sync(); err != nil {
		b.Fatal(err)
	}
}
