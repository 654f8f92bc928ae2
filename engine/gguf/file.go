package gguf

import (
	"fmt"
	"io"
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
	f := newFile(h)
	parts := []*header{h}
	if n, ok := f.Uint("split.count"); ok && n > 1 {
		if parts, err = openParts(path, h, int(n)); err != nil {
			return nil, err
		}
		f.Path = parts[0].part.path
	}
	return f, f.addParts(parts)
}

// Part is one file of a model given as something to read bytes from rather
// than a path: a remote file read by HTTP range requests, say.
type Part struct {
	Name string // what errors and File.Path call it
	Size int64  // the whole file's size, tensor data included
	R    io.ReaderAt
}

// OpenParts reads the header and tensor index of a model from its parts, in
// order (one part for a model that is not split). Only the headers are
// read, so TensorData on the File fails with ErrNoData: the planner and the
// draft check need nothing more.
func OpenParts(parts []Part) (*File, error) {
	if len(parts) == 0 {
		return nil, fmt.Errorf("gguf: no parts given: %w", ErrNotFound)
	}
	hs := make([]*header, len(parts))
	for i, p := range parts {
		h, err := parseHeader(io.NewSectionReader(p.R, 0, p.Size), p.Size)
		if err != nil {
			return nil, fmt.Errorf("gguf: %s: %w", p.Name, err)
		}
		h.part.path, h.part.headerOnly = p.Name, true
		hs[i] = h
	}
	f := newFile(hs[0])
	n, ok := f.Uint("split.count")
	if !ok || n == 0 {
		n = 1
	}
	if n != uint64(len(parts)) {
		return nil, fmt.Errorf("gguf: %s: split.count is %d but %d parts were given: %w", f.Path, n, len(parts), ErrCorrupt)
	}
	return f, f.addParts(hs)
}

// newFile is the File of a first part's header, before its parts are added.
func newFile(h *header) *File {
	f := &File{Path: h.part.path, Version: h.version, Alignment: h.alignment, KV: h.kv}
	f.index = make(map[string]int, len(f.KV))
	for i, kv := range f.KV {
		f.index[kv.Key] = i
	}
	return f
}

// addParts indexes the tensors of every part, checking that no tensor is in
// two parts and that the parts hold as many as the split metadata says.
func (f *File) addParts(parts []*header) error {
	f.names = make(map[string]int)
	for pi, p := range parts {
		f.parts = append(f.parts, p.part)
		f.Size += p.part.size
		for _, t := range p.tensors {
			if _, dup := f.names[t.Name]; dup {
				return fmt.Errorf("gguf: %s: tensor %q appears in two parts: %w", p.part.path, t.Name, ErrCorrupt)
			}
			t.part = pi
			f.names[t.Name] = len(f.Tensors)
			f.Tensors = append(f.Tensors, t)
		}
	}
	if want, ok := f.Uint("split.tensors.count"); ok && want != uint64(len(f.Tensors)) {
		return fmt.Errorf("gguf: %s: split.tensors.count is %d but the parts hold %d tensors: %w", f.Path, want, len(f.Tensors), ErrCorrupt)
	}
	return nil
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
	if p.headerOnly {
		return nil, fmt.Errorf("gguf: %s: tensor %q: %w", p.path, t.Name, ErrNoData)
	}
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
