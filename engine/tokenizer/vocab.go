package tokenizer

// TokenType is a token's kind as GGUF stores it in tokenizer.ggml.token_type
// (llama.cpp's numbering).
type TokenType int32

const (
	TypeNormal      TokenType = 1
	TypeUnknown     TokenType = 2
	TypeControl     TokenType = 3 // <|im_start|>, <s>: matched only when parsing special tokens
	TypeUserDefined TokenType = 4 // added tokens such as <think>: likewise
	TypeUnused      TokenType = 5
	TypeByte        TokenType = 6 // SentencePiece byte fallback <0xNN>
)

// NoToken marks an absent special token id in a Vocab.
const NoToken int32 = -1

// Model names, as in tokenizer.ggml.model.
const (
	ModelBPE = "gpt2"  // byte-level BPE with merges
	ModelSPM = "llama" // SentencePiece with scores
)

// Vocab is everything a Tokenizer is built from: the fields of a GGUF's
// tokenizer.ggml.* metadata as plain values.
type Vocab struct {
	Model  string      // ModelBPE or ModelSPM
	Pre    string      // BPE pre-tokenizer name (tokenizer.ggml.pre): "qwen2", "llama-bpe", ...
	Tokens []string    // id -> text (BPE: byte-level encoded; SPM: with ▁ for spaces)
	Types  []TokenType // id -> type; nil means all TypeNormal
	Scores []float32   // SPM: id -> piece score; unused for BPE
	Merges []string    // BPE: "left right" pairs, best (lowest rank) first

	// Special token ids; NoToken where the vocabulary has none.
	BOS, EOS, EOT, EOM, PAD, UNK int32

	AddBOS, AddEOS bool // add BOS / EOS when EncodeOptions.AddSpecial is set
	AddSpacePrefix bool // SPM: text after the start or a special token gets a leading space
	NFC            bool // normalize text to Unicode NFC before splitting (Qwen's tokenizers do)
}

// typeOf returns a token's type; tokens without one (no Types, or the
// undefined type 0) are normal.
func (v *Vocab) typeOf(id int32) TokenType {
	if len(v.Types) == 0 || v.Types[id] == 0 {
		return TypeNormal
	}
	return v.Types[id]
}
