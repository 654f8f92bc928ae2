package gguf

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"

	"github.com/tandem-run/tandem/kernels/quant"
)

// TensorInfo is one entry of the tensor index.
type TensorInfo struct {
	Name   string
	Dims   []int64 // ne0 (the row length) first, as ggml orders them
	Type   quant.Type
	Offset int64 // from the start of its part's data section
	Bytes  int64
	part   int
}

// Elements is the number of values in t (Open has checked that it fits an
// int64; -1 for a hand-made TensorInfo whose count does not).
func (t *TensorInfo) Elements() int64 {
	n, ok := Product(t.Dims...)
	if !ok {
		return -1
	}
	return n
}

// File is an opened GGUF model: its metadata and tensor index. Tensor data is
// mapped only when TensorData is first called.
type File struct {
	Path      string // the first part
	Version   uint32
	Alignment int64
	Size      int64 // bytes of all parts together
	KV        []KV
	Tensors   []TensorInfo

	index map[string]int // metadata key -> position in KV
	names map[string]int // tensor name -> position in Tensors

	mu    sync.Mutex
	parts []part
}

var splitName = regexp.MustCompile(`^(.*)-(\d{5})-of-(\d{5})\.gguf$`)

// Open reads the header and tensor index of the GGUF file at path, and of
// its sibling parts when it is one part of a split model. No weights are read.
func Open(path string) (*File, error) {
	h, err := readHeader(path)
	if err != nil {
		return nil, fmt.Errorf("gguf: %s: %w", path, err)
	}
	f := &File{Path: path, Version: h.version, Alignment: h.alignment, KV: h.kv}
	f.index = make(map[string]int, len(f.KV))
	for i, kv := range f.KV {
		f.index[kv.Key] = i
	}
	parts := []*header{h}
	if n, ok := f.Uint("split.count"); ok && n > 1 {
		if parts, err = openParts(path, h, int(n)); err != nil {
			return nil, err
		}
		f.Path = parts[0].part.path
	}
	f.names = make(map[string]int)
	for pi, p := range parts {
		f.parts = append(f.parts, p.part)
		f.Size += p.part.size
		for _, t := range p.tensors {
			if _, dup := f.names[t.Name]; dup {
				return nil, fmt.Errorf("gguf: %s: tensor %q appears in two parts: %w", p.part.path, t.Name, ErrCorrupt)
			}
			t.part = pi
			f.names[t.Name] = len(f.Tensors)
			f.Tensors = append(f.Tensors, t)
		}
	}
	if want, ok := f.Uint("split.tensors.count"); ok && want != uint64(len(f.Tensors)) {
		return nil, fmt.Errorf("gguf: %s: split.tensors.count is %d but the parts hold %d tensors: %w", f.Path, want, len(f.Tensors), ErrCorrupt)
	}
	return f, nil
}

// openParts reads every part of a split model, given any one of them.
func openParts(path string, first *header, n int) ([]*header, error) {
	m := splitName.FindStringSubmatch(filepath.Base(path))
	if m == nil {
		return nil, fmt.Errorf("gguf: %s: split.count is %d but the name is not NAME-00001-of-%05d.gguf: %w", path, n, n, ErrCorrupt)
	}
	if total, _ := strconv.Atoi(m[3]); total != n {
		return nil, fmt.Errorf("gguf: %s: split.count is %d but the name says %d parts: %w", path, n, total, ErrCorrupt)
	}
	self, _ := strconv.Atoi(m[2])
	dir := filepath.Dir(path)
	hs := make([]*header, n)
	for i := range n {
		if i+1 == self {
			hs[i] = first
			continue
		}
		p := filepath.Join(dir, fmt.Sprintf("%s-%05d-of-%05d.gguf", m[1], i+1, n))
		h, err := readHeader(p)
		if err != nil {
			return nil, fmt.Errorf("gguf: %s: part %d of %d: %w", p, i+1, n, err)
		}
		hs[i] = h
	}
	return hs, nil
}

// Tensor finds a tensor by name.
func (f *File) Tensor(name string) (*TensorInfo, bool) {
	i, ok := f.names[name]
	if !ok {
		return nil, false
	}
	return &f.Tensors[i], true
}

// TensorData returns the bytes of t, mapped read-only from the file. The
// slice stays valid until Close.
func (f *File) TensorData(t *TensorInfo) ([]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if t.part < 0 || t.part >= len(f.parts) {
		return nil, fmt.Errorf("gguf: %s: tensor %q: %w", f.Path, t.Name, ErrNotFound)
	}
	p := &f.parts[t.part]
	if p.mapping == nil {
		m, err := mapFile(p.path, p.size)
		if err != nil {
			return nil, fmt.Errorf("gguf: %s: map: %w", p.path, err)
		}
		p.mapping = m
	}
	start := p.dataOffset + t.Offset
	return p.mapping[start : start+t.Bytes : start+t.Bytes], nil
}

// Close unmaps any mapped data. Slices from TensorData are invalid after it.
func (f *File) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	var first error
	for i := range f.parts {
		if f.parts[i].mapping != nil {
			if err := unmapFile(f.parts[i].mapping); err != nil && first == nil {
				first = fmt.Errorf("gguf: %s: unmap: %w", f.parts[i].path, err)
			}
			f.parts[i].mapping = nil
		}
	}
	return first
}
