package hub

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/google/renameio/v2"
)

// The Hub's cache layout (huggingface_hub's file_download.py), per repository:
//
//	models--OWNER--NAME/
//	  blobs/SHA256                  file contents, named by their etag
//	  blobs/SHA256.incomplete       a download in progress (never read as a model)
//	  snapshots/COMMIT/PATH         links to ../../blobs/SHA256
//	  refs/main                     the commit main pointed at, no newline
//	.locks/models--OWNER--NAME/SHA256.lock

// RepoDir is where repo's files are cached.
func (c *Client) RepoDir(repo string) string {
	return filepath.Join(c.cfg.Cache, "models--"+strings.ReplaceAll(repo, "/", "--"))
}

func (c *Client) lockPath(repo, etag string) string {
	return filepath.Join(c.cfg.Cache, ".locks", filepath.Base(c.RepoDir(repo)), etag+".lock")
}

// commitOf is the commit a revision names in the cache: the revision itself
// when it is a commit id, else what refs/REV says.
func (c *Client) commitOf(repo, rev string) (string, error) {
	rev = cmpOr(rev, "main")
	if commitPattern.MatchString(rev) {
		return rev, nil
	}
	b, err := os.ReadFile(filepath.Join(c.RepoDir(repo), "refs", rev))
	if err != nil {
		return "", err
	}
	commit := strings.TrimSpace(string(b))
	if !commitPattern.MatchString(commit) {
		return "", fmt.Errorf("hub: %s: refs/%s holds %q, not a commit id", repo, rev, commit)
	}
	return commit, nil
}

// Cached is the local path of ref's model (its first part) when every
// part is in the cache, else an error wrapping ErrNotCached.
func (c *Client) Cached(ref Ref) (string, error) {
	notCached := fmt.Errorf("hub: %s: %w (cache %s)", ref, ErrNotCached, c.cfg.Cache)
	if err := checkRepo(ref.Repo); err != nil {
		return "", err
	}
	commit, err := c.commitOf(ref.Repo, ref.Revision)
	if err != nil {
		return "", notCached
	}
	snap := filepath.Join(c.RepoDir(ref.Repo), "snapshots", commit)
	var files []File
	err = filepath.WalkDir(snap, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() || !strings.EqualFold(filepath.Ext(p), ".gguf") {
			return nil
		}
		st, err := os.Stat(p) // through the link: a dangling one is not cached
		if err != nil || !st.Mode().IsRegular() {
			return nil
		}
		rel, _ := filepath.Rel(snap, p)
		files = append(files, File{Path: filepath.ToSlash(rel), Size: st.Size()})
		return nil
	})
	if err != nil || len(files) == 0 {
		return "", notCached
	}
	models, _ := groupModels(files)
	m, err := findModel(ref.Repo, models, ref)
	if err != nil {
		if errors.Is(err, ErrNotFound) {
			return "", notCached
		}
		return "", err
	}
	return filepath.Join(snap, filepath.FromSlash(m.Name)), nil
}

// link makes snapshots/COMMIT/PATH point at the blob, relatively, so the
// cache can move; where links are not allowed, a hard link.
func link(blob, dst string) error {
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	rel, err := filepath.Rel(filepath.Dir(dst), blob)
	if err != nil {
		rel = blob
	}
	os.Remove(dst)
	if err := os.Symlink(rel, dst); err != nil {
		return os.Link(blob, dst)
	}
	return nil
}

// writeRef records that rev pointed at commit (nothing for a commit id).
func writeRef(repoDir, rev, commit string) error {
	if rev == "" || rev == commit {
		return nil
	}
	p := filepath.Join(repoDir, "refs", rev)
	if b, err := os.ReadFile(p); err == nil && string(b) == commit {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	return renameio.WriteFile(p, []byte(commit), 0o644)
}
