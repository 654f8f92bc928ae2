package spec

import (
	"errors"
	"fmt"
	"strings"

	"github.com/tandem-run/tandem/engine/gguf"
)

// ErrIncompatible is wrapped by every reason a draft cannot serve a target.
var ErrIncompatible = errors.New("draft is incompatible with the target")

// MaxVocabDifference is how many more (or fewer) tokens a draft's vocabulary
// may have than its target's. Converted models often pad the vocabulary
// with unused ids; beyond a small padding the two are different tokenizers.
// Every id the two share must spell the same token.
const MaxVocabDifference = 128

// DraftKind says how a draft produces tokens.
type DraftKind string

const (
	// DraftModel is a small language model of its own: embedding, blocks, head.
	DraftModel DraftKind = "model"
	// DraftEagle3 is an EAGLE-3 head: it reads the target's hidden states and
	// borrows the target's token embedding and output head.
	DraftEagle3 DraftKind = "eagle3"
	// DraftDFlash is a DFlash block draft: it reads the target's hidden
	// states, borrows what it lacks of the target's embedding and head, and
	// proposes a block of tokens in one pass.
	DraftDFlash DraftKind = "dflash"
)

// KindOf tells what kind of draft f is.
func KindOf(f *gguf.File) DraftKind {
	switch f.Arch() {
	case "eagle3":
		return DraftEagle3
	case "dflash":
		return DraftDFlash
	}
	return DraftModel
}

// Compatible checks, from the two headers alone, that draft can propose
// tokens for target: the same tokenizer, and for a head-sharing draft, a
// target that provides what it borrows. The error names every difference
// found, in words a user can act on.
func Compatible(target, draft *gguf.File) (DraftKind, error) {
	kind := KindOf(draft)
	var problems []string
	problems = append(problems, vocabProblems(target, draft)...)
	if kind == DraftEagle3 {
		problems = append(problems, eagle3Problems(target, draft)...)
	}
	if kind == DraftDFlash {
		problems = append(problems, dflashProblems(target, draft)...)
	}
	if len(problems) > 0 {
		return kind, fmt.Errorf("spec: %w: %s", ErrIncompatible, strings.Join(problems, "; "))
	}
	return kind, nil
}

func vocabProblems(target, draft *gguf.File) []string {
	var out []string
	tk, _ := target.String("tokenizer.ggml.model")
	dk, _ := draft.String("tokenizer.ggml.model")
	if tk != dk {
		out = append(out, fmt.Sprintf("draft tokenizer %q, target %q", dk, tk))
	}
	tt, _ := target.Strings("tokenizer.ggml.tokens")
	dt, _ := draft.Strings("tokenizer.ggml.tokens")
	if len(tt) == 0 || len(dt) == 0 {
		return append(out, "a vocabulary is missing (tokenizer.ggml.tokens)")
	}
	// Tokens past the draft's range that the target marks UNUSED are
	// padding (conversions pad Qwen's 151,643 tokens to the head's 151,936
	// rows): the draft never proposes them, and they are not a different
	// tokenizer. A draft's own extra tokens count in full, padding or not:
	// one it proposed would be an id the target cannot take.
	extra := len(dt) - len(tt)
	if extra < 0 {
		extra = -livePast(target, len(tt), len(dt))
	}
	if extra > MaxVocabDifference || -extra > MaxVocabDifference {
		out = append(out, fmt.Sprintf("draft vocabulary %d tokens, target %d", len(dt), len(tt)))
	}
	for i := range min(len(tt), len(dt)) {
		if tt[i] != dt[i] {
			out = append(out, fmt.Sprintf("token %d is %q in the draft but %q in the target", i, dt[i], tt[i]))
			break
		}
	}
	for _, key := range []string{"bos", "eos", "eot"} {
		full := "tokenizer.ggml." + key + "_token_id"
		a, aok := target.Uint(full)
		b, bok := draft.Uint(full)
		if aok != bok || a != b {
			out = append(out, fmt.Sprintf("%s token: draft %s, target %s", strings.ToUpper(key), idOrNone(b, bok), idOrNone(a, aok)))
		}
	}
	return out
}

// TokenTypeUnused is the GGUF token type of ids no tokenizer produces
// (a converted vocabulary's padding).
const TokenTypeUnused = 5

// livePast counts f's tokens at ids [from, n) that are not UNUSED; without
// token types, all of them.
func livePast(f *gguf.File, n, from int) int {
	types, ok := f.Int32s("tokenizer.ggml.token_type")
	if !ok || len(types) != n {
		return n - from
	}
	live := 0
	for _, t := range types[from:] {
		if t != TokenTypeUnused {
			live++
		}
	}
	return live
}

func eagle3Problems(target, draft *gguf.File) []string {
	var out []string
	width, _ := target.ArchUint("embedding_length")
	if h, ok := draft.ArchUint("target_hidden_size"); !ok || h != width {
		out = append(out, fmt.Sprintf("the EAGLE-3 draft reads hidden states of width %d, the target's are %d", h, width))
	}
	blocks, _ := target.ArchUint("block_count")
	layers, ok := draft.Int32s("eagle3.target_layers")
	if !ok || len(layers) == 0 {
		out = append(out, "the EAGLE-3 draft lists no target layers (eagle3.target_layers)")
	}
	for _, l := range layers {
		if l < 0 || uint64(l) >= blocks {
			out = append(out, fmt.Sprintf("the EAGLE-3 draft reads target block %d, the target has %d blocks", l, blocks))
		}
	}
	if _, own := draft.Tensor("token_embd.weight"); !own {
		if _, ok := target.Tensor("token_embd.weight"); !ok {
			out = append(out, "the EAGLE-3 draft borrows the token embedding, the target has none")
		}
	}
	return out
}

func idOrNone(id uint64, ok bool) string {
	if !ok {
		return "none"
	}
	return fmt.Sprint(id)
}

func dflashProblems(target, draft *gguf.File) []string {
	var out []string
	width, _ := target.ArchUint("embedding_length")
	if w, _ := draft.ArchUint("embedding_length"); w != width {
		out = append(out, fmt.Sprintf("the DFlash draft is %d wide and reads hidden states of that width, the target's are %d", w, width))
	}
	blocks, _ := target.ArchUint("block_count")
	layers, ok := draft.Int32s("dflash.target_layers")
	if !ok || len(layers) == 0 {
		out = append(out, "the DFlash draft lists no target layers (dflash.target_layers)")
	}
	for _, l := range layers {
		if l < 0 || uint64(l) >= blocks {
			out = append(out, fmt.Sprintf("the DFlash draft reads target block %d, the target has %d blocks", l, blocks))
		}
	}
	if _, own := draft.Tensor("token_embd.weight"); !own {
		if _, ok := target.Tensor("token_embd.weight"); !ok {
			out = append(out, "the DFlash draft borrows the token embedding, the target has none")
		}
	}
	return out
}
