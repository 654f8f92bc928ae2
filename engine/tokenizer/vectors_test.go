package tokenizer

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/tandem-run/tandem/kernels/sharedtest"
)

// readVectors reads llama.cpp's tokenizer test vectors: NAME.gguf.inp holds
// strings each followed by "\n__ggml_vocab_test__\n"; NAME.gguf.out holds
// the reference ids (from HF tokenizers, no special tokens added), one line
// per string.
func readVectors(t *testing.T, gguf string) ([]string, [][]int32) {
	t.Helper()
	inp, err := os.ReadFile(gguf + ".inp")
	if err != nil {
		t.Fatal(err)
	}
	out, err := os.ReadFile(gguf + ".out")
	if err != nil {
		t.Fatal(err)
	}
	const sep = "\n__ggml_vocab_test__\n"
	texts := strings.Split(string(inp), sep)
	if texts[len(texts)-1] != "" {
		t.Fatalf("%s.inp does not end with the separator", gguf)
	}
	texts = texts[:len(texts)-1]
	lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	if len(lines) != len(texts) {
		t.Fatalf("%s: %d strings but %d id lines", gguf, len(texts), len(lines))
	}
	ids := make([][]int32, len(lines))
	for i, line := range lines {
		for _, f := range strings.Fields(line) {
			id, err := strconv.ParseInt(f, 10, 32)
			if err != nil {
				t.Fatalf("%s.out line %d: %v", gguf, i+1, err)
			}
			ids[i] = append(ids[i], int32(id))
		}
	}
	return texts, ids
}

func TestVocabVectors(t *testing.T) {
	paths, err := filepath.Glob(sharedtest.Path(t, "testdata", "vocab", "ggml-vocab-*.gguf"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no ggml-vocab-*.gguf files (%v)", err)
	}
	for _, path := range paths {
		name := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(path), "ggml-vocab-"), ".gguf")
		t.Run(name, func(t *testing.T) {
			tk := loadTokenizer(t, path)
			texts, want := readVectors(t, path)
			pass := 0
			for i, s := range texts {
				got, err := tk.Encode(s, EncodeOptions{})
				if err != nil {
					t.Errorf("string %d %q: %v", i, s, err)
					continue
				}
				if !slices.Equal(got, want[i]) {
					t.Errorf("string %d %q:\n got %v\nwant %v", i, s, got, want[i])
					continue
				}
				pass++
				if back := tk.Decode(got); back != s {
					t.Errorf("string %d: Decode(Encode(%q)) = %q", i, s, back)
				}
			}
			t.Logf("%s (%s/%s): %d/%d strings give the reference ids", name, tk.Kind(), tk.Pre(), pass, len(texts))
		})
	}
}
