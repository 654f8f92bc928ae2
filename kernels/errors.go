package kernels

import "errors"

var (
	// ErrShape is an operand whose shape, view or parameters do not fit the op.
	ErrShape = errors.New("bad shape")
	// ErrType is an operand of a type the op is not defined for.
	ErrType = errors.New("bad type")
	// ErrOverlap is an output that overlaps an input the op reads while writing.
	ErrOverlap = errors.New("operands overlap")
	// ErrUnsupported is an op or weight type a backend cannot run.
	ErrUnsupported = errors.New("not supported by this backend")
	// ErrOutOfMemory is an allocation the device could not satisfy.
	ErrOutOfMemory = errors.New("out of device memory")
	// ErrForeignBuffer is a buffer made by a different backend.
	ErrForeignBuffer = errors.New("buffer belongs to another backend")
)
