package quant

import "errors"

var (
	// ErrUnknownType is a type number or name this package has no layout for.
	ErrUnknownType = errors.New("unknown ggml type")
	// ErrBlockAlign is an element count that is not a whole number of blocks.
	ErrBlockAlign = errors.New("not a multiple of the block size")
	// ErrSize is a buffer whose length does not match the element count.
	ErrSize = errors.New("buffer size does not match")
	// ErrUnsupported is a known type that an operation (dequantization,
	// quantization, dot product) has no kernel for.
	ErrUnsupported = errors.New("operation not supported for type")
)
