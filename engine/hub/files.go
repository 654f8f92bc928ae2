package hub

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"net/url"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// File is one file of a repository.
type File struct {
	Path string `json:"path"`
	Size int64  `json:"size"`
	// SHA256 is the hash in the file's LFS pointer: what the download is
	// checked against and its name under blobs/.
	SHA256 string `json:"sha256,omitempty"`
	BlobID string `json:"blob_id,omitempty"` // the git blob id
}

// etag is the file's name under blobs/, as the Hub's tools name it: the
// LFS SHA-256, or the git blob id of a file kept in git itself.
func (f File) etag() string { return cmp.Or(f.SHA256, f.BlobID) }

// Model is one GGUF model of a repository: a file, or the parts of a split
// model (NAME-00001-of-00003.gguf ...) in order.
type Model struct {
	Name  string `json:"name"`            // the file, or the first part
	Quant string `json:"quant,omitempty"` // from the name: Q4_K_M, IQ4_XS, F16, ...
	Size  int64  `json:"size"`            // all parts together
	Parts []File `json:"parts"`
}

// RepoFiles is a repository's GGUF models at one commit.
type RepoFiles struct {
	Repo   string  `json:"repo"`
	Commit string  `json:"commit"`
	Gated  gated   `json:"gated,omitempty"`
	Models []Model `json:"models"` // smallest first
	// Incomplete are split models with parts missing from the listing;
	// they cannot be used.
	Incomplete []string `json:"incomplete,omitempty"`
}

// modelInfo is the part of GET /api/models/REPO?blobs=true that is used.
type modelInfo struct {
	ID       string `json:"id"`
	SHA      string `json:"sha"`
	Gated    gated  `json:"gated"`
	Siblings []struct {
		Name   string `json:"rfilename"`
		Size   int64  `json:"size"`
		BlobID string `json:"blobId"`
		LFS    *struct {
			SHA256 string `json:"sha256"`
			Size   int64  `json:"size"`
		} `json:"lfs"`
	} `json:"siblings"`
}

// Files lists the GGUF models of repo at revision rev ("" is main).
func (c *Client) Files(ctx context.Context, repo, rev string) (*RepoFiles, error) {
	if err := checkRepo(repo); err != nil {
		return nil, err
	}
	u := c.cfg.Endpoint + "/api/models/" + repo
	if rev != "" && rev != "main" {
		if err := checkRevision(rev); err != nil {
			return nil, err
		}
		u += "/revision/" + url.PathEscape(rev)
	}
	var info modelInfo
	if err := c.getJSON(ctx, u+"?blobs=true", repo, &info); err != nil {
		return nil, err
	}
	if !commitPattern.MatchString(info.SHA) {
		return nil, fmt.Errorf("hub: %s: the listing has no commit id (sha %q): %w", repo, info.SHA, ErrServer)
	}
	var files []File
	for _, s := range info.Siblings {
		if !strings.EqualFold(path.Ext(s.Name), ".gguf") || checkPath(s.Name) != nil {
			continue
		}
		f := File{Path: s.Name, Size: s.Size, BlobID: s.BlobID}
		if s.LFS != nil {
			f.SHA256, f.Size = strings.ToLower(s.LFS.SHA256), s.LFS.Size
		}
		if f.SHA256 != "" && !sha256Pattern.MatchString(f.SHA256) || f.SHA256 == "" && !commitPattern.MatchString(f.BlobID) {
			continue // no name under blobs/ we could trust
		}
		files = append(files, f)
	}
	rf := &RepoFiles{Repo: repo, Commit: info.SHA, Gated: info.Gated}
	rf.Models, rf.Incomplete = groupModels(files)
	if len(rf.Models) == 0 {
		why := ""
		if len(rf.Incomplete) > 0 {
			why = " (only split models with parts missing: " + strings.Join(rf.Incomplete, ", ") + ")"
		}
		return rf, fmt.Errorf("hub: %s: %w%s", repo, ErrNoGGUF, why)
	}
	return rf, nil
}

var (
	commitPattern = regexp.MustCompile(`^[0-9a-f]{40}$`)
	sha256Pattern = regexp.MustCompile(`^[0-9a-f]{64}$`)
	splitPattern  = regexp.MustCompile(`^(.*)-(\d{5})-of-(\d{5})\.gguf$`)
	// quantPattern finds the ggml type name llama.cpp's tools put in file
	// names, between separators.
	quantPattern = regexp.MustCompile(`(?i)(?:^|[^a-z0-9])(IQ[1-4]_(?:XXS|XS|S|M|NL)|Q[2-8]_K(?:_(?:XL|S|M|L))?|Q[4-8]_[01]|TQ[12]_0|MXFP4(?:_MOE)?|BF16|F16|F32)(?:$|[^a-z0-9])`)
)

// QuantOf is the quantization a file name says, "" when it says none.
func QuantOf(name string) string {
	base := strings.TrimSuffix(path.Base(name), path.Ext(name))
	m := quantPattern.FindAllStringSubmatch(base, -1)
	if len(m) == 0 {
		return ""
	}
	return strings.ToUpper(m[len(m)-1][1])
}

// groupModels makes models of files, grouping split parts; it returns the
// names of split models with parts missing apart.
func groupModels(files []File) ([]Model, []string) {
	var models []Model
	type group struct {
		n     int
		parts map[int]File
	}
	groups := map[string]*group{}
	for _, f := range files {
		m := splitPattern.FindStringSubmatch(f.Path)
		if m == nil {
			models = append(models, Model{Name: f.Path, Quant: QuantOf(f.Path), Size: f.Size, Parts: []File{f}})
			continue
		}
		i, _ := strconv.Atoi(m[2])
		n, _ := strconv.Atoi(m[3])
		key := m[1] + "/" + m[3]
		g := groups[key]
		if g == nil {
			g = &group{n: n, parts: map[int]File{}}
			groups[key] = g
		}
		g.parts[i] = f
	}
	var incomplete []string
	for _, key := range slices.Sorted(maps.Keys(groups)) {
		g := groups[key]
		m := Model{}
		for i := 1; i <= g.n; i++ {
			f, ok := g.parts[i]
			if !ok {
				m.Parts = nil
				break
			}
			m.Parts = append(m.Parts, f)
			m.Size += f.Size
		}
		if len(m.Parts) == 0 || len(g.parts) != g.n {
			stem := key[:strings.LastIndex(key, "/")]
			incomplete = append(incomplete, fmt.Sprintf("%s (%d of %d parts)", path.Base(stem), len(g.parts), g.n))
			continue
		}
		m.Name = m.Parts[0].Path
		m.Quant = QuantOf(key[:strings.LastIndex(key, "/")] + ".gguf")
		models = append(models, m)
	}
	slices.SortStableFunc(models, func(a, b Model) int { return cmp.Or(cmp.Compare(a.Size, b.Size), cmp.Compare(a.Name, b.Name)) })
	return models, incomplete
}

// Find is the model a reference names: by file (any part of a split
// model names the whole), by quantization, or the only model there is.
func (rf *RepoFiles) Find(ref Ref) (Model, error) {
	return findModel(rf.Repo, rf.Models, ref)
}

func findModel(repo string, models []Model, ref Ref) (Model, error) {
	var quants []string
	for _, m := range models {
		quants = append(quants, cmp.Or(m.Quant, path.Base(m.Name)))
	}
	available := "; it has " + strings.Join(quants, ", ")
	switch {
	case ref.File != "":
		for _, m := range models {
			for _, p := range m.Parts {
				if p.Path == ref.File {
					return m, nil
				}
			}
		}
		return Model{}, fmt.Errorf("hub: %s: file %s: %w%s", repo, ref.File, ErrNotFound, available)
	case ref.Quant != "":
		var match []Model
		for _, m := range models {
			if strings.EqualFold(m.Quant, ref.Quant) {
				match = append(match, m)
			}
		}
		if len(match) > 1 {
			// A vision projector (mmproj-*.gguf) is not what a quant names.
			match = slices.DeleteFunc(match, func(m Model) bool { return strings.Contains(strings.ToLower(path.Base(m.Name)), "mmproj") })
		}
		switch len(match) {
		case 0:
			return Model{}, fmt.Errorf("hub: %s: no %s file: %w%s", repo, ref.Quant, ErrNotFound, available)
		case 1:
			return match[0], nil
		}
		var names []string
		for _, m := range match {
			names = append(names, m.Name)
		}
		return Model{}, fmt.Errorf("hub: %s: %s: %w (%s); name the file: %s:FILE", repo, ref.Quant, ErrAmbiguous, strings.Join(names, ", "), repo)
	}
	if len(models) == 1 {
		return models[0], nil
	}
	return Model{}, fmt.Errorf("hub: %s: %w: add a quantization (%s:Q4_K_M) or a file%s", repo, ErrAmbiguous, repo, available)
}
