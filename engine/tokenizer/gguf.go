package tokenizer

import (
	"fmt"

	"github.com/tandem-run/tandem/engine/gguf"
)

// MaxVocab bounds the tokens a file may declare: far past any released
// vocabulary (~2^18), small enough that the tables built from it stay small.
const MaxVocab = 1 << 22

// FromGGUF builds the Tokenizer described by a GGUF file's tokenizer.ggml.*
// metadata.
func FromGGUF(f *gguf.File) (*Tokenizer, error) {
	v, err := VocabFromGGUF(f)
	if err != nil {
		return nil, err
	}
	return New(v)
}

// VocabFromGGUF reads the vocabulary fields of a GGUF file, with llama.cpp's
// defaults for keys that are absent.
func VocabFromGGUF(f *gguf.File) (Vocab, error) {
	const p = "tokenizer.ggml."
	v := Vocab{BOS: NoToken, EOS: NoToken, EOT: NoToken, EOM: NoToken, PAD: NoToken, UNK: NoToken}
	var ok bool
	if v.Model, ok = f.String(p + "model"); !ok {
		return v, fmt.Errorf("tokenizer: %s: no %smodel: %w", f.Path, p, ErrVocab)
	}
	if v.Tokens, ok = f.Strings(p + "tokens"); !ok {
		return v, fmt.Errorf("tokenizer: %s: no %stokens: %w", f.Path, p, ErrVocab)
	}
	if len(v.Tokens) > MaxVocab {
		return v, fmt.Errorf("tokenizer: %s: %d tokens (at most %d): %w", f.Path, len(v.Tokens), MaxVocab, ErrVocab)
	}
	v.Pre, _ = f.String(p + "pre")
	if v.Pre == "" && v.Model == ModelBPE {
		v.Pre = "default"
	}
	if types, ok := f.Int32s(p + "token_type"); ok {
		v.Types = make([]TokenType, len(types))
		for i, t := range types {
			v.Types[i] = TokenType(t)
		}
	}
	v.Scores, _ = f.Float32s(p + "scores")
	v.Merges, _ = f.Strings(p + "merges")
	for key, dst := range map[string]*int32{
		"bos_token_id": &v.BOS, "eos_token_id": &v.EOS, "eot_token_id": &v.EOT,
		"eom_token_id": &v.EOM, "padding_token_id": &v.PAD, "unknown_token_id": &v.UNK,
	} {
		if id, ok := f.Int(p + key); ok {
			if id < 0 || id >= int64(len(v.Tokens)) {
				return v, fmt.Errorf("tokenizer: %s: %s%s = %d outside the %d tokens: %w", f.Path, p, key, id, len(v.Tokens), ErrVocab)
			}
			*dst = int32(id)
		}
	}
	spm := v.Model == ModelSPM
	v.AddBOS = boolOr(f, p+"add_bos_token", spm)
	v.AddEOS = boolOr(f, p+"add_eos_token", false)
	v.AddSpacePrefix = boolOr(f, p+"add_space_prefix", spm)
	v.NFC = v.Model == ModelBPE && usesNFC(v.Pre)
	return v, nil
}

func boolOr(f *gguf.File, key string, def bool) bool {
	if b, ok := f.Bool(key); ok {
		return b
	}
	return def
}
