package model

import (
	"fmt"
	"slices"

	"github.com/tandem-run/tandem/kernels"
	"github.com/tandem-run/tandem/kernels/quant"
)

// kvCache holds keys and values of every processed position, per block.
// Positions [0, n) are valid; rolling back is just lowering n, because a
// later pass overwrites the rows it reuses before attending to them.
type kvCache struct {
	k, v []kernels.Tensor // per block: [n_ctx, n_kv_head*head_dim]
	n    int
}

func newKVCache(l *loader, p Params, opts Options) (kvCache, error) {
	kvDim := p.KVHeads * p.HeadDim
	rowBytes, err := opts.KVType.RowBytes(int64(kvDim))
	if err != nil {
		return kvCache{}, fmt.Errorf("model: KV cache: %w", err)
	}
	c := kvCache{k: make([]kernels.Tensor, p.Layers), v: make([]kernels.Tensor, p.Layers)}
	label := kernels.Label{Owner: opts.Owner, Cat: kernels.KV}
	size := 2 * int64(opts.Context) * rowBytes
	if err := reserveSlab(l.be, slices.Repeat([]int64{size}, p.Layers)); err != nil {
		return kvCache{}, fmt.Errorf("model: KV cache: %w", err)
	}
	for i := range p.Layers {
		buf, err := l.alloc(label, size)
		if err != nil {
			return kvCache{}, fmt.Errorf("model: KV cache of block %d: %w", i, err)
		}
		c.k[i] = kernels.NewTensor(buf, opts.KVType, opts.Context, kvDim, 0)
		c.v[i] = kernels.NewTensor(buf, opts.KVType, opts.Context, kvDim, int64(opts.Context)*rowBytes)
	}
	return c, nil
}

// KVBytes is the KV cache size for the given hyper-parameters and options,
// as Load allocates it.
func KVBytes(p Params, context int, kvType quant.Type) int64 {
	row, err := kvType.RowBytes(int64(p.KVHeads * p.HeadDim))
	if err != nil {
		return 0
	}
	return 2 * int64(p.Layers) * int64(context) * row
}
