package tokenizer

import (
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/tandem-run/tandem/kernels/sharedtest"
)

// allVocabs loads every reference vocabulary: the three of the oracle and
// the four of the vector files.
func allVocabs(t testing.TB) map[string]*Tokenizer {
	t.Helper()
	o, dir := loadOracle(t)
	out := map[string]*Tokenizer{}
	for name, file := range o.Files {
		file, _, _ = strings.Cut(file, " ")
		out[name] = loadTokenizer(t, filepath.Join(dir, file))
	}
	vecs, _ := filepath.Glob(sharedtest.Path(t, "testdata", "vocab", "ggml-vocab-*.gguf"))
	for _, path := range vecs {
		out[filepath.Base(path)] = loadTokenizer(t, path)
	}
	return out
}

// TestStreamDecoder feeds tokens one at a time: every piece must be valid
// UTF-8 and the pieces must add up to Decode, which must give the text back.
func TestStreamDecoder(t *testing.T) {
	o, _ := loadOracle(t)
	for name, tk := range allVocabs(t) {
		for i, s := range o.Strings {
			if tk.vocab.NFC {
				continue // NFC changes the text; covered by TestOracleStrings
			}
			ids, err := tk.Encode(s, EncodeOptions{ParseSpecial: true})
			if err != nil {
				t.Fatal(err)
			}
			d := tk.NewStreamDecoder()
			var sb strings.Builder
			for _, id := range ids {
				piece := d.Add(id)
				if !utf8.ValidString(piece) {
					t.Fatalf("%s string %d: Add(%d) returned invalid UTF-8 %q", name, i, id, piece)
				}
				sb.WriteString(piece)
			}
			sb.WriteString(d.Flush())
			if got := sb.String(); got != s {
				t.Errorf("%s string %d: streamed %q, want %q", name, i, got, s)
			}
		}
	}
}

// TestStreamDecoderRandomIDs decodes random token sequences: the stream must
// stay valid UTF-8 and agree with Decode whatever the ids.
func TestStreamDecoderRandomIDs(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for name, tk := range allVocabs(t) {
		for range 200 {
			ids := make([]int32, 1+rng.IntN(12))
			for i := range ids {
				ids[i] = int32(rng.IntN(tk.VocabSize()+2)) - 1 // includes -1 and VocabSize
			}
			d := tk.NewStreamDecoder()
			var sb strings.Builder
			for _, id := range ids {
				piece := d.Add(id)
				if !utf8.ValidString(piece) {
					t.Fatalf("%s %v: invalid UTF-8 %q", name, ids, piece)
				}
				sb.WriteString(piece)
			}
			sb.WriteString(d.Flush())
			if whole := tk.Decode(ids); sb.String() != whole || !utf8.ValidString(whole) {
				t.Fatalf("%s %v: streamed %q, Decode %q", name, ids, sb.String(), whole)
			}
		}
	}
}

// TestStreamDecoderHoldsSplitRunes uses a vocabulary of single bytes, so a
// multi-byte rune arrives over several tokens.
func TestStreamDecoderHoldsSplitRunes(t *testing.T) {
	v := Vocab{Model: ModelBPE, Pre: "gpt-2", BOS: NoToken, EOS: NoToken, EOT: NoToken, EOM: NoToken, PAD: NoToken, UNK: NoToken}
	bl := newByteLevel()
	for b := range 256 {
		v.Tokens = append(v.Tokens, string(bl.toRune[b]))
	}
	tk := newTokenizer(t, v)
	text := "é中🦙"
	ids, err := tk.Encode(text, EncodeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(ids) != len(text) {
		t.Fatalf("%d ids for %d bytes", len(ids), len(text))
	}
	d := tk.NewStreamDecoder()
	var got []string
	for _, id := range ids {
		if p := d.Add(id); p != "" {
			got = append(got, p)
		}
	}
	if want := []string{"é", "中", "🦙"}; strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("pieces %q, want %q", got, want)
	}
	// Stray bytes come out as U+FFFD, never raw: at once when they cannot
	// start a rune, at Flush when they start one that never completes.
	for _, c := range []struct {
		id         int32
		want, name string
	}{
		{ids[len(ids)-1], "\uFFFD", "the last byte of 🦙"},
		{ids[1], "\uFFFD", "é's continuation byte"},
		{ids[2], "", "the first byte of 中"},
	} {
		if out := d.Add(c.id); out != c.want {
			t.Errorf("Add(%s) = %q, want %q", c.name, out, c.want)
		}
	}
	if out := d.Flush(); out != "\uFFFD" {
		t.Errorf("Flush = %q, want U+FFFD", out)
	}
}
