package kernels

import (
	"errors"
	"testing"

	"github.com/tandem-run/tandem/kernels/quant"
)

type testBuffer int64

func (b testBuffer) Size() int64 { return int64(b) }
func (testBuffer) Label() Label  { return Label{Owner: "test", Cat: Scratch} }

func TestViews(t *testing.T) {
	buf := testBuffer(4096)
	x := NewTensor(buf, quant.F32, 8, 16, 64) // [8,16] at byte 64
	if x.Stride != 64 || x.Bytes() != 512 || !x.Packed() {
		t.Fatalf("packed tensor: stride %d, bytes %d", x.Stride, x.Bytes())
	}
	rows := x.RowSlice(2, 3)
	if rows.Off != 64+2*64 || rows.Rows != 3 {
		t.Errorf("RowSlice: %+v", rows)
	}
	cols := x.ColSlice(4, 8)
	if cols.Off != 64+16 || cols.Cols != 8 || cols.Stride != 64 || cols.Packed() {
		t.Errorf("ColSlice: %+v", cols)
	}
	if cols.Bytes() != 7*64+32 {
		t.Errorf("ColSlice bytes %d", cols.Bytes())
	}
	r := x.Reshape(32, 4)
	if r.Rows != 32 || r.Cols != 4 || r.Stride != 16 || CheckView(r) != nil {
		t.Errorf("Reshape: %+v", r)
	}
	if CheckView(cols.Reshape(8, 8)) == nil {
		t.Error("reshape of a strided view passed CheckView")
	}
	q := NewTensor(buf, quant.Q4_K, 2, 512, 0) // 2 blocks of 144 bytes a row
	if q.RowBytes() != 288 || q.ColSlice(256, 256).Off != 144 {
		t.Errorf("quantized views: row %d, col offset %d", q.RowBytes(), q.ColSlice(256, 256).Off)
	}
}

func TestCheckView(t *testing.T) {
	buf := testBuffer(1024)
	for name, x := range map[string]Tensor{
		"no buffer":    {Type: quant.F32, Rows: 1, Cols: 4},
		"empty":        NewTensor(buf, quant.F32, 0, 4, 0),
		"overrun":      NewTensor(buf, quant.F32, 65, 4, 0),
		"negative":     NewTensor(buf, quant.F32, 1, 4, -4),
		"split block":  NewTensor(buf, quant.Q8_0, 1, 48, 0),
		"misaligned":   NewTensor(buf, quant.F32, 2, 4, 2),
		"short stride": {Buf: buf, Type: quant.F32, Rows: 2, Cols: 4, Stride: 8},
		"unknown type": {Buf: buf, Type: quant.Type(99), Rows: 1, Cols: 1, Stride: 1},
	} {
		if err := CheckView(x); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if err := CheckView(NewTensor(buf, quant.F32, 64, 4, 0)); err != nil {
		t.Errorf("whole buffer: %v", err)
	}
}

func TestCheckOps(t *testing.T) {
	buf := testBuffer(1 << 16)
	f := func(rows, cols int, off int64) Tensor { return NewTensor(buf, quant.F32, rows, cols, off) }
	ids := NewTensor(buf, quant.I32, 1, 4, 60000)
	x, y := f(4, 64, 0), f(4, 64, 4096)
	w := NewTensor(buf, quant.F16, 32, 64, 8192)
	cases := []struct {
		op   Op
		want error
	}{
		{MatMul{Dst: f(4, 32, 16384), W: w, X: x}, nil},
		{MatMul{Dst: f(4, 16, 16384), W: w, X: x}, ErrShape},
		{MatMul{Dst: x.ColSlice(0, 32), W: w, X: x}, ErrOverlap},
		{Add{Dst: x, A: x, B: y.Row(0)}, nil},
		{Add{Dst: x, A: x, B: y.RowSlice(0, 2)}, ErrShape},
		{RMSNorm{Dst: x, X: x, W: f(1, 64, 20000), Eps: -1}, ErrShape},
		{Argmax{Dst: ids, X: x}, nil},
		{Argmax{Dst: f(1, 4, 20000), X: x}, ErrType},
		{GetRows{Dst: x, Src: w, Idx: ids}, nil},
		{Rope{Dst: x, X: x, Pos: ids, HeadDim: 64, Dims: 63, Base: 1e4, Scale: 1}, ErrShape},
		{Attention{Dst: y, Q: x, K: f(16, 64, 20000), V: f(16, 64, 30000), Pos: ids,
			NHead: 2, NKVHead: 2, HeadDim: 32, Scale: 0.1}, nil},
		{Attention{Dst: y, Q: x, K: f(16, 64, 20000), V: f(16, 64, 30000), Pos: ids,
			NHead: 3, NKVHead: 2, HeadDim: 32, Scale: 0.1}, ErrShape},
	}
	for i, c := range cases {
		err := Check(c.op)
		if c.want == nil && err != nil || c.want != nil && !errors.Is(err, c.want) {
			t.Errorf("case %d (%s): %v, want %v", i, c.op.Name(), err, c.want)
		}
	}
}
