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
	patCJK        = "[\u4E00-\u9FA5\u0800-\u4E00\uAC00-\uD7FF]+"
	patDeepseekP  = "\\s?[!-/:-~\uFF01-\uFF0F\uFF1A-\uFF5E\u2018-\u201F\u3000-\u3002]+"
	patTrailSpace = `\s+$`
	patLetters    = `\s?\p{L}+`
	patPuncts     = `\s?\p{P}+`

	// DeepSeek LLM's letter class is the cased letters (Lu, Ll, Lt), spelled
	// with escapes: several range ends are compatibility characters that an
	// NFC-normalizing editor would silently change.
	patDeepseekL = "\\s?[A-Za-z\u00B5\u00C0-\u00D6\u00D8-\u00F6\u00F8-\u01BA\u01BC-\u01BF\u01C4-\u0293\u0295-\u02AF\u0370-\u0373\u0376-\u0377\u037B-\u037D\u037F\u0386\u0388-\u038A\u038C\u038E-\u03A1\u03A3-\u03F5\u03F7-\u0481\u048A-\u052F\u0531-\u0556\u10A0-\u10C5\u13A0-\u13F5\u13F8-\u13FD\u1C90-\u1CBA\u1CBD-\u1CBF\u1D00-\u1D2B\u1D6B-\u1D77\u1D79-\u1D9A\u1E00-\u1F15\u1F18-\u1F1D\u1F20-\u1F45\u1F48-\u1F4D\u1F50-\u1F57\u1F59\u1F5B\u1F5D\u1F5F-\u1F7D\u1F80-\u1FB4\u1FB6-\u1FBC\u1FBE\u1FC2-\u1FC4\u1FC6-\u1FCC\u1FD0-\u1FD3\u1FD6-\u1FDB\u1FE0-\u1FEC\u1FF2-\u1FF4\u1FF6-\u1FFC\u2102\u2107\u210A-\u2113\u2115\u2119-\u211D\u2124\u2126\u2128\u212A-\u212D\u212F-\u2134\u2139\u213C-\u213F\u2145-\u2149\u214E\u2183-\u2184\u2C00-\u2C7B\u2C7E-\u2CE4\u2CEB-\u2CEE\u2CF2-\u2CF3\uA640-\uA66D\uA680-\uA69B\uA722-\uA76F\uA771-\uA787\uA78B-\uA78E\uAB70-\uABBF\uFB00-\uFB06\uFB13-\uFB17\uFF21-\uFF3A\uFF41-\uFF5A\U00010400-\U0001044F\U000104B0-\U000104D3\U000104D8-\U000104FB\U00010C80-\U00010CB2\U00010CC0-\U00010CF2\U000118A0-\U000118DF\U0001E900-\U0001E943]+"
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
