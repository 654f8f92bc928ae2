package gguf

import "errors"

// Errors a caller may want to tell apart; every returned error wraps one of
// these or an I/O error, prefixed with "gguf: FILE:".
var (
	ErrMagic       = errors.New("not a GGUF file (bad magic)")
	ErrVersion     = errors.New("unsupported GGUF version")
	ErrTruncated   = errors.New("file is truncated")
	ErrCorrupt     = errors.New("corrupt header")
	ErrUnknownType = errors.New("unknown type")
	ErrNotFound    = errors.New("not found")
	ErrNoData      = errors.New("no tensor data: only the header was read")
)
