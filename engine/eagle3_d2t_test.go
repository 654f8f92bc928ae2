package engine

import (
	"encoding/binary"
	"path/filepath"
	"testing"

	"github.com/tandem-run/tandem/engine/gguf"
	"github.com/tandem-run/tandem/kernels/quant"
)

// eagle3WithD2T writes the demo EAGLE-3 draft with a reduced vocabulary of
// its own, as real EAGLE-3 drafts have: a head over three of every four
// target ids (their rows copied from target's head) and the d2t map.
func eagle3WithD2T(t *testing.T, target string) string {
	t.Helper()
	open := func(p string) *gguf.File {
		f, err := gguf.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		return f
	}
	tf, df := open(target), open(modelPath(t, "factory-eagle3-F16.gguf"))
	head, ok := tf.Tensor("output.weight")
	if !ok {
		t.Fatal("the target has no output.weight")
	}
	headData, err := tf.TensorData(head)
	if err != nil {
		t.Fatal(err)
	}
	rowBytes := len(headData) / int(head.Dims[1])
	var rows, d2t []byte
	n := 0
	for id := range int(head.Dims[1]) {
		if id%4 == 1 {
			continue
		}
		rows = append(rows, headData[id*rowBytes:(id+1)*rowBytes]...)
		d2t = binary.LittleEndian.AppendUint64(d2t, uint64(id))
		n++
	}
	var w gguf.Writer
	for _, e := range df.KV {
		w.AddKV(e.Key, e.Value)
	}
	for _, info := range df.Tensors {
		data, err := df.TensorData(&info)
		if err != nil {
			t.Fatal(err)
		}
		if err := w.AddTensor(info.Name, info.Type, info.Dims, data); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.AddTensor("output.weight", head.Type, []int64{head.Dims[0], int64(n)}, rows); err != nil {
		t.Fatal(err)
	}
	if err := w.AddTensor("d2t", quant.I64, []int64{int64(n)}, d2t); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "eagle3-d2t.gguf")
	if err := w.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	return path
}
