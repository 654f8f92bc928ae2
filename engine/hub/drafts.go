package hub

import (
	"cmp"
	"context"
	"errors"
	"path"
	"slices"
	"strings"
	"sync"
	"unicode"

	"github.com/tandem-run/tandem/engine/gguf"
	"github.com/tandem-run/tandem/engine/spec"
)

// Suggestion is a draft the Hub has for a target: a file whose header
// passed the draft compatibility check (spec.Compatible) against it and
// whose model has at most half the target's parameters (a quantization of
// the target itself passes the check but would not speed it up).
type Suggestion struct {
	Repo  *RepoFiles
	Model Model
	Kind  spec.DraftKind
}

// draftQuants is the order a repository's file is picked in to stand for
// it: a draft's acceptance suffers at low bits, and its size matters little.
var draftQuants = []string{"Q8_0", "Q6_K", "Q5_K_M", "Q4_K_M", "F16", "BF16"}

// maxCandidates bounds the repositories whose headers a suggestion reads.
const maxCandidates = 8

// SuggestDrafts looks on the Hub for drafts of target (whose repository is
// targetRepo, "" when it is a local file): repositories from the same
// publisher and of the same model family, one file each, kept when its
// header passes the compatibility check. Smallest first. Only headers are
// read, a few at a time.
func (c *Client) SuggestDrafts(ctx context.Context, target *gguf.File, targetRepo string) ([]Suggestion, error) {
	var terms []string
	if owner, _, ok := strings.Cut(targetRepo, "/"); ok {
		terms = append(terms, owner)
	}
	for _, key := range []string{"general.basename", "general.name"} {
		if s, ok := target.String(key); ok {
			if w := familyWord(s); w != "" && !slices.Contains(terms, w) {
				terms = append(terms, w)
			}
		}
	}
	if len(terms) == 0 {
		terms = append(terms, target.Arch())
	}
	var candidates []string
	for _, term := range terms {
		repos, err := c.Search(ctx, Query{Text: term, Limit: 2 * maxCandidates})
		if err != nil {
			return nil, err
		}
		for _, r := range repos {
			if r.ID != targetRepo && !slices.Contains(candidates, r.ID) && len(candidates) < maxCandidates {
				candidates = append(candidates, r.ID)
			}
		}
	}
	var (
		mu    sync.Mutex
		out   []Suggestion
		first error
		wg    sync.WaitGroup
		sem   = make(chan struct{}, 3)
	)
	for _, id := range candidates {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			s, ok, err := c.checkDraft(ctx, target, id)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case ok:
				out = append(out, s)
			case err != nil && first == nil && !errors.Is(err, ErrNoGGUF) && !errors.Is(err, ErrNeedsToken) && !errors.Is(err, ErrForbidden):
				first = err
			}
		}()
	}
	wg.Wait()
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	if len(out) == 0 && first != nil {
		return nil, first
	}
	slices.SortFunc(out, func(a, b Suggestion) int {
		return cmp.Or(cmp.Compare(a.Model.Size, b.Model.Size), cmp.Compare(a.Repo.Repo, b.Repo.Repo))
	})
	return out, nil
}

// checkDraft reads one file of repo and checks it against target.
func (c *Client) checkDraft(ctx context.Context, target *gguf.File, repo string) (Suggestion, bool, error) {
	rf, err := c.Files(ctx, repo, "")
	if err != nil {
		return Suggestion{}, false, err
	}
	m, ok := pickDraftFile(rf.Models)
	if !ok {
		return Suggestion{}, false, nil
	}
	f, _, err := c.Header(ctx, repo, rf.Commit, m)
	if err != nil {
		return Suggestion{}, false, err
	}
	kind, err := spec.Compatible(target, f)
	if err != nil || 2*f.Describe().Parameters > target.Describe().Parameters {
		return Suggestion{}, false, nil // another vocabulary, or no smaller than the target
	}
	return Suggestion{Repo: rf, Model: m, Kind: kind}, true, nil
}

// pickDraftFile is the file that stands for a repository as a draft.
func pickDraftFile(models []Model) (Model, bool) {
	models = slices.DeleteFunc(slices.Clone(models), func(m Model) bool {
		return strings.Contains(strings.ToLower(path.Base(m.Name)), "mmproj")
	})
	for _, q := range draftQuants {
		for _, m := range models {
			if m.Quant == q {
				return m, true
			}
		}
	}
	if len(models) == 0 {
		return Model{}, false
	}
	return models[0], true // the smallest
}

// familyWord is the first word of a model name: "Qwen3" of "Qwen3-8B".
func familyWord(name string) string {
	f := strings.FieldsFunc(name, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) && r != '.' })
	if len(f) == 0 {
		return ""
	}
	return f[0]
}
