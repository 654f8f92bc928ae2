package main

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"sort"

	"github.com/tandem-run/tandem/kernels/quant"
)

// The safetensors format is an 8-byte little-endian header length, a JSON
// header naming each tensor's dtype, shape and byte range, then the bytes.
// It is read here by hand: the format is a page long, and no Go module on
// the proxy list reads it without pulling in a tensor library.

// maxHeader caps the JSON header read from an untrusted file.
const maxHeader = 64 << 20

// stTensor is one tensor of a safetensors file.
type stTensor struct {
	DType   string   `json:"dtype"`
	Shape   []int64  `json:"shape"`
	Offsets [2]int64 `json:"data_offsets"`
}

// safetensors is a whole file read into memory (fixtures and small models;
// a converter for large models would map it instead).
type safetensors struct {
	path    string
	tensors map[string]stTensor
	data    []byte
}

func readSafetensors(path string) (*safetensors, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("safetensors: %w", err)
	}
	if len(raw) < 8 {
		return nil, fmt.Errorf("safetensors: %s: %d bytes, no header", path, len(raw))
	}
	n := binary.LittleEndian.Uint64(raw)
	if n > maxHeader || n > uint64(len(raw)-8) {
		return nil, fmt.Errorf("safetensors: %s: header of %d bytes in a file of %d", path, n, len(raw))
	}
	var hdr map[string]json.RawMessage
	if err := json.Unmarshal(raw[8:8+n], &hdr); err != nil {
		return nil, fmt.Errorf("safetensors: %s: header: %w", path, err)
	}
	st := &safetensors{path: path, tensors: map[string]stTensor{}, data: raw[8+n:]}
	for name, msg := range hdr {
		if name == "__metadata__" {
			continue
		}
		var t stTensor
		if err := json.Unmarshal(msg, &t); err != nil {
			return nil, fmt.Errorf("safetensors: %s: tensor %q: %w", path, name, err)
		}
		elems := int64(1)
		for _, d := range t.Shape {
			if d < 0 || d > 1<<40 || elems > (1<<40)/max(d, 1) {
				return nil, fmt.Errorf("safetensors: %s: tensor %q: shape %v", path, name, t.Shape)
			}
			elems *= d
		}
		size, ok := dtypeSize(t.DType)
		if !ok {
			return nil, fmt.Errorf("safetensors: %s: tensor %q: dtype %q (F32, F16 and BF16 are read)", path, name, t.DType)
		}
		b, e := t.Offsets[0], t.Offsets[1]
		if b < 0 || e < b || e > int64(len(st.data)) || e-b != elems*size {
			return nil, fmt.Errorf("safetensors: %s: tensor %q: bytes [%d, %d) for %d %s values in %d bytes of data",
				path, name, b, e, elems, t.DType, len(st.data))
		}
		st.tensors[name] = t
	}
	return st, nil
}

func dtypeSize(dtype string) (int64, bool) {
	switch dtype {
	case "F32":
		return 4, true
	case "F16", "BF16":
		return 2, true
	}
	return 0, false
}

// names lists the tensors in a fixed order.
func (st *safetensors) names() []string {
	out := make([]string, 0, len(st.tensors))
	for n := range st.tensors {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// float32s is tensor name as float32, with its shape.
func (st *safetensors) float32s(name string) ([]float32, []int64, error) {
	t, ok := st.tensors[name]
	if !ok {
		return nil, nil, fmt.Errorf("safetensors: %s: no tensor %q", st.path, name)
	}
	raw := st.data[t.Offsets[0]:t.Offsets[1]]
	size, _ := dtypeSize(t.DType)
	out := make([]float32, int64(len(raw))/size)
	switch t.DType {
	case "F32":
		for i := range out {
			out[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
		}
	case "F16":
		if err := quant.Dequantize(quant.F16, raw, out); err != nil {
			return nil, nil, fmt.Errorf("safetensors: %s: %q: %w", st.path, name, err)
		}
	case "BF16":
		for i := range out {
			out[i] = math.Float32frombits(uint32(binary.LittleEndian.Uint16(raw[2*i:])) << 16)
		}
	}
	return out, t.Shape, nil
}
