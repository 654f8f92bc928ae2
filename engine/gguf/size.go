package gguf

import (
	"fmt"
	"math/bits"

	"github.com/tandem-run/tandem/kernels/quant"
)

// Product multiplies sizes (element counts, byte counts) that may come from
// an untrusted header. ok is false when a factor is negative or the product
// does not fit an int64; nothing in Tandem multiplies header values any
// other way, so a dimension near 2^63 cannot wrap to a small size.
func Product(factors ...int64) (n int64, ok bool) {
	n = 1
	for _, f := range factors {
		if f < 0 {
			return 0, false
		}
		hi, lo := bits.Mul64(uint64(n), uint64(f))
		if hi != 0 || lo > 1<<63-1 {
			return 0, false
		}
		n = int64(lo)
	}
	return n, true
}

// TensorBytes is the size in bytes of a tensor of typ with dims (ne0, the
// row length, first). It fails when a dimension is not positive, a row is
// not a whole number of typ's blocks, or the size overflows an int64.
func TensorBytes(typ quant.Type, dims []int64) (int64, error) {
	if len(dims) == 0 {
		return 0, fmt.Errorf("no dimensions: %w", ErrCorrupt)
	}
	if !typ.Known() {
		return 0, fmt.Errorf("ggml type %d: %w", typ, ErrUnknownType)
	}
	for i, d := range dims {
		if d < 1 {
			return 0, fmt.Errorf("dimension %d is %d: %w", i, d, ErrCorrupt)
		}
	}
	block := int64(typ.BlockSize())
	if dims[0]%block != 0 {
		return 0, fmt.Errorf("a row of %d is not a whole number of %v blocks of %d: %w", dims[0], typ, block, ErrCorrupt)
	}
	n, ok := Product(append([]int64{dims[0] / block, int64(typ.TypeSize())}, dims[1:]...)...)
	if !ok {
		return 0, fmt.Errorf("%v %v: size overflows: %w", typ, dims, ErrCorrupt)
	}
	return n, nil
}

// Sum adds sizes; ok is false when a term is negative or the sum does not
// fit an int64.
func Sum(terms ...int64) (n int64, ok bool) {
	for _, t := range terms {
		if t < 0 || n > 1<<63-1-t {
			return 0, false
		}
		n += t
	}
	return n, true
}
