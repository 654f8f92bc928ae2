package tokenizer

import (
	"fmt"

	"github.com/dlclark/regexp2/v2"
)

// The pre-tokenizer patterns, as the reference tokenizers spell them.
const (
	patGPT2   = `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`
	patLlama3 = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	patQwen2  = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`

	patPunct      = "[\\p{P}\\$\\+<=>\\^~\\|`]+"
	patDigit      = `\p{N}`
	patDigits     = `\p{N}+`
	patDigits3    = `[0-9][0-9][0-9]`
	patNewline    = `[\r\n]`
	patCJK        = `[一-龥ࠀ-一가-퟿]+`
	patDeepseekL  = `\s?[A-Za-zµÀ-ÖØ-öø-ƺƼ-ƿǄ-ʓʕ-ʯͰ-ͳͶͷͻ-ͽͿΆΈ-ΊΌΎ-ΡΣ-ϵϷ-ҁҊ-ԯԱ-ՖႠ-ჅᎠ-Ᏽᏸ-ᏽᲐ-ᲺᲽ-Ჿᴀ-ᴫᵫ-ᵷᵹ-ᶚḀ-ἕἘ-Ἕἠ-ὅὈ-Ὅὐ-ὗὙὛὝὟ-ώᾀ-ᾴᾶ-ᾼιῂ-ῄῆ-ῌῐ-ΐῖ-Ίῠ-Ῥῲ-ῴῶ-ῼℂℇℊ-ℓℕℙ-ℝℤΩℨK-ℭℯ-ℴℹℼ-ℿⅅ-ⅉⅎↃↄⰀ-ⱻⱾ-ⳤⳫ-ⳮⳲⳳꙀ-ꙭꚀ-ꚛꜢ-ꝯꝱ-ꞇꞋ-ꞎꭰ-ꮿﬀ-ﬆﬓ-ﬗＡ-Ｚａ-ｚ𐐀-𐑏𐒰-𐓓𐓘-𐓻𐲀-𐲲𐳀-𐳲𑢠-𑣟𞤀-𞥃]+`
	patDeepseekP  = `\s?[!-/:-~！-／：-～‘-‟　-。]+`
	patTrailSpace = `\s+$`
	patLetters    = `\s?\p{L}+`
	patPuncts     = `\s?\p{P}+`
)

// prePatterns lists, for a tokenizer.ggml.pre name, the patterns that split
// text before BPE: each pattern splits every piece the previous one made,
// keeping both the matches and the text between them as pieces (the
// reference's "isolated" splitting). The lists follow llama.cpp's, which are
// checked against the Hugging Face tokenizers on the same vector files.
func prePatterns(pre string) ([]string, bool) {
	switch pre {
	case "default", "":
		return []string{patPunct, patGPT2, patDigits, patDigits3}, true
	case "llama-bpe", "llama3", "llama-v3", "smaug-bpe", "dbrx":
		return []string{patLlama3}, true
	case "qwen2", "deepseek-r1-qwen":
		return []string{patQwen2}, true
	case "gpt-2", "mpt", "olmo", "phi-2", "jais", "roberta-bpe":
		return []string{patGPT2}, true
	case "starcoder", "refact", "command-r", "smollm", "codeshell":
		return []string{patDigit, patGPT2}, true
	case "falcon":
		return []string{patPunct, patGPT2, patDigits3}, true
	case "deepseek-llm":
		return []string{patNewline, patDeepseekL, patDeepseekP, patTrailSpace, patCJK, patDigits}, true
	case "deepseek-coder":
		return []string{patNewline, patLetters, patPuncts, patCJK, patDigit}, true
	}
	return nil, false
}

// usesNFC reports whether the reference tokenizer for a pre-tokenizer
// normalizes its input to NFC (Qwen's do; the others have no normalizer).
func usesNFC(pre string) bool { return pre == "qwen2" || pre == "deepseek-r1-qwen" }

// A stage splits s into consecutive pieces, calling emit for each in order;
// the pieces concatenate back to s.
type stage func(s string, emit func(piece string)) error

// preTokenizer runs its stages one after the other.
type preTokenizer struct{ stages []stage }

func newPreTokenizer(pre string) (*preTokenizer, error) {
	pats, ok := prePatterns(pre)
	if !ok {
		return nil, fmt.Errorf("tokenizer: unknown pre-tokenizer %q", pre)
	}
	p := &preTokenizer{}
	for _, pat := range pats {
		st := scannerStage(pat)
		if st == nil {
			var err error
			if st, err = regexStage(pat); err != nil {
				return nil, err
			}
		}
		p.stages = append(p.stages, st)
	}
	return p, nil
}

func (p *preTokenizer) split(s string, emit func(piece string)) error {
	return p.run(0, s, emit)
}

func (p *preTokenizer) run(k int, s string, emit func(string)) error {
	if k == len(p.stages)-1 {
		return p.stages[k](s, emit)
	}
	var err error
	serr := p.stages[k](s, func(piece string) {
		if err == nil {
			err = p.run(k+1, piece, emit)
		}
	})
	if serr != nil {
		return serr
	}
	return err
}

// regexStage splits with a regular expression: every match is a piece and so
// is every run of text between matches.
func regexStage(pattern string) (stage, error) {
	re, err := regexp2.Compile(pattern)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: pre-tokenizer pattern %q: %w", pattern, err)
	}
	return func(s string, emit func(string)) error {
		locs, err := re.FindAllStringIndex(s, -1)
		if err != nil {
			return fmt.Errorf("tokenizer: pre-tokenizer: %w", err)
		}
		prev := 0
		for _, loc := range locs {
			if loc[0] > prev {
				emit(s[prev:loc[0]])
			}
			if loc[1] > loc[0] {
				emit(s[loc[0]:loc[1]])
			}
			prev = loc[1]
		}
		if prev < len(s) {
			emit(s[prev:])
		}
		return nil
	}, nil
}
