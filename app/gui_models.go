//go:build !headless

package app

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/dustin/go-humanize"

	"github.com/tandem-run/tandem/engine/gguf"
	"github.com/tandem-run/tandem/engine/spec"
	"github.com/tandem-run/tandem/widgets"
)

// modelInfo is a model card's content from a GGUF header.
func modelInfo(title string, f *gguf.File) widgets.ModelInfo {
	if f == nil {
		return widgets.ModelInfo{Title: title}
	}
	d := f.Describe()
	var types []string
	for i, tb := range d.TypeBytes {
		if i == 3 {
			types = append(types, "…")
			break
		}
		types = append(types, fmt.Sprintf("%s %s", tb.Type, humanize.IBytes(uint64(tb.Bytes))))
	}
	arch := d.Architecture
	if d.Name != "" {
		arch += " (" + d.Name + ")"
	}
	rows := [][2]string{
		{"architecture", arch},
		{"parameters", fmt.Sprintf("%s, %s, width %d", humanize.SIWithDigits(float64(d.Parameters), 1, ""), plural(d.Layers, "layer"), d.EmbeddingWidth)},
		{"types", strings.Join(types, ", ")},
		{"context", fmt.Sprintf("%d tokens", d.ContextLength)},
		{"tokenizer", fmt.Sprintf("%s, %d tokens", cmpOr(d.Tokenizer, "none"), d.VocabSize)},
		{"chat template", yesNo(d.ChatTemplate)},
	}
	return widgets.ModelInfo{Title: title, File: filepath.Base(d.Path) + " · " + humanize.IBytes(uint64(d.FileBytes)), Rows: rows}
}

// plural is "1 layer", "8 layers".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// roleProblem says in plain words why f cannot serve as role ("target" or
// "draft"); "" when it can as far as its header tells. A file that cannot
// be a target gets this on its card, rather than the errors planning or
// the draft check would give for it.
func roleProblem(role string, f *gguf.File) string {
	if f == nil {
		return ""
	}
	d := f.Describe()
	switch {
	case d.TensorCount == 0:
		return "A vocabulary-only file: no weights to run. Choose a model file."
	case role == "target" && spec.KindOf(f) == spec.DraftEagle3:
		return "An EAGLE-3 draft: it borrows a target's embedding and output head, so it cannot run alone. Choose it as the draft, with the target it was trained for."
	case d.Layers == 0:
		return "No transformer blocks in this file: nothing to run. Choose a model file."
	}
	return ""
}

// draftVerdict says in words whether draft can draft for target.
func draftVerdict(target, draft *gguf.File) (string, bool) {
	if why := roleProblem("draft", draft); why != "" {
		return why, false
	}
	if target == nil || draft == nil || roleProblem("target", target) != "" {
		return "", true // the target's card says what is wrong with it
	}
	kind, err := spec.Compatible(target, draft)
	if err != nil {
		why := err.Error()
		if _, rest, ok := strings.Cut(why, spec.ErrIncompatible.Error()+": "); ok {
			why = rest
		}
		return "Cannot draft for this target: " + why + ".", false
	}
	if kind == spec.DraftEagle3 {
		return "Can draft for the target: an EAGLE-3 head that reads the target's hidden states and borrows its embedding and output head.", true
	}
	return "Can draft for the target: same tokenizer and vocabulary.", true
}

// borrowRow is a head-sharing draft's card row: before loading, what its
// header lacks (EAGLE-3 drafts use the target's embedding and head); once
// loaded, what the engine says it borrows.
func borrowRow(draft *gguf.File, loaded []string) ([2]string, bool) {
	if draft == nil || spec.KindOf(draft) != spec.DraftEagle3 {
		return [2]string{}, false
	}
	if len(loaded) > 0 {
		return [2]string{"borrows", "EAGLE-3 draft, loaded using the target's " + tensorWords(loaded) + " (" + strings.Join(loaded, ", ") + ")"}, true
	}
	var lacks []string
	for _, name := range []string{"token_embd.weight", "output.weight"} {
		if _, ok := draft.Tensor(name); !ok {
			lacks = append(lacks, name)
		}
	}
	if len(lacks) == 0 {
		return [2]string{"kind", "EAGLE-3 draft with its own token embedding and output head"}, true
	}
	return [2]string{"borrows", "EAGLE-3 draft: borrows the target's " + tensorWords(lacks)}, true
}

// errNotGGUF is a dropped or chosen file that is not a model.
var errNotGGUF = errors.New("not a .gguf file")

// checkModelPath rejects paths that are obviously not models before opening.
func checkModelPath(path string) error {
	if !strings.EqualFold(filepath.Ext(path), ".gguf") {
		return fmt.Errorf("app: %s: %w", filepath.Base(path), errNotGGUF)
	}
	return nil
}
