package tokenizer

import (
	"errors"
	"fmt"
	"strings"

	"golang.org/x/text/unicode/norm"
)

// ErrVocab marks a vocabulary that cannot be used (missing or inconsistent
// fields); errors from New and FromGGUF wrap it.
var ErrVocab = errors.New("invalid vocabulary")

// EncodeOptions says how Encode treats special tokens.
type EncodeOptions struct {
	// ParseSpecial matches the text of control and user-defined tokens
	// (<|im_start|>, <think>) as those tokens; off, they are plain text.
	// Chat prompts set it; user-typed text should not.
	ParseSpecial bool
	// AddSpecial adds BOS and EOS where the vocabulary asks for them.
	AddSpecial bool
	// Defused says text holds pieces passed through Defuse: the marks
	// Defuse put into special-token texts keep them from matching, and are
	// removed from the text between special tokens before it is encoded.
	Defused bool
}

// Tokenizer encodes text to token ids and decodes ids to text. It is
// immutable and safe for concurrent use.
type Tokenizer struct {
	vocab    Vocab
	ids      map[string]int32 // token text -> id
	eog      map[int32]bool
	specials *specials
	bytes    *byteLevel    // BPE only
	pre      *preTokenizer // BPE only
	bpe      *bpe          // BPE only
	spm      *spm          // SPM only
}

// isEOGText reports whether a token's text marks an end of generation
// whatever the metadata says, as llama.cpp decides: chat-turn ends and
// end-of-text markers.
func isEOGText(s string) bool {
	switch s {
	case "<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<end_of_turn>",
		"<|endoftext|>", "<|eom_id|>", "<EOT>", "_<EOT>", "<|end_of_text|>", "<end_of_utterance>":
		return true
	}
	return false
}

// New builds a Tokenizer from a vocabulary. The Tokenizer keeps the slices
// of v; the caller must not change them afterwards.
func New(v Vocab) (*Tokenizer, error) {
	n := len(v.Tokens)
	switch {
	case n == 0:
		return nil, fmt.Errorf("tokenizer: no tokens: %w", ErrVocab)
	case n > 1<<30:
		return nil, fmt.Errorf("tokenizer: %d tokens: %w", n, ErrVocab)
	case len(v.Types) != 0 && len(v.Types) != n:
		return nil, fmt.Errorf("tokenizer: %d token types for %d tokens: %w", len(v.Types), n, ErrVocab)
	case len(v.Scores) != 0 && len(v.Scores) != n:
		return nil, fmt.Errorf("tokenizer: %d scores for %d tokens: %w", len(v.Scores), n, ErrVocab)
	}
	for _, sp := range []struct {
		name string
		id   int32
	}{{"BOS", v.BOS}, {"EOS", v.EOS}, {"EOT", v.EOT}, {"EOM", v.EOM}, {"PAD", v.PAD}, {"UNK", v.UNK}} {
		if sp.id != NoToken && (sp.id < 0 || int(sp.id) >= n) {
			return nil, fmt.Errorf("tokenizer: %s id %d outside the %d tokens: %w", sp.name, sp.id, n, ErrVocab)
		}
	}
	if v.AddBOS && v.BOS == NoToken {
		v.AddBOS = false
	}
	if v.AddEOS && v.EOS == NoToken {
		v.AddEOS = false
	}

	t := &Tokenizer{vocab: v, ids: make(map[string]int32, n), eog: map[int32]bool{}}
	for id, tok := range v.Tokens {
		t.ids[tok] = int32(id)
		if isEOGText(tok) {
			t.eog[int32(id)] = true
		}
	}
	for _, id := range []int32{v.EOS, v.EOT, v.EOM} {
		if id != NoToken {
			t.eog[id] = true
		}
	}
	t.specials = newSpecials(&t.vocab)

	var err error
	switch v.Model {
	case ModelBPE:
		t.bytes = newByteLevel()
		if t.pre, err = newPreTokenizer(v.Pre); err != nil {
			return nil, fmt.Errorf("%w: %w", err, ErrVocab)
		}
		if t.bpe, err = newBPE(&t.vocab, t.ids, t.bytes); err != nil {
			return nil, fmt.Errorf("%w: %w", err, ErrVocab)
		}
	case ModelSPM:
		if t.spm, err = newSPM(&t.vocab, t.ids); err != nil {
			return nil, fmt.Errorf("%w: %w", err, ErrVocab)
		}
	default:
		return nil, fmt.Errorf("tokenizer: model %q is not supported (want %q or %q): %w", v.Model, ModelBPE, ModelSPM, ErrVocab)
	}
	return t, nil
}

// VocabSize is the number of tokens.
func (t *Tokenizer) VocabSize() int { return len(t.vocab.Tokens) }

// Kind is the tokenizer model: "gpt2" (byte-level BPE) or "llama" (SentencePiece).
func (t *Tokenizer) Kind() string { return t.vocab.Model }

// Pre is the BPE pre-tokenizer name ("qwen2", "llama-bpe", ...).
func (t *Tokenizer) Pre() string { return t.vocab.Pre }

// AddBOS reports whether Encode with AddSpecial puts BOS first.
func (t *Tokenizer) AddBOS() bool { return t.vocab.AddBOS }

// BOS returns the beginning-of-sequence token, if the vocabulary has one.
func (t *Tokenizer) BOS() (int32, bool) { return t.vocab.BOS, t.vocab.BOS != NoToken }

// EOS returns the end-of-sequence token, if the vocabulary has one.
func (t *Tokenizer) EOS() (int32, bool) { return t.vocab.EOS, t.vocab.EOS != NoToken }

// IsEOG reports whether id ends generation: EOS, EOT, EOM, and tokens such as
// <|im_end|>, <|eot_id|> and <|endoftext|> (llama.cpp's list).
func (t *Tokenizer) IsEOG(id int32) bool { return t.eog[id] }

// TokenText is the vocabulary's text for id as stored (byte-level or ▁
// spelling for normal tokens), or "" for an id out of range.
func (t *Tokenizer) TokenText(id int32) string {
	if id < 0 || int(id) >= len(t.vocab.Tokens) {
		return ""
	}
	return t.vocab.Tokens[id]
}

// TokenType is the type of id (TypeNormal for ids out of range).
func (t *Tokenizer) TokenType(id int32) TokenType {
	if id < 0 || int(id) >= len(t.vocab.Tokens) {
		return TypeNormal
	}
	return t.vocab.typeOf(id)
}

// ID returns the token whose text is exactly s.
func (t *Tokenizer) ID(s string) (int32, bool) {
	id, ok := t.ids[s]
	return id, ok
}

// Encode returns the tokens of text.
func (t *Tokenizer) Encode(text string, opts EncodeOptions) ([]int32, error) {
	ids := make([]int32, 0, len(text)/4+2)
	if opts.AddSpecial && t.vocab.AddBOS {
		ids = append(ids, t.vocab.BOS)
	}
	e := encoder{t: t, ids: ids, afterSpecial: true}
	onText := e.text
	if opts.Defused {
		onText = func(s string) error {
			if s = strings.ReplaceAll(s, defuseMark, ""); s == "" {
				return nil
			}
			return e.text(s)
		}
	}
	var err error
	if opts.ParseSpecial {
		err = t.specials.split(text, onText, e.special)
	} else if text != "" {
		err = onText(text)
	}
	if err != nil {
		return nil, err
	}
	if opts.AddSpecial && t.vocab.AddEOS {
		e.ids = append(e.ids, t.vocab.EOS)
	}
	return e.ids, nil
}

// encoder carries one Encode call's output and scratch space.
type encoder struct {
	t            *Tokenizer
	ids          []int32
	afterSpecial bool // at the start or after a special token
	scratch      bpeScratch
}

func (e *encoder) special(id int32) error {
	e.ids = append(e.ids, id)
	e.afterSpecial = true
	return nil
}

func (e *encoder) text(s string) error {
	t := e.t
	if t.vocab.NFC {
		s = norm.NFC.String(s)
	}
	var err error
	if t.spm != nil {
		if t.vocab.AddSpacePrefix && e.afterSpecial {
			s = " " + s
		}
		e.ids, err = t.spm.encode(e.ids, s)
	} else {
		err = t.pre.split(s, func(piece string) {
			e.ids = t.bpe.encode(e.ids, piece, &e.scratch)
		})
	}
	e.afterSpecial = false
	return err
}
