package tokenizer

import (
	"testing"
)

// The pieces of a text's tokens, end to end, are the text's bytes, also
// where a token holds part of a character; control tokens have none.
func TestPieceBytes(t *testing.T) {
	texts := []string{"Hello, world!", " café 中文 emoji 🦙\n\ttabs", "{\"a\": [1, 2.5e-3]}"}
	for _, name := range []string{"vocab-qwen3.gguf", "vocab-llama3.gguf", "ggml-vocab-llama-spm.gguf"} {
		tk := loadTokenizer(t, vocabPath(t, name))
		for _, text := range texts {
			ids, err := tk.Encode(text, EncodeOptions{})
			if err != nil {
				t.Fatal(err)
			}
			var got []byte
			for _, id := range ids {
				b, ok := tk.PieceBytes(id)
				if !ok {
					t.Fatalf("%s: token %d of %q has no piece", name, id, text)
				}
				got = append(got, b...)
			}
			want := text
			if tk.spm != nil && tk.vocab.AddSpacePrefix {
				want = " " + text // the prefix space Decode strips after the start
			}
			if string(got) != want {
				t.Errorf("%s: pieces %q, text %q", name, got, want)
			}
		}
		if eos, ok := tk.EOS(); ok && tk.TokenType(eos) == TypeControl {
			if b, ok := tk.PieceBytes(eos); ok {
				t.Errorf("%s: control token %d has piece %q", name, eos, b)
			}
		}
		if _, ok := tk.PieceBytes(int32(tk.VocabSize())); ok {
			t.Errorf("%s: an id out of range has a piece", name)
		}
	}
}
