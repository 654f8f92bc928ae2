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

// Writer builds a GGUF v3 file: metadata in the order added, then the tensor
// index, then the data, aligned to general.alignment (32 when absent). Tests,
// fuzz seeds and the synthetic-model tool use it.
type Writer struct {
	kv      []KV
	tensors []pendingTensor
}

type pendingTensor struct {
	info TensorInfo
	data func(io.Writer) error // nil: leave the bytes as a hole (header-only files)
}

// AddKV appends a metadata entry. value is a scalar of a GGUF type (uint8 ...
// float64, bool, string), an Array, or a slice of one of those scalar types,
// which becomes an array.
func (w *Writer) AddKV(key string, value any) {
	w.kv = append(w.kv, KV{key, value})
}

// AddTensor appends a tensor whose bytes are data (len must match the type
// and dims). A nil data writes a header-only entry whose bytes are left as a
// sparse hole by WriteFile.
func (w *Writer) AddTensor(name string, typ quant.Type, dims []int64, data []byte) error {
	var fill func(io.Writer) error
	if data != nil {
		fill = func(out io.Writer) error { _, err := out.Write(data); return err }
	}
	if err := w.AddTensorFunc(name, typ, dims, fill); err != nil {
		return err
	}
	if t := w.tensors[len(w.tensors)-1].info; data != nil && int64(len(data)) != t.Bytes {
		w.tensors = w.tensors[:len(w.tensors)-1]
		return fmt.Errorf("gguf: writer: tensor %q: %d bytes of data, want %d", name, len(data), t.Bytes)
	}
	return nil
}

// AddTensorFunc appends a tensor whose bytes are produced by fill when the
// file is written (for models too big to hold in memory). fill must write
// exactly the tensor's byte size.
func (w *Writer) AddTensorFunc(name string, typ quant.Type, dims []int64, fill func(io.Writer) error) error {
	if len(dims) < 1 || len(dims) > maxDims {
		return fmt.Errorf("gguf: writer: tensor %q: %d dimensions", name, len(dims))
	}
	bytes, err := TensorBytes(typ, dims)
	if err != nil {
		return fmt.Errorf("gguf: writer: tensor %q: %w", name, err)
	}
	info := TensorInfo{Name: name, Dims: append([]int64(nil), dims...), Type: typ, Bytes: bytes}
	w.tensors = append(w.tensors, pendingTensor{info, fill})
	return nil
}

func (w *Writer) alignment() int64 {
	for _, kv := range w.kv {
		if a, ok := kv.Value.(uint32); ok && kv.Key == "general.alignment" && a > 0 {
			return int64(a)
		}
	}
	return defaultAlignment
}

// layout assigns tensor offsets and returns the header bytes.
func (w *Writer) layout() ([]byte, error) {
	a := w.alignment()
	var off int64
	for i := range w.tensors {
		w.tensors[i].info.Offset = off
		off += (w.tensors[i].info.Bytes + a - 1) / a * a
	}
	var e encoder
	e.u32(magic)
	e.u32(3)
	e.u64(uint64(len(w.tensors)))
	e.u64(uint64(len(w.kv)))
	for _, kv := range w.kv {
		e.str(kv.Key)
		if err := e.value(kv.Value); err != nil {
			return nil, fmt.Errorf("gguf: writer: key %q: %w", kv.Key, err)
		}
	}
	for _, t := range w.tensors {
		e.str(t.info.Name)
		e.u32(uint32(len(t.info.Dims)))
		for _, d := range t.info.Dims {
			e.u64(uint64(d))
		}
		e.u32(uint32(t.info.Type))
		e.u64(uint64(t.info.Offset))
	}
	for int64(len(e.b))%a != 0 {
		e.b = append(e.b, 0)
	}
	return e.b, nil
}

// WriteTo writes the whole file to out; tensors added without data are
// written as zeros.
func (w *Writer) WriteTo(out io.Writer) (int64, error) {
	hdr, err := w.layout()
	if err != nil {
		return 0, err
	}
	cw := &countingWriter{w: out}
	if _, err := cw.Write(hdr); err != nil {
		return cw.n, err
	}
	base := cw.n
	for _, t := range w.tensors {
		if err := pad(cw, base+t.info.Offset-cw.n); err != nil {
			return cw.n, err
		}
		start := cw.n
		if t.data != nil {
			if err := t.data(cw); err != nil {
				return cw.n, fmt.Errorf("gguf: writer: tensor %q: %w", t.info.Name, err)
			}
		} else if err := pad(cw, t.info.Bytes); err != nil {
			return cw.n, err
		}
		if got := cw.n - start; got != t.info.Bytes {
			return cw.n, fmt.Errorf("gguf: writer: tensor %q: wrote %d bytes, want %d", t.info.Name, got, t.info.Bytes)
		}
	}
	return cw.n, nil
}

// WriteFile writes the file at path. Tensors without data become sparse
// holes, so a header-only 100 GB model costs only its header on disk.
func (w *Writer) WriteFile(path string) error {
	hdr, err := w.layout()
	if err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("gguf: writer: %w", err)
	}
	bw := bufio.NewWriterSize(f, 1<<20)
	err = func() error {
		if _, err := bw.Write(hdr); err != nil {
			return err
		}
		base := int64(len(hdr))
		var end int64 = base
		for _, t := range w.tensors {
			if t.data == nil {
				end = base + t.info.Offset + t.info.Bytes
				continue
			}
			if err := bw.Flush(); err != nil {
				return err
			}
			if _, err := f.Seek(base+t.info.Offset, io.SeekStart); err != nil {
				return err
			}
			cw := &countingWriter{w: bw}
			if err := t.data(cw); err != nil {
				return fmt.Errorf("tensor %q: %w", t.info.Name, err)
			}
			if cw.n != t.info.Bytes {
				return fmt.Errorf("tensor %q: wrote %d bytes, want %d", t.info.Name, cw.n, t.info.Bytes)
			}
			end = base + t.info.Offset + t.info.Bytes
		}
		if err := bw.Flush(); err != nil {
			return err
		}
		return f.Truncate(end)
	}()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("gguf: writer: %s: %w", path, err)
	}
	return nil
}

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

func pad(w io.Writer, n int64) error {
	var zeros [4096]byte
	for n > 0 {
		k := min(n, int64(len(zeros)))
		if _, err := w.Write(zeros[:k]); err != nil {
			return err
		}
		n -= k
	}
	return nil
}

// encoder appends little-endian GGUF encodings to b.
type encoder struct{ b []byte }

func (e *encoder) u32(v uint32) { e.b = binary.LittleEndian.AppendUint32(e.b, v) }
func (e *encoder) u64(v uint64) { e.b = binary.LittleEndian.AppendUint64(e.b, v) }
func (e *encoder) str(s string) { e.u64(uint64(len(s))); e.b = append(e.b, s...) }

// value writes the type tag and the value.
func (e *encoder) value(v any) error {
	if a, ok := asArray(v); ok {
		e.u32(uint32(TypeArray))
		return e.array(a)
	}
	t, ok := scalarType(v)
	if !ok {
		return fmt.Errorf("unsupported metadata value of Go type %T", v)
	}
	e.u32(uint32(t))
	e.scalar(v)
	return nil
}

func (e *encoder) array(a Array) error {
	e.u32(uint32(a.Elem))
	e.u64(uint64(a.Len()))
	switch s := a.Values.(type) {
	case []Array:
		for _, x := range s {
			if err := e.array(x); err != nil {
				return err
			}
		}
	case []string:
		for _, x := range s {
			e.str(x)
		}
	default:
		if !forEach(a.Values, e.scalar) {
			return fmt.Errorf("unsupported array of %T", a.Values)
		}
	}
	return nil
}

func (e *encoder) scalar(v any) {
	le := binary.LittleEndian
	switch x := v.(type) {
	case uint8:
		e.b = append(e.b, x)
	case int8:
		e.b = append(e.b, byte(x))
	case bool:
		if x {
			e.b = append(e.b, 1)
		} else {
			e.b = append(e.b, 0)
		}
	case uint16:
		e.b = le.AppendUint16(e.b, x)
	case int16:
		e.b = le.AppendUint16(e.b, uint16(x))
	case uint32:
		e.u32(x)
	case int32:
		e.u32(uint32(x))
	case float32:
		e.u32(math.Float32bits(x))
	case uint64:
		e.u64(x)
	case int64:
		e.u64(uint64(x))
	case float64:
		e.u64(math.Float64bits(x))
	case string:
		e.str(x)
	}
}

func scalarType(v any) (ValueType, bool) {
	switch v.(type) {
	case uint8:
		return TypeUint8, true
	case int8:
		return TypeInt8, true
	case uint16:
		return TypeUint16, true
	case int16:
		return TypeInt16, true
	case uint32:
		return TypeUint32, true
	case int32:
		return TypeInt32, true
	case float32:
		return TypeFloat32, true
	case bool:
		return TypeBool, true
	case string:
		return TypeString, true
	case uint64:
		return TypeUint64, true
	case int64:
		return TypeInt64, true
	case float64:
		return TypeFloat64, true
	}
	return 0, false
}

// asArray turns an Array or a typed slice into an Array.
func asArray(v any) (Array, bool) {
	switch s := v.(type) {
	case Array:
		return s, true
	case []Array:
		return Array{TypeArray, s}, true
	case []string:
		return Array{TypeString, s}, true
	case []uint8:
		return Array{TypeUint8, s}, true
	case []int8:
		return Array{TypeInt8, s}, true
	case []uint16:
		return Array{TypeUint16, s}, true
	case []int16:
		return Array{TypeInt16, s}, true
	case []uint32:
		return Array{TypeUint32, s}, true
	case []int32:
		return Array{TypeInt32, s}, true
	case []float32:
		return Array{TypeFloat32, s}, true
	case []bool:
		return Array{TypeBool, s}, true
	case []uint64:
		return Array{TypeUint64, s}, true
	case []int64:
		return Array{TypeInt64, s}, true
	case []float64:
		return Array{TypeFloat64, s}, true
	}
	return Array{}, false
}

// forEach calls fn with each element of a scalar typed slice; false if values
// is not one.
func forEach(values any, fn func(any)) bool {
	switch s := values.(type) {
	case []uint8:
		for _, x := range s {
			fn(x)
		}
	case []int8:
		for _, x := range s {
			fn(x)
		}
	case []uint16:
		for _, x := range s {
			fn(x)
		}
	case []int16:
		for _, x := range s {
			fn(x)
		}
	case []uint32:
		for _, x := range s {
			fn(x)
		}
	case []int32:
		for _, x := range s {
			fn(x)
		}
	case []float32:
		for _, x := range s {
			fn(x)
		}
	case []bool:
		for _, x := range s {
			fn(x)
		}
	case []uint64:
		for _, x := range s {
			fn(x)
		}
	case []int64:
		for _, x := range s {
			fn(x)
		}
	case []float64:
		for _, x := range s {
			fn(x)
		}
	default:
		return false
	}
	return true
}
