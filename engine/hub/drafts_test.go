package hub

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/tandem-run/tandem/engine/gguf"
	"github.com/tandem-run/tandem/engine/hub/hubtest"
	"github.com/tandem-run/tandem/engine/spec"
	"github.com/tandem-run/tandem/kernels/sharedtest"
)

// The demo target's drafts on the Hub: the draft model and the EAGLE-3
// head, smallest first; a model of another vocabulary is left out.
func TestSuggestDrafts(t *testing.T) {
	dir := sharedtest.Path(t, "models")
	repos, err := hubtest.DemoRepos(dir)
	if err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(t.TempDir(), "other-Q8_0.gguf")
	if err := hubtest.OtherVocab(filepath.Join(dir, "factory-draft-Q8_0.gguf"), other); err != nil {
		t.Fatal(err)
	}
	repos = append(repos, hubtest.Repo{ID: "tandem-demo/factory-othervocab-GGUF", Files: []hubtest.RepoFile{{Path: "factory-othervocab-Q8_0.gguf", Local: other}}})
	fx := serve(t, dir, repos...)
	target, err := gguf.Open(filepath.Join(dir, "factory-target-Q4_K_M.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	defer target.Close()
	got, err := fx.c.SuggestDrafts(context.Background(), target, hubtest.TargetRepo)
	if err != nil {
		t.Fatal(err)
	}
	type s struct {
		repo, file string
		kind       spec.DraftKind
	}
	want := []s{{hubtest.DraftRepo, "factory-draft-Q8_0.gguf", spec.DraftModel}, {hubtest.Eagle3Repo, "factory-eagle3-F16.gguf", spec.DraftEagle3}}
	if len(got) != len(want) {
		t.Fatalf("%d suggestions: %+v", len(got), got)
	}
	for i, w := range want {
		if g := (s{got[i].Repo.Repo, got[i].Model.Name, got[i].Kind}); g != w {
			t.Errorf("suggestion %d: %+v, want %+v", i, g, w)
		}
	}
	if fx.hub.Served() > 3*400<<10 {
		t.Errorf("read %d bytes to suggest drafts", fx.hub.Served())
	}
	// From a local file with no repository, the family name finds them too.
	got, err = fx.c.SuggestDrafts(context.Background(), target, "")
	if err != nil || len(got) != 2 {
		t.Errorf("without a repository: %d suggestions, %v", len(got), err)
	}
}
