package hubtest

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/tandem-run/tandem/engine/gguf"
)

// Demo repository ids.
const (
	TargetRepo = "tandem-demo/factory-target-GGUF"
	DraftRepo  = "tandem-demo/factory-draft-GGUF"
	Eagle3Repo = "tandem-demo/factory-eagle3-GGUF"
)

// DemoRepos are the demo models of shared/models (dir) as three
// repositories: the target's three files, the draft's fourteen and the
// EAGLE-3 head.
func DemoRepos(dir string) ([]Repo, error) {
	matches, err := filepath.Glob(filepath.Join(dir, "factory-*.gguf"))
	if err != nil || len(matches) == 0 {
		return nil, fmt.Errorf("hubtest: no factory-*.gguf in %s", dir)
	}
	repos := []Repo{
		{ID: TargetRepo, Downloads: 5210, Likes: 41, LastModified: time.Date(2026, 11, 20, 9, 0, 0, 0, time.UTC)},
		{ID: DraftRepo, Downloads: 3120, Likes: 17, LastModified: time.Date(2026, 11, 18, 9, 0, 0, 0, time.UTC)},
		{ID: Eagle3Repo, Downloads: 980, Likes: 23, LastModified: time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)},
	}
	for _, m := range matches {
		base := filepath.Base(m)
		i := 1
		switch {
		case strings.HasPrefix(base, "factory-target-"):
			i = 0
		case strings.HasPrefix(base, "factory-eagle3-"):
			i = 2
		}
		repos[i].Files = append(repos[i].Files, RepoFile{Path: base, Local: m})
	}
	return repos, nil
}

// Split writes src as n parts named STEM-0000i-of-0000n.gguf in dir, as
// llama.cpp's gguf-split does: the first part has all the metadata, every
// part the split keys and its share of the tensors.
func Split(src, dir, stem string, n int) ([]string, error) {
	f, err := gguf.Open(src)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var paths []string
	per := (len(f.Tensors) + n - 1) / n
	for i := range n {
		var w gguf.Writer
		if i == 0 {
			for _, kv := range f.KV {
				w.AddKV(kv.Key, kv.Value)
			}
		} else if a, ok := f.Uint("general.alignment"); ok {
			w.AddKV("general.alignment", uint32(a))
		}
		w.AddKV("split.no", uint16(i))
		w.AddKV("split.count", uint16(n))
		w.AddKV("split.tensors.count", int32(len(f.Tensors)))
		for j := i * per; j < min((i+1)*per, len(f.Tensors)); j++ {
			if err := copyTensor(&w, f, &f.Tensors[j]); err != nil {
				return nil, err
			}
		}
		p := filepath.Join(dir, fmt.Sprintf("%s-%05d-of-%05d.gguf", stem, i+1, n))
		if err := w.WriteFile(p); err != nil {
			return nil, err
		}
		paths = append(paths, p)
	}
	return paths, nil
}

// OtherVocab writes a copy of src whose vocabulary spells its tokens
// differently: a model no demo target can take as a draft.
func OtherVocab(src, dst string) error {
	f, err := gguf.Open(src)
	if err != nil {
		return err
	}
	defer f.Close()
	var w gguf.Writer
	for _, kv := range f.KV {
		v := kv.Value
		if kv.Key == "tokenizer.ggml.tokens" {
			toks, _ := f.Strings(kv.Key)
			other := make([]string, len(toks))
			for i, t := range toks {
				other[i] = strings.ToUpper(t) + "~"
			}
			v = other
		}
		if kv.Key == "general.name" {
			v = "other-vocab"
		}
		w.AddKV(kv.Key, v)
	}
	for i := range f.Tensors {
		if err := copyTensor(&w, f, &f.Tensors[i]); err != nil {
			return err
		}
	}
	return w.WriteFile(dst)
}

func copyTensor(w *gguf.Writer, f *gguf.File, t *gguf.TensorInfo) error {
	data, err := f.TensorData(t)
	if err != nil {
		return err
	}
	return w.AddTensorFunc(t.Name, t.Type, t.Dims, func(out io.Writer) error {
		_, err := out.Write(data)
		return err
	})
}

// Exists reports whether a path exists (for tests checking the cache).
func Exists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}
