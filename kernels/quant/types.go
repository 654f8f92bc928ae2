// Package quant knows the ggml weight types: their names, block layouts and
// byte sizes, and how to turn blocks back into float32. It is the single
// table every reader, planner and kernel consults, so a type added here is
// sized the same way everywhere.
//
// It also holds the CPU inner loop: products of one weight row, still in its
// quantized blocks, with an activation row prepared once per matmul (Vec),
// as llama.cpp's CPU backend computes them. Each type has a plain Go
// reference kernel in its own file (q4_k.go, ...); on amd64 with AVX2 the
// hot types also have assembly kernels (*_amd64.s), chosen once at start
// and tested against the same float64 reference. Where the CPU has AVX-512
// (and VNNI), decoding's matrix-vector products (RowsFunc) and batches
// (Mul) take several weight rows, or tiles of weight rows by activation
// rows, at once; every output keeps the single-row kernel's bits, so a
// batch rounds as its rows would one by one. The assembly is hand-written
// because Go has no vector intrinsics and no library computes products on
// ggml's block layouts with ggml's rounding.
package quant

import "fmt"

// Type is a ggml tensor type, numbered as in GGUF files.
type Type uint32

// The ggml types, with the numbers GGUF files use. Gaps are types ggml removed.
const (
	F32     Type = 0
	F16     Type = 1
	Q4_0    Type = 2
	Q4_1    Type = 3
	Q5_0    Type = 6
	Q5_1    Type = 7
	Q8_0    Type = 8
	Q8_1    Type = 9
	Q2_K    Type = 10
	Q3_K    Type = 11
	Q4_K    Type = 12
	Q5_K    Type = 13
	Q6_K    Type = 14
	Q8_K    Type = 15
	IQ2_XXS Type = 16
	IQ2_XS  Type = 17
	IQ3_XXS Type = 18
	IQ1_S   Type = 19
	IQ4_NL  Type = 20
	IQ3_S   Type = 21
	IQ2_S   Type = 22
	IQ4_XS  Type = 23
	I8      Type = 24
	I16     Type = 25
	I32     Type = 26
	I64     Type = 27
	F64     Type = 28
	IQ1_M   Type = 29
	BF16    Type = 30
	TQ1_0   Type = 34
	TQ2_0   Type = 35
	MXFP4   Type = 39
)

type layout struct {
	name      string
	blockSize int // elements per block
	typeSize  int // bytes per block
}

// layouts is indexed by Type; a zero entry is an unknown type.
var layouts = [...]layout{
	F32:     {"F32", 1, 4},
	F16:     {"F16", 1, 2},
	Q4_0:    {"Q4_0", 32, 18},
	Q4_1:    {"Q4_1", 32, 20},
	Q5_0:    {"Q5_0", 32, 22},
	Q5_1:    {"Q5_1", 32, 24},
	Q8_0:    {"Q8_0", 32, 34},
	Q8_1:    {"Q8_1", 32, 36},
	Q2_K:    {"Q2_K", 256, 84},
	Q3_K:    {"Q3_K", 256, 110},
	Q4_K:    {"Q4_K", 256, 144},
	Q5_K:    {"Q5_K", 256, 176},
	Q6_K:    {"Q6_K", 256, 210},
	Q8_K:    {"Q8_K", 256, 292},
	IQ2_XXS: {"IQ2_XXS", 256, 66},
	IQ2_XS:  {"IQ2_XS", 256, 74},
	IQ3_XXS: {"IQ3_XXS", 256, 98},
	IQ1_S:   {"IQ1_S", 256, 50},
	IQ4_NL:  {"IQ4_NL", 32, 18},
	IQ3_S:   {"IQ3_S", 256, 110},
	IQ2_S:   {"IQ2_S", 256, 82},
	IQ4_XS:  {"IQ4_XS", 256, 136},
	I8:      {"I8", 1, 1},
	I16:     {"I16", 1, 2},
	I32:     {"I32", 1, 4},
	I64:     {"I64", 1, 8},
	F64:     {"F64", 1, 8},
	IQ1_M:   {"IQ1_M", 256, 56},
	BF16:    {"BF16", 1, 2},
	TQ1_0:   {"TQ1_0", 256, 54},
	TQ2_0:   {"TQ2_0", 256, 66},
	MXFP4:   {"MXFP4", 32, 17},
}

func (t Type) layout() (layout, bool) {
	if int(t) >= len(layouts) || layouts[t].blockSize == 0 {
		return layout{}, false
	}
	return layouts[t], true
}

// Known reports whether t is a ggml type this package can size.
func (t Type) Known() bool {
	_, ok := t.layout()
	return ok
}

// String is the ggml name of t ("Q4_K"), or "type(N)" for an unknown one.
func (t Type) String() string {
	if l, ok := t.layout(); ok {
		return l.name
	}
	return fmt.Sprintf("type(%d)", uint32(t))
}

// BlockSize is the number of elements one block of t holds (1 for plain types).
func (t Type) BlockSize() int {
	l, _ := t.layout()
	return l.blockSize
}

// TypeSize is the number of bytes one block of t takes.
func (t Type) TypeSize() int {
	l, _ := t.layout()
	return l.typeSize
}

// RowBytes is the byte size of n consecutive elements of type t. n must be a
// multiple of the block size; ErrBlockAlign says otherwise.
func (t Type) RowBytes(n int64) (int64, error) {
	l, ok := t.layout()
	if !ok {
		return 0, fmt.Errorf("quant: %w: %v", ErrUnknownType, t)
	}
	if n < 0 || n%int64(l.blockSize) != 0 {
		return 0, fmt.Errorf("quant: %v: %d elements: %w of %d", t, n, ErrBlockAlign, l.blockSize)
	}
	return n / int64(l.blockSize) * int64(l.typeSize), nil
}

// ParseType is the inverse of String, case-sensitive.
func ParseType(name string) (Type, error) {
	for i, l := range layouts {
		if l.blockSize != 0 && l.name == name {
			return Type(i), nil
		}
	}
	return 0, fmt.Errorf("quant: %w: %q", ErrUnknownType, name)
}
