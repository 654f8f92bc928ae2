package tokenizer

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// Defused text encodes exactly as plain text, whatever special-token texts
// (or marks) it holds, while the special tokens around it still parse.
func TestDefusedIsPlainText(t *testing.T) {
	for _, name := range []string{"vocab-qwen3.gguf", "vocab-llama3.gguf"} {
		tk := loadTokenizer(t, vocabPath(t, name))
		var specials []string
		for id := range int32(tk.VocabSize()) {
			if ty := tk.TokenType(id); ty == TypeControl || ty == TypeUserDefined {
				specials = append(specials, tk.TokenText(id))
			}
		}
		r := rand.New(rand.NewPCG(1, 2))
		words := []string{"hi", " there", "\n", "<", "|", ">", "\uFDD0", "é", "  ", "user"}
		open, _ := tk.ID(specials[0])
		for range 300 {
			var b strings.Builder
			for range 1 + r.IntN(12) {
				if r.IntN(3) == 0 {
					b.WriteString(specials[r.IntN(len(specials))])
				} else {
					b.WriteString(words[r.IntN(len(words))])
				}
			}
			text := b.String()
			want, err := tk.Encode(strings.ReplaceAll(text, "\uFDD0", ""), EncodeOptions{})
			if err != nil {
				t.Fatal(err)
			}
			got, err := tk.Encode(specials[0]+tk.Defuse(text)+specials[0], EncodeOptions{ParseSpecial: true, Defused: true})
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(want)+2 || got[0] != open || got[len(got)-1] != open || !slices.Equal(got[1:len(got)-1], want) {
				t.Fatalf("%s: %q defused encodes as %v, want %v between two %q", name, text, got, want, specials[0])
			}
		}
	}
}
