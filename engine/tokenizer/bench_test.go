package tokenizer

import (
	"os"
	"strings"
	"testing"

	"github.com/tandem-run/tandem/kernels/sharedtest"
)

// englishMB is 1 MiB of English prose: the held-out text, repeated.
func englishMB(b *testing.B) string {
	raw, err := os.ReadFile(sharedtest.Path(b, "oracle", "heldout.txt"))
	if err != nil {
		b.Fatal(err)
	}
	const size = 1 << 20
	return strings.Repeat(string(raw), size/len(raw)+1)[:size]
}

func benchmarkEncode(b *testing.B, vocab ...string) {
	tk := loadTokenizer(b, sharedtest.Path(b, vocab...))
	text := englishMB(b)
	b.SetBytes(int64(len(text)))
	b.ResetTimer()
	for b.Loop() {
		if _, err := tk.Encode(text, EncodeOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}

// The target is well under a second per MiB (above 1 MB/s) on one core.
func BenchmarkEncodeQwen3(b *testing.B) {
	benchmarkEncode(b, "testdata", "vocab", "vocab-qwen3.gguf")
}

func BenchmarkEncodeLlama3(b *testing.B) {
	benchmarkEncode(b, "testdata", "vocab", "vocab-llama3.gguf")
}

func BenchmarkEncodeLlamaSPM(b *testing.B) {
	benchmarkEncode(b, "testdata", "vocab", "ggml-vocab-llama-spm.gguf")
}

func BenchmarkEncodeDeepseekRegex(b *testing.B) {
	benchmarkEncode(b, "testdata", "vocab", "ggml-vocab-deepseek-llm.gguf")
}

func BenchmarkDecodeQwen3(b *testing.B) {
	tk := loadTokenizer(b, sharedtest.Path(b, "testdata", "vocab", "vocab-qwen3.gguf"))
	text := englishMB(b)
	ids, err := tk.Encode(text, EncodeOptions{})
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(text)))
	b.ResetTimer()
	for b.Loop() {
		tk.Decode(ids)
	}
}
