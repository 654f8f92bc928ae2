package tokenizer

import (
	"errors"
	"math/rand/v2"
	"strings"
	"testing"

	"golang.org/x/text/unicode/norm"

	"github.com/tandem-run/tandem/kernels/sharedtest"
)

// TestRoundTripRandomText: Decode inverts Encode on random text for every
// reference vocabulary (after NFC where the vocabulary applies it).
func TestRoundTripRandomText(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for name, tk := range allVocabs(t) {
		for range 300 {
			s := randomText(rng, 1+rng.IntN(30))
			for _, opts := range []EncodeOptions{{}, {ParseSpecial: true}} {
				ids, err := tk.Encode(s, opts)
				if err != nil {
					t.Fatalf("%s: Encode(%q): %v", name, s, err)
				}
				want := s
				if tk.vocab.NFC {
					want = norm.NFC.String(s)
				}
				if got := tk.Decode(ids); got != want && !dropsBytes(tk, s) {
					t.Fatalf("%s: Decode(Encode(%q)) = %q", name, s, got)
				}
			}
		}
	}
}

// dropsBytes reports whether s holds a byte the vocabulary cannot spell
// (Falcon's lacks a few control bytes), which no decoder can give back.
func dropsBytes(tk *Tokenizer, s string) bool {
	if tk.bpe == nil {
		return false
	}
	for i := 0; i < len(s); i++ {
		if tk.bpe.byteID[s[i]] == NoToken {
			return true
		}
	}
	return false
}

func FuzzEncode(f *testing.F) {
	for _, s := range []string{"", "Hello world", "<|im_start|>user\n", "\xff\xfe bad utf8 \xc3", "  \t\r\n", "é\u0301"} {
		f.Add(s)
	}
	tks := allVocabs(f)
	f.Fuzz(func(t *testing.T, s string) {
		for name, tk := range tks {
			ids, err := tk.Encode(s, EncodeOptions{ParseSpecial: true, AddSpecial: true})
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			for _, id := range ids {
				if id < 0 || int(id) >= tk.VocabSize() {
					t.Fatalf("%s: id %d out of range", name, id)
				}
			}
			tk.Decode(ids)
		}
	})
}

func TestSpecialTokens(t *testing.T) {
	tk := loadTokenizer(t, vocabPath(t, "vocab-llama3.gguf"))
	bos, ok := tk.BOS()
	if !ok || tk.TokenText(bos) != "<|begin_of_text|>" || !tk.AddBOS() {
		t.Errorf("BOS %d %q add %v", bos, tk.TokenText(bos), tk.AddBOS())
	}
	for _, text := range []string{"<|end_of_text|>", "<|eot_id|>"} {
		id, ok := tk.ID(text)
		if !ok || !tk.IsEOG(id) {
			t.Errorf("%s (%d) is not end-of-generation", text, id)
		}
	}
	if id, _ := tk.ID("<|start_header_id|>"); tk.IsEOG(id) {
		t.Errorf("<|start_header_id|> ends generation")
	}
	ids, err := tk.Encode("Hi", EncodeOptions{AddSpecial: true})
	if err != nil || len(ids) != 2 || ids[0] != bos {
		t.Errorf("AddSpecial: %v %v", ids, err)
	}
	// Leftmost, then longest: <|eot_id|> inside text splits it.
	ids, err = tk.Encode("a<|eot_id|>b", EncodeOptions{ParseSpecial: true})
	eot, _ := tk.ID("<|eot_id|>")
	if err != nil || len(ids) != 3 || ids[1] != eot {
		t.Errorf("a<|eot_id|>b: %v %v", ids, err)
	}
	if tk.Kind() != ModelBPE || tk.Pre() != "llama-bpe" || tk.VocabSize() != 128256 {
		t.Errorf("kind %q pre %q size %d", tk.Kind(), tk.Pre(), tk.VocabSize())
	}

	qwen := loadTokenizer(t, vocabPath(t, "vocab-qwen3.gguf"))
	for _, text := range []string{"<|im_end|>", "<|endoftext|>"} {
		if id, _ := qwen.ID(text); !qwen.IsEOG(id) {
			t.Errorf("qwen3: %s is not end-of-generation", text)
		}
	}
	if _, ok := qwen.BOS(); ok || qwen.AddBOS() {
		t.Errorf("qwen3 has no BOS")
	}
	think, _ := qwen.ID("<think>")
	if ids, _ := qwen.Encode("<think>", EncodeOptions{ParseSpecial: true}); len(ids) != 1 || ids[0] != think {
		t.Errorf("user-defined <think> parsed: %v", ids)
	}
	if ids, _ := qwen.Encode("<think>", EncodeOptions{}); len(ids) < 2 {
		t.Errorf("user-defined <think> as text: %v", ids)
	}
}

func vocabPath(t *testing.T, name string) string {
	return sharedtest.Path(t, "testdata", "vocab", name)
}

func TestBadVocabularies(t *testing.T) {
	base := func() Vocab {
		return Vocab{
			Model: ModelBPE, Pre: "gpt-2", Tokens: []string{"a", "b", "ab"}, Merges: []string{"a b"},
			BOS: NoToken, EOS: NoToken, EOT: NoToken, EOM: NoToken, PAD: NoToken, UNK: NoToken,
		}
	}
	for _, c := range []struct {
		name string
		edit func(*Vocab)
	}{
		{"no tokens", func(v *Vocab) { v.Tokens = nil }},
		{"types length", func(v *Vocab) { v.Types = []TokenType{TypeNormal} }},
		{"scores length", func(v *Vocab) { v.Scores = []float32{0, 1} }},
		{"EOS out of range", func(v *Vocab) { v.EOS = 3 }},
		{"negative BOS", func(v *Vocab) { v.BOS = -7 }},
		{"unknown model", func(v *Vocab) { v.Model = "wordpiece" }},
		{"unknown pre-tokenizer", func(v *Vocab) { v.Pre = "klingon" }},
		{"merge without space", func(v *Vocab) { v.Merges = []string{"ab"} }},
		{"merge of unknown tokens", func(v *Vocab) { v.Merges = []string{"a c"} }},
	} {
		v := base()
		c.edit(&v)
		if _, err := New(v); !errors.Is(err, ErrVocab) {
			t.Errorf("%s: New error %v, want ErrVocab", c.name, err)
		}
	}
	// The base vocabulary itself is fine, and a byte it lacks is dropped.
	tk, err := New(base())
	if err != nil {
		t.Fatal(err)
	}
	if ids, err := tk.Encode("ab c", EncodeOptions{}); err != nil || len(ids) != 1 || ids[0] != 2 {
		t.Errorf("Encode(ab c) = %v, %v; want [2] (no tokens for the space and c)", ids, err)
	}
}

func TestSentencePieceByteFallback(t *testing.T) {
	tk := loadTokenizer(t, vocabPath(t, "ggml-vocab-llama-spm.gguf"))
	// U+10FFFD (private use) is surely no piece: it falls back to 4 bytes.
	s := "x\U0010FFFD"
	ids, err := tk.Encode(s, EncodeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var bytesSeen int
	for _, id := range ids {
		if tk.TokenType(id) == TypeByte {
			bytesSeen++
		}
	}
	if bytesSeen != 4 || tk.Decode(ids) != s {
		t.Errorf("%q -> %v (%d byte tokens) -> %q", s, ids, bytesSeen, tk.Decode(ids))
	}
	if !strings.HasPrefix(tk.TokenText(ids[0]), "▁") {
		t.Errorf("first piece %q lacks the prefix space", tk.TokenText(ids[0]))
	}
}
