package model

import (
	"context"
	"errors"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/tandem-run/tandem/engine/gguf"
	"github.com/tandem-run/tandem/engine/plan"
	"github.com/tandem-run/tandem/kernels/cpu"
	"github.com/tandem-run/tandem/kernels/sharedtest"
)

// headerCopy writes a header-only copy of the shared model name (tensor
// bytes left as sparse holes) with the metadata in set replacing or adding
// to the original's, and returns its path.
func headerCopy(t testing.TB, name string, set map[string]any) string {
	t.Helper()
	return rewriteHeader(t, sharedtest.Path(t, "models", name), set, nil)
}

// rewriteHeader is headerCopy of the file at src; extra may add entries.
func rewriteHeader(t testing.TB, src string, set map[string]any, extra func(*gguf.Writer)) string {
	t.Helper()
	f, err := gguf.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var w gguf.Writer
	for _, kv := range f.KV {
		if v, ok := set[kv.Key]; ok {
			kv.Value = v
		}
		w.AddKV(kv.Key, kv.Value)
	}
	for k, v := range set {
		if _, ok := f.Get(k); !ok {
			w.AddKV(k, v)
		}
	}
	for _, ti := range f.Tensors {
		if err := w.AddTensor(ti.Name, ti.Type, ti.Dims, nil); err != nil {
			t.Fatal(err)
		}
	}
	if extra != nil {
		extra(&w)
	}
	path := filepath.Join(t.TempDir(), "hostile.gguf")
	if err := w.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	return path
}

// Hyper-parameters that disagree with the tensors, or are far past any
// real model, are refused before anything is sized by them: 2^20 blocks
// once built 3.4 GB of per-block specs before a tensor was looked at, and
// 2^31 ended the process out of memory.
func TestHostileParamsAreRefusedBeforeAllocation(t *testing.T) {
	for _, c := range []struct {
		name string
		set  map[string]any
	}{
		{"2^16 blocks", map[string]any{"qwen3.block_count": uint32(1 << 16)}},
		{"2^20 blocks", map[string]any{"qwen3.block_count": uint32(1 << 20)}},
		{"2^31 blocks", map[string]any{"qwen3.block_count": uint32(1 << 31)}},
		{"9 blocks of 8", map[string]any{"qwen3.block_count": uint32(9)}},
		{"2^30 heads", map[string]any{"qwen3.attention.head_count": uint32(1 << 30), "qwen3.attention.head_count_kv": uint32(1 << 30)}},
		{"12 heads", map[string]any{"qwen3.attention.head_count": uint32(12)}},
		{"2^31 key length", map[string]any{"qwen3.attention.key_length": uint32(1 << 31), "qwen3.attention.value_length": uint32(1 << 31)}},
		{"2^31 embedding", map[string]any{"qwen3.embedding_length": uint32(1 << 31)}},
		{"embedding of 768", map[string]any{"qwen3.embedding_length": uint32(768)}},
		{"2^31 feed-forward", map[string]any{"qwen3.feed_forward_length": uint32(1 << 31)}},
		{"2^31 context", map[string]any{"qwen3.context_length": uint32(1 << 31)}},
		{"vocabulary of 9", map[string]any{"tokenizer.ggml.tokens": []string{"a", "b", "c", "d", "e", "f", "g", "h", "i"}}},
		{"64 experts", map[string]any{"qwen3.expert_count": uint32(64), "qwen3.expert_used_count": uint32(8)}},
	} {
		path := headerCopy(t, "factory-target-F16.gguf", c.set)
		f, err := gguf.Open(path)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		be := cpu.New(cpu.Options{Threads: 1})
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		m, err := Load(context.Background(), f, be, Options{Context: 64})
		runtime.ReadMemStats(&after)
		if err == nil {
			m.Close()
			t.Errorf("%s: loaded", c.name)
		} else if !errors.Is(err, ErrBadParam) && !errors.Is(err, ErrShape) && !errors.Is(err, ErrUnsupported) && !errors.Is(err, plan.ErrBadHeader) {
			t.Errorf("%s: %v, want a bad hyper-parameter, shape, unsupported feature or bad header", c.name, err)
		}
		if grew := after.TotalAlloc - before.TotalAlloc; grew > 4<<20 {
			t.Errorf("%s: %d MB allocated before the refusal (%v)", c.name, grew>>20, err)
		}
		be.Close()
		f.Close()
	}
}
