package gguf

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/tandem-run/tandem/kernels/quant"
)

// countingReader counts the bytes read through it, to show a header is read
// without the tensor data.
type countingReader struct {
	r    *bytes.Reader
	read int64
}

func (c *countingReader) ReadAt(p []byte, off int64) (int, error) {
	n, err := c.r.ReadAt(p, off)
	c.read += int64(n)
	return n, err
}

func TestOpenPartsMatchesOpen(t *testing.T) {
	var w Writer
	w.AddKV("general.architecture", "llama")
	w.AddKV("tokens", []string{"a", "b"})
	must(t, w.AddTensor("big", quant.F16, []int64{1024, 256}, nil)) // 512 KiB of data
	p := filepath.Join(t.TempDir(), "m.gguf")
	must(t, w.WriteFile(p))
	b, err := os.ReadFile(p)
	must(t, err)
	local, err := Open(p)
	must(t, err)
	defer local.Close()

	cr := &countingReader{r: bytes.NewReader(b)}
	f, err := OpenParts([]Part{{Name: "remote/m.gguf", Size: int64(len(b)), R: cr}})
	must(t, err)
	if f.Path != "remote/m.gguf" || f.Size != local.Size || !reflect.DeepEqual(f.KV, local.KV) {
		t.Fatalf("path %q size %d, KV equal %v", f.Path, f.Size, reflect.DeepEqual(f.KV, local.KV))
	}
	if len(f.Tensors) != 1 || f.Tensors[0].Bytes != local.Tensors[0].Bytes || f.Tensors[0].Offset != local.Tensors[0].Offset {
		t.Fatalf("tensors %+v, want %+v", f.Tensors, local.Tensors)
	}
	if cr.read >= int64(len(b))/2 {
		t.Errorf("read %d of %d bytes for the header", cr.read, len(b))
	}
	if _, err := f.TensorData(&f.Tensors[0]); !errors.Is(err, ErrNoData) {
		t.Errorf("TensorData of a header-only file: %v", err)
	}
}

func TestOpenPartsSplit(t *testing.T) {
	const n = 2
	var parts []Part
	for i := range n {
		var w Writer
		w.AddKV("general.architecture", "llama")
		w.AddKV("split.no", uint16(i))
		w.AddKV("split.count", uint16(n))
		w.AddKV("split.tensors.count", int32(n))
		must(t, w.AddTensor("t"+string(rune('0'+i)), quant.F32, []int64{4}, bytes.Repeat([]byte{byte(i + 1)}, 16)))
		var buf bytes.Buffer
		_, err := w.WriteTo(&buf)
		must(t, err)
		parts = append(parts, Part{Name: "part" + string(rune('1'+i)), Size: int64(buf.Len()), R: bytes.NewReader(buf.Bytes())})
	}
	f, err := OpenParts(parts)
	must(t, err)
	if len(f.Tensors) != n || f.Path != "part1" {
		t.Fatalf("%d tensors, path %s", len(f.Tensors), f.Path)
	}
	if _, err := OpenParts(parts[:1]); !errors.Is(err, ErrCorrupt) {
		t.Errorf("one part of two: %v", err)
	}
	if _, err := OpenParts(nil); err == nil {
		t.Error("no parts opened")
	}
	short := parts[0]
	short.Size = 40
	if _, err := OpenParts([]Part{short}); !errors.Is(err, ErrTruncated) && !errors.Is(err, ErrCorrupt) {
		t.Errorf("truncated part: %v", err)
	}
}
