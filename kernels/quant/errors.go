package quant

import "errors"

var (
	// ErrUnknownType is a type number or name this package has no layout for.
	ErrUnknownType = errors.New("unknown ggml type")
	// ErrBlockAlign is an element count that is not a whole number of blocks.
	ErrBlockAlign = errors.New("not a multiple of the block size")
)
