package hub

import (
	"context"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/dustin/go-humanize"
	"github.com/gofrs/flock"
)

// Progress is how far a pull is, for a progress bar.
type Progress struct {
	File        string // the part being fetched
	Part, Parts int    // 1-based
	Done, Total int64  // bytes of the whole model, parts already cached included
	// Note says what is happening when it is not plain downloading:
	// checking a partial file, waiting to retry, starting over.
	Note string
}

// Pull downloads model m of rf into the cache, every part, and returns the
// local path of its first part. A partial file from an earlier pull (by
// Tandem or the Hub's own tools) is resumed; a dropped connection is
// resumed with backoff; every file is checked against the Hub's SHA-256
// before it is linked into the snapshot. rev is the revision asked for
// (refs/REV is written); progress may be nil.
func (c *Client) Pull(ctx context.Context, rf *RepoFiles, m Model, rev string, progress func(Progress)) (string, error) {
	if c.cfg.Offline {
		return "", fmt.Errorf("hub: %s: %w", rf.Repo, ErrOffline)
	}
	if err := checkRepo(rf.Repo); err != nil {
		return "", err
	}
	if !commitPattern.MatchString(rf.Commit) {
		return "", fmt.Errorf("hub: %s: commit %q: %w", rf.Repo, rf.Commit, ErrBadRef)
	}
	if progress == nil {
		progress = func(Progress) {}
	}
	dir := c.RepoDir(rf.Repo)
	snap := filepath.Join(dir, "snapshots", rf.Commit)
	if err := c.checkSpace(dir, m); err != nil {
		return "", err
	}
	var before int64
	for i, f := range m.Parts {
		if err := checkPath(f.Path); err != nil {
			return "", err
		}
		report := func(done int64, note string) {
			progress(Progress{File: f.Path, Part: i + 1, Parts: len(m.Parts), Done: before + done, Total: m.Size, Note: note})
		}
		if err := c.fetchPart(ctx, rf.Repo, rf.Commit, f, report); err != nil {
			return "", err
		}
		if err := link(filepath.Join(dir, "blobs", f.etag()), filepath.Join(snap, filepath.FromSlash(f.Path))); err != nil {
			return "", fmt.Errorf("hub: %s: %w", f.Path, err)
		}
		report(f.Size, "")
		before += f.Size
	}
	if err := writeRef(dir, cmpOr(rev, "main"), rf.Commit); err != nil {
		return "", fmt.Errorf("hub: %s: %w", rf.Repo, err)
	}
	return filepath.Join(snap, filepath.FromSlash(m.Name)), nil
}

// checkSpace refuses a pull the disk cannot hold: the bytes still missing
// against the free space where the blobs go.
func (c *Client) checkSpace(dir string, m Model) error {
	var need int64
	for _, f := range m.Parts {
		blob := filepath.Join(dir, "blobs", f.etag())
		if _, err := os.Stat(blob); err == nil {
			continue
		}
		need += f.Size
		if st, err := os.Stat(blob + ".incomplete"); err == nil && st.Size() <= f.Size {
			need -= st.Size()
		}
	}
	if need == 0 {
		return nil
	}
	probe := dir
	for {
		if _, err := os.Stat(probe); err == nil {
			break
		}
		parent := filepath.Dir(probe)
		if parent == probe {
			return nil
		}
		probe = parent
	}
	free, err := c.freeSpace(probe)
	if err != nil || free < 0 {
		return nil // unknown: a full disk shows as a write error
	}
	if free < need {
		return fmt.Errorf("hub: %s: %w: it needs %s more, %s is free on %s",
			m.Name, ErrNoSpace, humanize.IBytes(uint64(need)), humanize.IBytes(uint64(free)), probe)
	}
	return nil
}

// fetchPart makes blobs/ETAG of f, unless it is there, under the lock the
// Hub's tools take for the same blob.
func (c *Client) fetchPart(ctx context.Context, repo, commit string, f File, report func(int64, string)) error {
	if f.etag() == "" {
		return fmt.Errorf("hub: %s/%s: the listing gives no hash to check the file against: %w", repo, f.Path, ErrServer)
	}
	blob := filepath.Join(c.RepoDir(repo), "blobs", f.etag())
	if _, err := os.Stat(blob); err == nil {
		return nil
	}
	lockPath := c.lockPath(repo, f.etag())
	if err := os.MkdirAll(filepath.Dir(lockPath), 0o755); err != nil {
		return fmt.Errorf("hub: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(blob), 0o755); err != nil {
		return fmt.Errorf("hub: %w", err)
	}
	lock := flock.New(lockPath)
	if ok, err := lock.TryLock(); err != nil {
		return fmt.Errorf("hub: %s: lock %s: %w", f.Path, lockPath, err)
	} else if !ok {
		report(0, "waiting for another download of this file to finish")
		if _, err := lock.TryLockContext(ctx, 200*time.Millisecond); err != nil {
			return fmt.Errorf("hub: %s: lock %s: %w", f.Path, lockPath, err)
		}
	}
	defer lock.Unlock()
	if _, err := os.Stat(blob); err == nil {
		return nil // the other download finished it
	}
	return c.download(ctx, c.resolveURL(repo, commit, f.Path), repo+"/"+f.Path, f, blob, report)
}

// newHash is what f is checked with: SHA-256 for an LFS file, else the git
// blob id (SHA-1 of "blob SIZE\0" and the contents).
func newHash(f File) (hash.Hash, string) {
	if f.SHA256 != "" {
		return sha256.New(), f.SHA256
	}
	h := sha1.New()
	h.Write([]byte("blob " + strconv.FormatInt(f.Size, 10) + "\x00"))
	return h, f.BlobID
}

// partial is a download in progress: blob.incomplete, how much of it is
// there and the hash of that much.
type partial struct {
	out  *os.File
	f    File
	h    hash.Hash
	want string // the hash the Hub lists
	have int64
}

// restart empties the partial file.
func (p *partial) restart() error {
	p.h, _ = newHash(p.f)
	p.have = 0
	if err := p.out.Truncate(0); err != nil {
		return fmt.Errorf("hub: %w", err)
	}
	return nil
}

// download writes f's bytes to blob.incomplete, resuming what is there,
// and renames it to blob once the size and hash match.
func (c *Client) download(ctx context.Context, u, what string, f File, blob string, report func(int64, string)) error {
	name := blob + ".incomplete"
	out, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("hub: %w", err)
	}
	defer out.Close()
	st, err := out.Stat()
	if err != nil {
		return fmt.Errorf("hub: %w", err)
	}
	p := &partial{out: out, f: f, have: st.Size()}
	p.h, p.want = newHash(f)
	if p.have > f.Size {
		if err := p.restart(); err != nil {
			return err
		}
	}
	if p.have > 0 {
		report(p.have, fmt.Sprintf("checking the %s already downloaded", humanize.IBytes(uint64(p.have))))
		if err := hashPrefix(ctx, out, p.h, p.have); err != nil {
			return fmt.Errorf("hub: %s: %w", what, err)
		}
		if p.have == f.Size && hex.EncodeToString(p.h.Sum(nil)) != p.want {
			report(0, "the earlier download was corrupt: starting over")
			if err := p.restart(); err != nil {
				return err
			}
		}
	}
	failures, wait := 0, firstWait
	for p.have < f.Size {
		n, err := c.fetchInto(ctx, u, what, p, report)
		if err == nil {
			continue
		}
		if ctx.Err() != nil {
			return fmt.Errorf("hub: %s: stopped with %s of %s kept for resuming: %w", what,
				humanize.IBytes(uint64(p.have)), humanize.IBytes(uint64(f.Size)), ctx.Err())
		}
		if !errors.Is(err, errDropped) {
			return err
		}
		if n > 0 {
			failures, wait = 0, firstWait
		}
		if failures++; failures > c.retries {
			return fmt.Errorf("hub: %s: %w: gave up after %d tries without progress; %s of %s kept, pull again to resume: %w",
				what, ErrUnreachable, failures, humanize.IBytes(uint64(p.have)), humanize.IBytes(uint64(f.Size)), err)
		}
		report(p.have, fmt.Sprintf("connection lost at %s; resuming in %s", humanize.IBytes(uint64(p.have)), wait))
		if err := c.sleep(ctx, wait); err != nil {
			return fmt.Errorf("hub: %s: stopped with %s kept for resuming: %w", what, humanize.IBytes(uint64(p.have)), err)
		}
		wait = min(2*wait, maxWait)
	}
	if got := hex.EncodeToString(p.h.Sum(nil)); got != p.want {
		return fmt.Errorf("hub: %s: %w: got %s, the Hub lists %s; the file is kept as %s and never used; pulling again starts it over",
			what, ErrChecksum, got, p.want, name)
	}
	if err := out.Sync(); err != nil {
		return fmt.Errorf("hub: %w", err)
	}
	if err := out.Close(); err != nil {
		return fmt.Errorf("hub: %w", err)
	}
	if err := os.Rename(name, blob); err != nil {
		return fmt.Errorf("hub: %w", err)
	}
	return nil
}

// hashPrefix feeds the first n bytes of f to h.
func hashPrefix(ctx context.Context, f *os.File, h hash.Hash, n int64) error {
	buf := make([]byte, 1<<20)
	r := io.NewSectionReader(f, 0, n)
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		k, err := r.Read(buf)
		h.Write(buf[:k])
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// fetchInto makes one request for the bytes p lacks and appends what
// arrives; it returns how many came and, for a connection that ended
// early, an error wrapping errDropped.
func (c *Client) fetchInto(ctx context.Context, u, what string, p *partial, report func(int64, string)) (int64, error) {
	size := p.f.Size
	hdr := http.Header{"Accept-Encoding": {"identity"}}
	if p.have > 0 {
		hdr.Set("Range", fmt.Sprintf("bytes=%d-", p.have))
	}
	resp, g, err := c.guarded(ctx, http.MethodGet, u, hdr)
	if err != nil {
		return 0, err
	}
	defer g.stop()
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusPartialContent:
		start, total, err := parseContentRange(resp.Header.Get("Content-Range"))
		if err != nil || start != p.have || total >= 0 && total != size {
			return 0, fmt.Errorf("hub: %s: asked for bytes from %d of %d, got Content-Range %q: %w",
				what, p.have, size, resp.Header.Get("Content-Range"), ErrServer)
		}
	case http.StatusOK:
		if p.have > 0 {
			report(0, "the server cannot resume downloads: starting over")
			if err := p.restart(); err != nil {
				return 0, err
			}
		}
		if resp.ContentLength >= 0 && resp.ContentLength != size {
			return 0, fmt.Errorf("hub: %s: the server sends %d bytes, the listing says %d: %w", what, resp.ContentLength, size, ErrServer)
		}
	case http.StatusRequestedRangeNotSatisfiable:
		report(0, "the server refused to resume: starting over")
		return 0, errors.Join(p.restart(), fmt.Errorf("hub: %s: HTTP 416: %w", what, errDropped))
	default:
		return 0, c.statusError(resp, what)
	}
	if _, err := p.out.Seek(p.have, io.SeekStart); err != nil {
		return 0, fmt.Errorf("hub: %w", err)
	}
	buf := make([]byte, 1<<20)
	var got int64
	for p.have < size {
		k, rerr := g.read(resp.Body, buf[:min(int64(len(buf)), size-p.have)])
		if k > 0 {
			if _, err := p.out.Write(buf[:k]); err != nil {
				return got, fmt.Errorf("hub: %s: writing %s: %w", what, p.out.Name(), err)
			}
			p.h.Write(buf[:k])
			p.have += int64(k)
			got += int64(k)
			report(p.have, "")
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			if ctx.Err() != nil {
				return got, ctx.Err()
			}
			if errors.Is(rerr, errDropped) {
				return got, fmt.Errorf("hub: %s: %w", what, rerr)
			}
			return got, fmt.Errorf("hub: %s: %w: %w", what, errDropped, rerr)
		}
	}
	if p.have < size {
		return got, fmt.Errorf("hub: %s: the answer ended at byte %d of %d: %w", what, p.have, size, errDropped)
	}
	return got, nil
}

// Discard deletes what a stopped pull of m left in the cache (the
// .incomplete files), for a download the user cancels rather than pauses.
func (c *Client) Discard(repo string, m Model) error {
	if err := checkRepo(repo); err != nil {
		return err
	}
	for _, f := range m.Parts {
		if f.etag() == "" {
			continue
		}
		p := filepath.Join(c.RepoDir(repo), "blobs", f.etag()+".incomplete")
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("hub: %w", err)
		}
	}
	return nil
}

// Partial is how many bytes of m earlier pulls left in the cache (parts
// done and .incomplete files), for showing a download that can resume.
func (c *Client) Partial(repo string, m Model) int64 {
	if checkRepo(repo) != nil {
		return 0
	}
	var n int64
	for _, f := range m.Parts {
		blob := filepath.Join(c.RepoDir(repo), "blobs", f.etag())
		if st, err := os.Stat(blob); err == nil {
			n += st.Size()
		} else if st, err := os.Stat(blob + ".incomplete"); err == nil {
			n += min(st.Size(), f.Size)
		}
	}
	return n
}
