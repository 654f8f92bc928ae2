package gguf

import (
	"bytes"
	"testing"
)

// FuzzOpen feeds arbitrary bytes to the header parser: it may refuse them,
// but must never panic, hang or allocate beyond the input's size.
// Seeds live in testdata/fuzz/FuzzOpen; more are added here.
func FuzzOpen(f *testing.F) {
	w, _ := sample(f)
	var buf bytes.Buffer
	if _, err := w.WriteTo(&buf); err != nil {
		f.Fatal(err)
	}
	f.Add(buf.Bytes())
	f.Add(buf.Bytes()[:40])
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := parseHeader(bytes.NewReader(b), int64(len(b)))
		if err != nil {
			return
		}
		for _, ti := range h.tensors {
			if ti.Offset+ti.Bytes > int64(len(b))-h.part.dataOffset {
				t.Fatalf("tensor %q past the end accepted", ti.Name)
			}
		}
	})
}
