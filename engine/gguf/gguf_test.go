package gguf

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/tandem-run/tandem/kernels/quant"
	"github.com/tandem-run/tandem/kernels/sharedtest"
)

// sample builds a small model with every metadata type and a few tensors.
func sample(t testing.TB) (*Writer, map[string][]byte) {
	t.Helper()
	var w Writer
	w.AddKV("general.architecture", "llama")
	w.AddKV("general.alignment", uint32(64))
	w.AddKV("u8", uint8(7))
	w.AddKV("i8", int8(-7))
	w.AddKV("u16", uint16(700))
	w.AddKV("i16", int16(-700))
	w.AddKV("u32", uint32(70000))
	w.AddKV("i32", int32(-70000))
	w.AddKV("f32", float32(1.5))
	w.AddKV("bool", true)
	w.AddKV("str", "héllo")
	w.AddKV("u64", uint64(1)<<40)
	w.AddKV("i64", int64(-1)<<40)
	w.AddKV("f64", 2.25)
	w.AddKV("llama.block_count", uint32(2))
	w.AddKV("tokens", []string{"a", "", "ß"})
	w.AddKV("types", []int32{1, 3, 6})
	w.AddKV("scores", []float32{-1, 0, 2.5})
	w.AddKV("bytes", []uint8{1, 2})
	w.AddKV("nested", []Array{{TypeUint16, []uint16{1, 2}}, {TypeString, []string{"x"}}})
	data := map[string][]byte{
		"token_embd.weight": bytes.Repeat([]byte{1, 2}, 32*3),        // F16 [32 3]
		"blk.0.q.weight":    bytes.Repeat([]byte{9}, 34*2*5),         // Q8_0 [64 5]
		"output_norm":       bytes.Repeat([]byte{0, 0, 128, 63}, 32), // F32 [32]
	}
	must(t, w.AddTensor("token_embd.weight", quant.F16, []int64{32, 3}, data["token_embd.weight"]))
	must(t, w.AddTensor("blk.0.q.weight", quant.Q8_0, []int64{64, 5}, data["blk.0.q.weight"]))
	must(t, w.AddTensor("output_norm", quant.F32, []int64{32}, data["output_norm"]))
	return &w, data
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func writeTemp(t testing.TB, b []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "m.gguf")
	must(t, os.WriteFile(p, b, 0o644))
	return p
}

func TestRoundTrip(t *testing.T) {
	w, data := sample(t)
	var buf bytes.Buffer
	if _, err := w.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	f, err := Open(writeTemp(t, buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if f.Version != 3 || f.Alignment != 64 || f.Arch() != "llama" {
		t.Fatalf("version %d alignment %d arch %q", f.Version, f.Alignment, f.Arch())
	}
	if len(f.KV) != len(w.kv) {
		t.Fatalf("%d keys, want %d", len(f.KV), len(w.kv))
	}
	for i, kv := range w.kv {
		want := kv.Value
		if a, ok := asArray(want); ok {
			want = a
		}
		if got := f.KV[i]; got.Key != kv.Key || !reflect.DeepEqual(got.Value, want) {
			t.Errorf("key %d: got %s=%#v, want %s=%#v", i, got.Key, got.Value, kv.Key, want)
		}
	}
	if n, ok := f.ArchUint("block_count"); !ok || n != 2 {
		t.Errorf("block_count = %d, %v", n, ok)
	}
	if v, ok := f.Int("i64"); !ok || v != -1<<40 {
		t.Errorf("i64 = %d, %v", v, ok)
	}
	if _, ok := f.Uint("i8"); ok {
		t.Error("Uint of a negative value succeeded")
	}
	if v, ok := f.Float("u16"); !ok || v != 700 {
		t.Errorf("Float(u16) = %v, %v", v, ok)
	}
	if s, ok := f.Strings("tokens"); !ok || !reflect.DeepEqual(s, []string{"a", "", "ß"}) {
		t.Errorf("tokens = %q", s)
	}
	if s, ok := f.Int32s("bytes"); !ok || !reflect.DeepEqual(s, []int32{1, 2}) {
		t.Errorf("Int32s(bytes) = %v", s)
	}
	if s, ok := f.Float32s("scores"); !ok || !reflect.DeepEqual(s, []float32{-1, 0, 2.5}) {
		t.Errorf("scores = %v", s)
	}
	for name, want := range data {
		ti, ok := f.Tensor(name)
		if !ok {
			t.Fatalf("tensor %q missing", name)
		}
		got, err := f.TensorData(ti)
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("tensor %q: %d bytes, err %v", name, len(got), err)
		}
		if ti.Offset%64 != 0 {
			t.Errorf("tensor %q offset %d not aligned", name, ti.Offset)
		}
	}
}

func TestSplitFiles(t *testing.T) {
	dir := t.TempDir()
	const n = 3
	for i := range n {
		var w Writer
		w.AddKV("general.architecture", "llama")
		w.AddKV("split.no", uint16(i))
		w.AddKV("split.count", uint16(n))
		w.AddKV("split.tensors.count", int32(n))
		must(t, w.AddTensor("t"+string(rune('0'+i)), quant.F32, []int64{4}, bytes.Repeat([]byte{byte(i + 1)}, 16)))
		must(t, w.WriteFile(filepath.Join(dir, "model-0000"+string(rune('1'+i))+"-of-00003.gguf")))
	}
	// Any part opens the whole model.
	f, err := Open(filepath.Join(dir, "model-00002-of-00003.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if len(f.Tensors) != n || !strings.HasSuffix(f.Path, "00001-of-00003.gguf") {
		t.Fatalf("%d tensors, path %s", len(f.Tensors), f.Path)
	}
	for i := range n {
		ti, _ := f.Tensor("t" + string(rune('0'+i)))
		b, err := f.TensorData(ti)
		if err != nil || b[0] != byte(i+1) {
			t.Errorf("part %d: %v %v", i, b, err)
		}
	}
	must(t, os.Remove(filepath.Join(dir, "model-00003-of-00003.gguf")))
	if _, err := Open(filepath.Join(dir, "model-00001-of-00003.gguf")); err == nil {
		t.Error("opened a split model with a part missing")
	}
}

func TestHeaderOnlyIsSparse(t *testing.T) {
	var w Writer
	w.AddKV("general.architecture", "llama")
	must(t, w.AddTensor("big", quant.Q4_K, []int64{8192, 1 << 20}, nil)) // 4.5 GiB
	p := filepath.Join(t.TempDir(), "big.gguf")
	must(t, w.WriteFile(p))
	f, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	if ti, _ := f.Tensor("big"); ti.Bytes != 8192/256*144<<20 {
		t.Errorf("bytes %d", ti.Bytes)
	}
}

// corrupt returns the sample file with fn applied to its bytes.
func corrupt(t *testing.T, fn func(b []byte) []byte) []byte {
	w, _ := sample(t)
	var buf bytes.Buffer
	if _, err := w.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	return fn(buf.Bytes())
}

func TestBadInput(t *testing.T) {
	le := binary.LittleEndian
	hugeString := func(b []byte) []byte { // first key's length
		le.PutUint64(b[24:], 1<<62)
		return b
	}
	cases := []struct {
		name string
		b    []byte
		want error
	}{
		{"empty", nil, ErrTruncated},
		{"wrong magic", corrupt(t, func(b []byte) []byte { b[0] = 'X'; return b }), ErrMagic},
		{"version 1", corrupt(t, func(b []byte) []byte { le.PutUint32(b[4:], 1); return b }), ErrVersion},
		{"version 4", corrupt(t, func(b []byte) []byte { le.PutUint32(b[4:], 4); return b }), ErrVersion},
		{"absurd tensor count", corrupt(t, func(b []byte) []byte { le.PutUint64(b[8:], 1<<60); return b }), ErrCorrupt},
		{"absurd key count", corrupt(t, func(b []byte) []byte { le.PutUint64(b[16:], 1<<60); return b }), ErrCorrupt},
		{"absurd string length", corrupt(t, hugeString), ErrCorrupt},
		{"truncated data", corrupt(t, func(b []byte) []byte { return b[:len(b)-1] }), ErrTruncated},
		{"unknown value type", corrupt(t, func(b []byte) []byte {
			i := bytes.Index(b, []byte("general.architecture")) + len("general.architecture")
			le.PutUint32(b[i:], 99)
			return b
		}), ErrUnknownType},
		{"unknown tensor type", corrupt(t, func(b []byte) []byte {
			i := bytes.Index(b, []byte("output_norm")) + len("output_norm") + 4 + 8
			le.PutUint32(b[i:], 1000)
			return b
		}), ErrUnknownType},
		{"misaligned offset", corrupt(t, func(b []byte) []byte {
			i := bytes.Index(b, []byte("output_norm")) + len("output_norm") + 4 + 8 + 4
			le.PutUint64(b[i:], le.Uint64(b[i:])+4)
			return b
		}), ErrCorrupt},
		{"offset past end", corrupt(t, func(b []byte) []byte {
			i := bytes.Index(b, []byte("output_norm")) + len("output_norm") + 4 + 8 + 4
			le.PutUint64(b[i:], 1<<40)
			return b
		}), ErrTruncated},
		{"too many dims", corrupt(t, func(b []byte) []byte {
			i := bytes.Index(b, []byte("output_norm")) + len("output_norm")
			le.PutUint32(b[i:], 9)
			return b
		}), ErrCorrupt},
		{"row not whole blocks", corrupt(t, func(b []byte) []byte {
			i := bytes.Index(b, []byte("blk.0.q.weight")) + len("blk.0.q.weight") + 4
			le.PutUint64(b[i:], 63)
			return b
		}), ErrCorrupt},
		{"alignment not a power of two", corrupt(t, func(b []byte) []byte {
			i := bytes.Index(b, []byte("general.alignment")) + len("general.alignment") + 4
			le.PutUint32(b[i:], 48)
			return b
		}), ErrCorrupt},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := writeTemp(t, c.b)
			_, err := Open(p)
			if !errors.Is(err, c.want) {
				t.Fatalf("err = %v, want %v", err, c.want)
			}
			if !strings.Contains(err.Error(), p) || !strings.HasPrefix(err.Error(), "gguf: ") {
				t.Errorf("error %q does not name the file", err)
			}
		})
	}
}

// Every prefix of a valid file is an error, never a panic.
func TestEveryTruncation(t *testing.T) {
	b := corrupt(t, func(b []byte) []byte { return b })
	for n := range len(b) {
		if _, err := parseHeader(bytes.NewReader(b[:n]), int64(n)); err == nil {
			// A prefix can hold a whole header only if the tensor data fits too.
			t.Fatalf("prefix of %d bytes parsed", n)
		}
	}
}

func TestSharedModels(t *testing.T) {
	dir := sharedtest.Dir(t)
	paths, _ := filepath.Glob(filepath.Join(dir, "models", "*.gguf"))
	vocab, _ := filepath.Glob(filepath.Join(dir, "testdata", "vocab", "*.gguf"))
	if len(paths) == 0 {
		t.Fatal("no models in shared/models")
	}
	for _, p := range append(paths, vocab...) {
		f, err := Open(p)
		if err != nil {
			t.Errorf("%v", err)
			continue
		}
		st, _ := os.Stat(p)
		if f.Size != st.Size() {
			t.Errorf("%s: size %d, want %d", p, f.Size, st.Size())
		}
		var sum int64
		for i := range f.Tensors {
			ti := &f.Tensors[i]
			b, err := f.TensorData(ti)
			if err != nil || int64(len(b)) != ti.Bytes {
				t.Errorf("%s: %s: %d bytes, %v", p, ti.Name, len(b), err)
			}
			sum += ti.Bytes
		}
		if toks, ok := f.Strings("tokenizer.ggml.tokens"); !ok || len(toks) < 1000 {
			t.Errorf("%s: %d tokens", p, len(toks))
		}
		if strings.Contains(p, "factory-target") {
			if f.Arch() != "qwen3" || len(f.Tensors) != 91 {
				t.Errorf("%s: arch %q, %d tensors", p, f.Arch(), len(f.Tensors))
			}
			if n, _ := f.ArchUint("block_count"); n != 8 {
				t.Errorf("%s: block_count %d", p, n)
			}
		}
		must(t, f.Close())
	}
}
