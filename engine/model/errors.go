package model

import "errors"

var (
	// ErrUnsupported is an architecture, type or feature this package cannot run.
	ErrUnsupported = errors.New("not supported")
	// ErrMissing is a required metadata key or tensor that the file lacks.
	ErrMissing = errors.New("missing")
	// ErrBadParam is a hyper-parameter out of range or inconsistent with another.
	ErrBadParam = errors.New("bad hyper-parameter")
	// ErrShape is a tensor whose dimensions differ from what the parameters imply.
	ErrShape = errors.New("wrong shape")
	// ErrContext is a batch that would run past the context window.
	ErrContext = errors.New("context window exceeded")
	// ErrPosition is a start position beyond the tokens already in the cache.
	ErrPosition = errors.New("position not in the cache")
	// ErrToken is a token id outside the vocabulary.
	ErrToken = errors.New("token id out of range")
)
