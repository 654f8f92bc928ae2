package cpu

import (
	"fmt"
	"unsafe"

	"github.com/tandem-run/tandem/kernels"
	"github.com/tandem-run/tandem/kernels/quant"
)

// view is a checked kernels.Tensor resolved to host bytes: what kernels index.
type view struct {
	data     []byte // from the first byte of row 0 to the end of the buffer
	stride   int
	rowBytes int
	rows     int
	cols     int
	typ      quant.Type
}

// rows resolves a tensor of this backend into a view.
func (b *Backend) rows(t kernels.Tensor) (view, error) {
	if err := kernels.CheckView(t); err != nil {
		return view{}, err
	}
	buf, err := b.own(t.Buf)
	if err != nil {
		return view{}, err
	}
	return view{
		data:     buf.data[t.Off:],
		stride:   int(t.Stride),
		rowBytes: int(t.RowBytes()),
		rows:     t.Rows,
		cols:     t.Cols,
		typ:      t.Type,
	}, nil
}

// writable resolves a tensor an op will write, refusing uploaded weights.
func (b *Backend) writable(t kernels.Tensor) (view, error) {
	v, err := b.rows(t)
	if err != nil {
		return v, err
	}
	if t.Buf.(*buffer).readOnly {
		return v, fmt.Errorf("%v: buffer holds uploaded weights", t)
	}
	return v, nil
}

// row is the bytes of row i.
func (v view) row(i int) []byte {
	o := i * v.stride
	return v.data[o : o+v.rowBytes : o+v.rowBytes]
}

// f32 is row i of an F32 view as floats. The bytes are host memory aligned
// for float32 (CheckView), so reinterpreting them avoids a conversion pass
// over every activation.
func (v view) f32(i int) []float32 {
	return unsafe.Slice((*float32)(unsafe.Pointer(&v.data[i*v.stride])), v.cols)
}

// f32s is all rows of an F32 view as one slice, row i at i*stride/4.
func (v view) f32s() []float32 {
	n := ((v.rows-1)*v.stride + 4*v.cols) / 4
	return unsafe.Slice((*float32)(unsafe.Pointer(&v.data[0])), n)
}

// i32 is row i of an I32 view as ints.
func (v view) i32(i int) []int32 {
	return unsafe.Slice((*int32)(unsafe.Pointer(&v.data[i*v.stride])), v.cols)
}
