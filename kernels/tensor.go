package kernels

import (
	"fmt"

	"github.com/tandem-run/tandem/kernels/quant"
)

// Buffer is a block of memory on one Backend's device, made by Alloc or
// Upload and released by Free. Only the backend that made it can read it.
type Buffer interface {
	// Size is the buffer's length in bytes.
	Size() int64
	// Label says who owns the bytes, for the accounting in Backend.Usage.
	Label() Label
}

// Tensor is a 2-D view into a Buffer: Rows rows of Cols elements of Type,
// row r starting at byte Off + r*Stride. Every op works on such views; a
// matrix is [rows, cols] with cols the contiguous (ggml ne0) axis, a vector
// is one row, [1, n].
//
// Views (RowSlice, ColSlice, Reshape) are plain arithmetic and never fail;
// Check, which every backend runs when it compiles a program, rejects a view
// that leaves its buffer or splits a quantization block.
type Tensor struct {
	Buf    Buffer
	Type   quant.Type
	Rows   int
	Cols   int
	Off    int64 // byte offset of row 0 in Buf
	Stride int64 // bytes from one row to the next; RowBytes() when packed
}

// NewTensor is a packed [rows, cols] tensor of type t at byte off of buf.
func NewTensor(buf Buffer, t quant.Type, rows, cols int, off int64) Tensor {
	x := Tensor{Buf: buf, Type: t, Rows: rows, Cols: cols, Off: off}
	x.Stride = x.RowBytes()
	return x
}

// RowBytes is the byte size of one row's elements (not counting padding up to
// Stride); 0 when Cols is not a whole number of blocks.
func (t Tensor) RowBytes() int64 {
	n, err := t.Type.RowBytes(int64(t.Cols))
	if err != nil {
		return 0
	}
	return n
}

// Packed reports whether the rows follow one another with no gap, so the
// tensor is one contiguous run of Bytes() bytes.
func (t Tensor) Packed() bool { return t.Stride == t.RowBytes() || t.Rows <= 1 }

// Bytes is the span from the first byte of row 0 to the last byte of the
// last row.
func (t Tensor) Bytes() int64 {
	if t.Rows <= 0 {
		return 0
	}
	return int64(t.Rows-1)*t.Stride + t.RowBytes()
}

// Elements is Rows*Cols.
func (t Tensor) Elements() int64 { return int64(t.Rows) * int64(t.Cols) }

// Valid reports whether t refers to a buffer (the zero Tensor marks an
// optional operand that is absent).
func (t Tensor) Valid() bool { return t.Buf != nil }

// RowSlice is rows [start, start+n) of t.
func (t Tensor) RowSlice(start, n int) Tensor {
	t.Off += int64(start) * t.Stride
	t.Rows = n
	return t
}

// Row is row i of t as a [1, Cols] tensor.
func (t Tensor) Row(i int) Tensor { return t.RowSlice(i, 1) }

// ColSlice is columns [start, start+n) of every row; start and n must be
// whole blocks of t.Type.
func (t Tensor) ColSlice(start, n int) Tensor {
	skip, _ := t.Type.RowBytes(int64(start))
	t.Off += skip
	t.Cols = n
	return t
}

// Reshape views a packed t as [rows, cols] with the same element count. A
// reshape of a tensor that is not packed, or that changes the count, is
// caught by Check.
func (t Tensor) Reshape(rows, cols int) Tensor {
	if !t.Packed() || int64(rows)*int64(cols) != t.Elements() {
		return Tensor{Buf: t.Buf, Type: t.Type, Rows: -1, Cols: cols, Off: t.Off}
	}
	t.Rows, t.Cols = rows, cols
	t.Stride = t.RowBytes()
	return t
}

// SameShape reports whether a and b have equal Rows and Cols.
func SameShape(a, b Tensor) bool { return a.Rows == b.Rows && a.Cols == b.Cols }

func (t Tensor) String() string {
	return fmt.Sprintf("%v[%d,%d]", t.Type, t.Rows, t.Cols)
}

// CheckView validates t's geometry against its buffer: a positive shape of
// whole blocks, rows inside the buffer, offsets aligned for the type.
func CheckView(t Tensor) error {
	switch {
	case t.Buf == nil:
		return fmt.Errorf("%w: no buffer", ErrShape)
	case t.Rows <= 0 || t.Cols <= 0:
		return fmt.Errorf("%w: %v: empty or invalid view", ErrShape, t)
	case !t.Type.Known():
		return fmt.Errorf("%w: %v", quant.ErrUnknownType, t.Type)
	case t.Cols%t.Type.BlockSize() != 0:
		return fmt.Errorf("%w: %v: %d columns split a block of %d", ErrShape, t, t.Cols, t.Type.BlockSize())
	case t.Rows > 1 && t.Stride < t.RowBytes():
		return fmt.Errorf("%w: %v: stride %d below row size %d", ErrShape, t, t.Stride, t.RowBytes())
	case t.Off < 0 || t.Off+t.Bytes() > t.Buf.Size():
		return fmt.Errorf("%w: %v at offset %d overruns a %d-byte buffer", ErrShape, t, t.Off, t.Buf.Size())
	}
	if a := elementAlign(t.Type); t.Off%a != 0 || (t.Rows > 1 && t.Stride%a != 0) {
		return fmt.Errorf("%w: %v: offset %d or stride %d not a multiple of %d", ErrShape, t, t.Off, t.Stride, a)
	}
	return nil
}

// elementAlign is the byte alignment a kernel may assume for rows of t.
func elementAlign(t quant.Type) int64 {
	switch t {
	case quant.F32, quant.I32:
		return 4
	case quant.F16, quant.BF16:
		return 2
	}
	return 1
}
