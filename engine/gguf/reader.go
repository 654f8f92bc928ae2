package gguf

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"os"

	"github.com/tandem-run/tandem/kernels/quant"
)

const (
	magic            = 0x46554747 // "GGUF" little-endian
	defaultAlignment = 32
	maxDims          = 4
	maxArrayDepth    = 8
	// minTensorInfoBytes is the smallest encoding of one tensor-index entry:
	// name length, n_dims, one dim, type, offset.
	minTensorInfoBytes = 8 + 4 + 8 + 4 + 8
	// minKVBytes is the smallest encoding of one metadata entry: key length,
	// value type, a one-byte value.
	minKVBytes = 8 + 4 + 1
	// maxNameBytes bounds metadata keys and tensor names (ggml's own limit
	// on tensor names is 64 bytes): they are quoted in error messages, and a
	// name the size of the file would make an error of hundreds of megabytes.
	maxNameBytes = 1024
)

// decoder reads a GGUF header, tracking its position so that every count
// can be checked against the bytes left in the file before allocating.
type decoder struct {
	r    *bufio.Reader
	pos  int64
	size int64
	buf  [8]byte
}

func (d *decoder) left() int64 { return d.size - d.pos }

func (d *decoder) full(p []byte) error {
	n, err := io.ReadFull(d.r, p)
	d.pos += int64(n)
	if err == io.EOF || err == io.ErrUnexpectedEOF {
		return ErrTruncated
	}
	return err
}

func (d *decoder) fixed(n int) ([]byte, error) {
	b := d.buf[:n]
	return b, d.full(b)
}

func (d *decoder) u32() (uint32, error) {
	b, err := d.fixed(4)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint32(b), nil
}

func (d *decoder) u64() (uint64, error) {
	b, err := d.fixed(8)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint64(b), nil
}

// count reads a u64 element count and checks that count elements of at
// least minBytes each fit in what is left of the file.
func (d *decoder) count(what string, minBytes int64) (int, error) {
	n, err := d.u64()
	if err != nil {
		return 0, err
	}
	if n > uint64(d.left()/minBytes) {
		return 0, fmt.Errorf("%s count %d exceeds the file size: %w", what, n, ErrCorrupt)
	}
	return int(n), nil
}

func (d *decoder) str() (string, error) {
	n, err := d.u64()
	if err != nil {
		return "", err
	}
	if n > uint64(d.left()) {
		return "", fmt.Errorf("string length %d exceeds the file size: %w", n, ErrCorrupt)
	}
	b := make([]byte, n)
	if err := d.full(b); err != nil {
		return "", err
	}
	return string(b), nil
}

// name reads a metadata key or a tensor name.
func (d *decoder) name(what string) (string, error) {
	n, err := d.u64()
	if err != nil {
		return "", err
	}
	if n > maxNameBytes {
		return "", fmt.Errorf("%s of %d bytes (at most %d): %w", what, n, maxNameBytes, ErrCorrupt)
	}
	b := make([]byte, n)
	if err := d.full(b); err != nil {
		return "", err
	}
	return string(b), nil
}

func (d *decoder) valueType() (ValueType, error) {
	t, err := d.u32()
	if err != nil {
		return 0, err
	}
	if t > uint32(TypeFloat64) {
		return 0, fmt.Errorf("metadata value type %d: %w", t, ErrUnknownType)
	}
	return ValueType(t), nil
}

func (d *decoder) value(t ValueType, depth int) (any, error) {
	switch t {
	case TypeString:
		return d.str()
	case TypeArray:
		return d.array(depth + 1)
	}
	b, err := d.fixed(t.size())
	if err != nil {
		return nil, err
	}
	return scalar(t, b), nil
}

// scalar decodes one little-endian scalar of type t from b.
func scalar(t ValueType, b []byte) any {
	le := binary.LittleEndian
	switch t {
	case TypeUint8:
		return b[0]
	case TypeInt8:
		return int8(b[0])
	case TypeBool:
		return b[0] != 0
	case TypeUint16:
		return le.Uint16(b)
	case TypeInt16:
		return int16(le.Uint16(b))
	case TypeUint32:
		return le.Uint32(b)
	case TypeInt32:
		return int32(le.Uint32(b))
	case TypeFloat32:
		return math.Float32frombits(le.Uint32(b))
	case TypeUint64:
		return le.Uint64(b)
	case TypeInt64:
		return int64(le.Uint64(b))
	case TypeFloat64:
		return math.Float64frombits(le.Uint64(b))
	}
	return nil
}

func (d *decoder) array(depth int) (Array, error) {
	if depth > maxArrayDepth {
		return Array{}, fmt.Errorf("arrays nested deeper than %d: %w", maxArrayDepth, ErrCorrupt)
	}
	elem, err := d.valueType()
	if err != nil {
		return Array{}, err
	}
	switch elem {
	case TypeString:
		n, err := d.count("string array", 8)
		if err != nil {
			return Array{}, err
		}
		vs := make([]string, n)
		for i := range vs {
			if vs[i], err = d.str(); err != nil {
				return Array{}, err
			}
		}
		return Array{elem, vs}, nil
	case TypeArray:
		n, err := d.count("nested array", 4+8)
		if err != nil {
			return Array{}, err
		}
		vs := make([]Array, n)
		for i := range vs {
			if vs[i], err = d.array(depth + 1); err != nil {
				return Array{}, err
			}
		}
		return Array{elem, vs}, nil
	}
	size := elem.size()
	n, err := d.count(elem.String()+" array", int64(size))
	if err != nil {
		return Array{}, err
	}
	raw := make([]byte, n*size)
	if err := d.full(raw); err != nil {
		return Array{}, err
	}
	return Array{elem, typedSlice(elem, raw, n)}, nil
}

// typedSlice decodes n little-endian scalars of type t from raw.
func typedSlice(t ValueType, raw []byte, n int) any {
	le := binary.LittleEndian
	switch t {
	case TypeUint8:
		return raw
	case TypeInt8:
		vs := make([]int8, n)
		for i := range vs {
			vs[i] = int8(raw[i])
		}
		return vs
	case TypeBool:
		vs := make([]bool, n)
		for i := range vs {
			vs[i] = raw[i] != 0
		}
		return vs
	case TypeUint16:
		vs := make([]uint16, n)
		for i := range vs {
			vs[i] = le.Uint16(raw[2*i:])
		}
		return vs
	case TypeInt16:
		vs := make([]int16, n)
		for i := range vs {
			vs[i] = int16(le.Uint16(raw[2*i:]))
		}
		return vs
	case TypeUint32:
		vs := make([]uint32, n)
		for i := range vs {
			vs[i] = le.Uint32(raw[4*i:])
		}
		return vs
	case TypeInt32:
		vs := make([]int32, n)
		for i := range vs {
			vs[i] = int32(le.Uint32(raw[4*i:]))
		}
		return vs
	case TypeFloat32:
		vs := make([]float32, n)
		for i := range vs {
			vs[i] = math.Float32frombits(le.Uint32(raw[4*i:]))
		}
		return vs
	case TypeUint64:
		vs := make([]uint64, n)
		for i := range vs {
			vs[i] = le.Uint64(raw[8*i:])
		}
		return vs
	case TypeInt64:
		vs := make([]int64, n)
		for i := range vs {
			vs[i] = int64(le.Uint64(raw[8*i:]))
		}
		return vs
	case TypeFloat64:
		vs := make([]float64, n)
		for i := range vs {
			vs[i] = math.Float64frombits(le.Uint64(raw[8*i:]))
		}
		return vs
	}
	return nil
}

// part is one file of a (possibly split) model.
type part struct {
	path       string
	size       int64
	dataOffset int64 // where tensor data starts
	mapping    []byte
	headerOnly bool // read through OpenParts: no data to map
}

// header is what readHeader extracts from one part.
type header struct {
	version   uint32
	alignment int64
	kv        []KV
	tensors   []TensorInfo
	part      part
}

// readHeader parses the header of one GGUF file without reading tensor data.
func readHeader(path string) (*header, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	h, err := parseHeader(f, st.Size())
	if err != nil {
		return nil, err
	}
	h.part.path = path
	return h, nil
}

// parseHeader parses a GGUF header from r, a file of size bytes.
func parseHeader(r io.Reader, size int64) (*header, error) {
	d := &decoder{r: bufio.NewReaderSize(r, 1<<16), size: size}
	h, err := d.header()
	if err != nil {
		return nil, fmt.Errorf("at byte %d: %w", d.pos, err)
	}
	h.part.size = size
	return h, nil
}

func (d *decoder) header() (*header, error) {
	m, err := d.u32()
	if err != nil {
		return nil, err
	}
	if m != magic {
		if m == 0x47475546 {
			return nil, fmt.Errorf("big-endian GGUF: %w", ErrVersion)
		}
		return nil, ErrMagic
	}
	h := &header{alignment: defaultAlignment}
	if h.version, err = d.u32(); err != nil {
		return nil, err
	}
	if h.version != 2 && h.version != 3 {
		return nil, fmt.Errorf("version %d (want 2 or 3): %w", h.version, ErrVersion)
	}
	nTensors, err := d.u64()
	if err != nil {
		return nil, err
	}
	nKV, err := d.count("metadata", minKVBytes)
	if err != nil {
		return nil, err
	}
	if nTensors > uint64(d.left()/minTensorInfoBytes) {
		return nil, fmt.Errorf("tensor count %d exceeds the file size: %w", nTensors, ErrCorrupt)
	}
	h.kv = make([]KV, 0, nKV)
	seen := make(map[string]bool, nKV)
	for range nKV {
		key, err := d.name("metadata key")
		if err != nil {
			return nil, err
		}
		t, err := d.valueType()
		if err != nil {
			return nil, fmt.Errorf("key %q: %w", key, err)
		}
		v, err := d.value(t, 0)
		if err != nil {
			return nil, fmt.Errorf("key %q: %w", key, err)
		}
		if seen[key] {
			return nil, fmt.Errorf("duplicate key %q: %w", key, ErrCorrupt)
		}
		seen[key] = true
		h.kv = append(h.kv, KV{key, v})
		if key == "general.alignment" {
			a, ok := v.(uint32)
			if !ok || a == 0 || a&(a-1) != 0 {
				return nil, fmt.Errorf("general.alignment %v is not a power of two: %w", v, ErrCorrupt)
			}
			h.alignment = int64(a)
		}
	}
	h.tensors = make([]TensorInfo, nTensors)
	for i := range h.tensors {
		if err := d.tensorInfo(&h.tensors[i]); err != nil {
			return nil, fmt.Errorf("tensor %d: %w", i, err)
		}
	}
	h.part.dataOffset = (d.pos + h.alignment - 1) / h.alignment * h.alignment
	dataSize := d.size - h.part.dataOffset
	names := make(map[string]bool, len(h.tensors))
	for i := range h.tensors {
		t := &h.tensors[i]
		if names[t.Name] {
			return nil, fmt.Errorf("duplicate tensor %q: %w", t.Name, ErrCorrupt)
		}
		names[t.Name] = true
		if t.Offset%h.alignment != 0 {
			return nil, fmt.Errorf("tensor %q: offset %d is not aligned to %d: %w", t.Name, t.Offset, h.alignment, ErrCorrupt)
		}
		if t.Offset > dataSize || t.Bytes > dataSize-t.Offset {
			return nil, fmt.Errorf("tensor %q: data [%d, %d) runs past the end of the file (%d bytes of data): %w",
				t.Name, t.Offset, t.Offset+t.Bytes, dataSize, ErrTruncated)
		}
	}
	return h, nil
}

func (d *decoder) tensorInfo(t *TensorInfo) error {
	var err error
	if t.Name, err = d.name("tensor name"); err != nil {
		return err
	}
	nd, err := d.u32()
	if err != nil {
		return err
	}
	if nd < 1 || nd > maxDims {
		return fmt.Errorf("%q: %d dimensions (want 1..%d): %w", t.Name, nd, maxDims, ErrCorrupt)
	}
	t.Dims = make([]int64, nd)
	for j := range t.Dims {
		n, err := d.u64()
		if err != nil {
			return err
		}
		if n == 0 || n > math.MaxInt64 {
			return fmt.Errorf("%q: dimension %d is %d: %w", t.Name, j, n, ErrCorrupt)
		}
		t.Dims[j] = int64(n)
	}
	if _, ok := Product(t.Dims...); !ok {
		return fmt.Errorf("%q: %v elements overflow: %w", t.Name, t.Dims, ErrCorrupt)
	}
	typ, err := d.u32()
	if err != nil {
		return err
	}
	t.Type = quant.Type(typ)
	if !t.Type.Known() {
		return fmt.Errorf("%q: ggml type %d: %w", t.Name, typ, ErrUnknownType)
	}
	if t.Bytes, err = TensorBytes(t.Type, t.Dims); err != nil {
		return fmt.Errorf("%q: %w", t.Name, err)
	}
	off, err := d.u64()
	if err != nil {
		return err
	}
	if off > math.MaxInt64 {
		return fmt.Errorf("%q: offset %d: %w", t.Name, off, ErrCorrupt)
	}
	t.Offset = int64(off)
	return nil
}
