package gguf

import (
	"bytes"
	"errors"
	"math"
	"testing"

	"github.com/tandem-run/tandem/kernels/quant"
)

// rawHeader is a GGUF v3 header with one tensor of typ and dims at offset 0,
// written byte by byte: the Writer refuses such sizes itself.
func rawHeader(typ quant.Type, dims ...uint64) []byte {
	var e encoder
	e.u32(magic)
	e.u32(3)
	e.u64(1) // tensors
	e.u64(1) // metadata
	e.str("general.architecture")
	e.u32(uint32(TypeString))
	e.str("llama")
	e.str("huge.weight")
	e.u32(uint32(len(dims)))
	for _, d := range dims {
		e.u64(d)
	}
	e.u32(uint32(typ))
	e.u64(0)
	for len(e.b)%defaultAlignment != 0 {
		e.b = append(e.b, 0)
	}
	return append(e.b, make([]byte, 64)...)
}

// A dimension in [2^62, 2^63) times the element size once wrapped to a small
// byte count that fit the file: info showed 4.61 E parameters and plan said
// the tensor fit. Such a header is refused as corrupt.
func TestTensorSizeOverflowIsRefused(t *testing.T) {
	for _, c := range []struct {
		name string
		typ  quant.Type
		dims []uint64
	}{
		{"F32 [2^62]", quant.F32, []uint64{1 << 62}},
		{"F32 [2^62+1]", quant.F32, []uint64{1<<62 + 1}},
		{"F32 [2^63-1]", quant.F32, []uint64{1<<63 - 1}},
		{"F16 [2^63-2]", quant.F16, []uint64{1<<63 - 2}},
		{"F32 [1, 2^62]", quant.F32, []uint64{1, 1 << 62}},
		{"F32 [2^31, 2^31]", quant.F32, []uint64{1 << 31, 1 << 31}},
		{"F64 [2^61, 1, 1]", quant.F64, []uint64{1 << 61, 1, 1}},
		{"Q8_0 [2^62, 2]", quant.Q8_0, []uint64{1 << 62, 2}},
	} {
		path := writeTemp(t, rawHeader(c.typ, c.dims...))
		f, err := Open(path)
		if err == nil {
			ti := f.Tensors[0]
			t.Errorf("%s: accepted, %d bytes, %d elements", c.name, ti.Bytes, ti.Elements())
			continue
		}
		if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrTruncated) {
			t.Errorf("%s: %v, want a corrupt or truncated header", c.name, err)
		}
	}
}

// TensorBytes and Product agree with big-number arithmetic at the edges.
func TestSizeHelpers(t *testing.T) {
	for _, c := range []struct {
		f    []int64
		want int64
		ok   bool
	}{
		{nil, 1, true}, {[]int64{0, math.MaxInt64}, 0, true}, {[]int64{math.MaxInt64, 1}, math.MaxInt64, true},
		{[]int64{1 << 31, 1 << 31}, 1 << 62, true}, {[]int64{1 << 31, 1 << 32}, 0, false},
		{[]int64{4, 1 << 62}, 0, false}, {[]int64{5, 1 << 61}, 0, false}, {[]int64{3, 1 << 61}, 3 << 61, true}, {[]int64{-1, 2}, 0, false},
	} {
		got, ok := Product(c.f...)
		if ok != c.ok || ok && got != c.want {
			t.Errorf("Product(%v) = %d, %v; want %d, %v", c.f, got, ok, c.want, c.ok)
		}
	}
	if n, err := TensorBytes(quant.Q8_0, []int64{64, 5}); err != nil || n != 34*2*5 {
		t.Errorf("Q8_0 [64 5]: %d, %v", n, err)
	}
	if n, err := TensorBytes(quant.F32, []int64{1 << 60, 1}); err != nil || n != 1<<62 {
		t.Errorf("F32 [2^60 1]: %d, %v", n, err)
	}
	for _, dims := range [][]int64{{1 << 62}, {1 << 61, 2}, {1 << 60, 2}, {0}, {-3}, {33}, {}} {
		typ := quant.F32
		if len(dims) == 1 && dims[0] == 33 {
			typ = quant.Q8_0 // not a whole number of blocks
		}
		if n, err := TensorBytes(typ, dims); err == nil {
			t.Errorf("%v %v: %d bytes, want an error", typ, dims, n)
		}
	}
}

// A key or tensor name as long as the file once went into the error
// message quoted (hundreds of megabytes and seconds for a sparse file); names
// over maxNameBytes are refused by their length.
func TestLongNamesAreRefused(t *testing.T) {
	for _, what := range []string{"key", "tensor"} {
		var e encoder
		e.u32(magic)
		e.u32(3)
		if what == "tensor" {
			e.u64(1)
			e.u64(0)
		} else {
			e.u64(0)
			e.u64(1)
		}
		e.u64(1 << 20) // the name's length: most of the file
		b := append(e.b, make([]byte, 1<<20+64)...)
		_, err := parseHeader(bytes.NewReader(b), int64(len(b)))
		if !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s name of 1 MB: %.200v", what, err)
		} else if len(err.Error()) > 200 {
			t.Errorf("%s name of 1 MB: a %d-byte error", what, len(err.Error()))
		}
	}
}
