package tokenizer

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"golang.org/x/text/unicode/norm"

	"github.com/tandem-run/tandem/engine/gguf"
	"github.com/tandem-run/tandem/kernels/sharedtest"
)

// tokenizerOracle is ../shared/oracle/tokenizer_oracle.json: reference ids
// from HF tokenizers, special tokens parsed, no BOS/EOS.
type tokenizerOracle struct {
	Strings    []string             `json:"strings"`
	Tokenizers map[string][][]int32 `json:"tokenizers"`
	Files      map[string]string    `json:"files"` // relative to oracle/, maybe with a note after a space
}

func loadOracle(t testing.TB) (tokenizerOracle, string) {
	t.Helper()
	path := sharedtest.Path(t, "oracle", "tokenizer_oracle.json")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var o tokenizerOracle
	if err := json.Unmarshal(b, &o); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return o, filepath.Dir(path)
}

// Loaded vocabularies and tokenizers are shared between tests: the big ones
// take a noticeable fraction of a second to read and build.
var (
	vocabCache     sync.Map // path -> Vocab
	tokenizerCache sync.Map // path -> *Tokenizer
)

// loadTokenizer builds (once) the tokenizer of a GGUF file.
func loadTokenizer(t testing.TB, path string) *Tokenizer {
	t.Helper()
	if tk, ok := tokenizerCache.Load(path); ok {
		return tk.(*Tokenizer)
	}
	tk := newTokenizer(t, loadVocab(t, path))
	tokenizerCache.Store(path, tk)
	return tk
}

func loadVocab(t testing.TB, path string) Vocab {
	t.Helper()
	if v, ok := vocabCache.Load(path); ok {
		return v.(Vocab)
	}
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	v, err := VocabFromGGUF(f)
	if err != nil {
		t.Fatal(err)
	}
	vocabCache.Store(path, v)
	return v
}

func newTokenizer(t testing.TB, v Vocab) *Tokenizer {
	t.Helper()
	tk, err := New(v)
	if err != nil {
		t.Fatal(err)
	}
	return tk
}

func TestOracleStrings(t *testing.T) {
	o, dir := loadOracle(t)
	for name, want := range o.Tokenizers {
		t.Run(name, func(t *testing.T) {
			file, _, _ := strings.Cut(o.Files[name], " ")
			tk := loadTokenizer(t, filepath.Join(dir, file))
			if len(want) != len(o.Strings) {
				t.Fatalf("%d id lists for %d strings", len(want), len(o.Strings))
			}
			pass := 0
			for i, s := range o.Strings {
				got, err := tk.Encode(s, EncodeOptions{ParseSpecial: true})
				if err != nil {
					t.Errorf("string %d %q: %v", i, s, err)
					continue
				}
				if !slices.Equal(got, want[i]) {
					t.Errorf("string %d %q:\n got %v\nwant %v", i, s, got, want[i])
					continue
				}
				pass++
				wantText := s
				if tk.vocab.NFC {
					wantText = norm.NFC.String(s)
				}
				if back := tk.Decode(got); back != wantText {
					t.Errorf("string %d: Decode(Encode(%q)) = %q", i, s, back)
				}
			}
			t.Logf("%s: %d/%d strings give the reference ids", name, pass, len(o.Strings))
		})
	}
}

// TestOracleNFCOnly shows which reference strings need NFC: with the
// normalizer switched off, the ids may differ only for strings that NFC
// changes.
func TestOracleNFCOnly(t *testing.T) {
	o, dir := loadOracle(t)
	for _, name := range []string{"qwen3", "factory"} {
		file, _, _ := strings.Cut(o.Files[name], " ")
		v := loadVocab(t, filepath.Join(dir, file))
		if !v.NFC {
			t.Fatalf("%s: NFC is off; its reference applies NFC", name)
		}
		v.NFC = false
		tk := newTokenizer(t, v)
		var differ []int
		for i, s := range o.Strings {
			got, err := tk.Encode(s, EncodeOptions{ParseSpecial: true})
			if err != nil {
				t.Fatal(err)
			}
			if slices.Equal(got, o.Tokenizers[name][i]) {
				continue
			}
			differ = append(differ, i)
			if norm.NFC.IsNormalString(s) {
				t.Errorf("%s: string %d %q is NFC already but differs without NFC", name, i, s)
			}
		}
		if len(differ) == 0 {
			t.Errorf("%s: no string depends on NFC; the oracle says string 26 does", name)
		}
		t.Logf("%s: strings whose ids differ only because of NFC: %v", name, differ)
	}
}
