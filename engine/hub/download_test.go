package hub

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tandem-run/tandem/engine/gguf"
	"github.com/tandem-run/tandem/engine/hub/hubtest"
)

const draftQ8 = "factory-draft-Q8_0.gguf"

// pullDraft pulls the draft's Q8_0 through c and returns its local path.
func (fx *fixture) pullDraft(t *testing.T, c *Client, progress func(Progress)) (string, error) {
	t.Helper()
	ref, err := ParseRef("hf://" + hubtest.DraftRepo + "/" + draftQ8)
	if err != nil {
		t.Fatal(err)
	}
	return c.Resolve(context.Background(), ref, true, progress)
}

// checkCached checks the Hub's cache layout for the draft's Q8_0.
func (fx *fixture) checkCached(t *testing.T, p string) {
	t.Helper()
	dir := fx.c.RepoDir(hubtest.DraftRepo)
	commit := fx.hub.Commit(hubtest.DraftRepo)
	sum := fx.hub.SHA256(hubtest.DraftRepo, draftQ8)
	if want := filepath.Join(dir, "snapshots", commit, draftQ8); p != want {
		t.Errorf("path %s, want %s", p, want)
	}
	if target, err := os.Readlink(p); err != nil || target != "../../blobs/"+sum {
		t.Errorf("snapshot link -> %q (%v), want ../../blobs/%s", target, err, sum)
	}
	if ref, err := os.ReadFile(filepath.Join(dir, "refs", "main")); err != nil || string(ref) != commit {
		t.Errorf("refs/main = %q (%v), want %s", ref, err, commit)
	}
	got, err := os.ReadFile(p)
	if err != nil || !bytes.Equal(got, fx.local(draftQ8)) {
		t.Errorf("cached bytes differ from the Hub's file (%v)", err)
	}
	if hubtest.Exists(filepath.Join(dir, "blobs", sum+".incomplete")) {
		t.Error("the partial file is still there")
	}
	if !hubtest.Exists(filepath.Join(filepath.Dir(dir), ".locks", filepath.Base(dir), sum+".lock")) {
		t.Error("no lock file where the Hub's tools take it")
	}
}

func TestPullResumesAfterDrops(t *testing.T) {
	fx := newFixture(t, draftQ8)
	fx.hub.SetFaults(hubtest.Faults{Drops: 3, DropAfter: 1 << 20})
	var notes []string
	var last Progress
	p, err := fx.pullDraft(t, fx.c, func(pr Progress) {
		if pr.Note != "" {
			notes = append(notes, pr.Note)
		}
		last = pr
	})
	if err != nil {
		t.Fatal(err)
	}
	fx.checkCached(t, p)
	// Each drop came after a MiB: every retry resumes where it stopped.
	want := []string{"", "bytes=1048576-", "bytes=2097152-", "bytes=3145728-"}
	if got := fx.hub.Ranges(); !slices.Equal(got, want) {
		t.Errorf("ranges %q, want %q", got, want)
	}
	if got := fx.sleeps.all(); !slices.Equal(got, []time.Duration{time.Second, time.Second, time.Second}) {
		t.Errorf("waits %v: progress resets the backoff", got)
	}
	if n := len(fx.local(draftQ8)); fx.hub.Served() != int64(n) || last.Done != int64(n) || last.Total != int64(n) {
		t.Errorf("served %d bytes, progress %+v, file %d", fx.hub.Served(), last, n)
	}
	if len(notes) != 3 || !strings.Contains(notes[0], "connection lost at 1.0 MiB") {
		t.Errorf("notes %q", notes)
	}
	// A second pull finds the file and asks nothing.
	before := fx.hub.Requests("info")
	if again, err := fx.pullDraft(t, fx.c, nil); err != nil || again != p || fx.hub.Requests("info") != before {
		t.Errorf("second pull: %s %v", again, err)
	}
}

// A partial file left by an earlier run (Tandem's or the Hub's tools') is
// checked and resumed; with a server that ignores Range, started over.
func TestPullResumesPartialFile(t *testing.T) {
	for _, noRange := range []bool{false, true} {
		fx := newFixture(t, draftQ8)
		sum := fx.hub.SHA256(hubtest.DraftRepo, draftQ8)
		blobs := filepath.Join(fx.c.RepoDir(hubtest.DraftRepo), "blobs")
		if err := os.MkdirAll(blobs, 0o755); err != nil {
			t.Fatal(err)
		}
		const have = 3_000_000
		if err := os.WriteFile(filepath.Join(blobs, sum+".incomplete"), fx.local(draftQ8)[:have], 0o644); err != nil {
			t.Fatal(err)
		}
		fx.hub.SetFaults(hubtest.Faults{NoRange: noRange})
		p, err := fx.pullDraft(t, fx.c, nil)
		if err != nil {
			t.Fatal(err)
		}
		fx.checkCached(t, p)
		served, size := fx.hub.Served(), int64(len(fx.local(draftQ8)))
		if !noRange && (served != size-have || !slices.Equal(fx.hub.Ranges(), []string{"bytes=3000000-"})) {
			t.Errorf("resume: served %d of %d, ranges %q", served, size, fx.hub.Ranges())
		}
		if noRange && served != size {
			t.Errorf("without Range: served %d, want the whole %d", served, size)
		}
	}
}

func TestPullChecksumMismatch(t *testing.T) {
	fx := newFixture(t, draftQ8)
	fx.hub.SetFaults(hubtest.Faults{WrongSHA: true})
	_, err := fx.pullDraft(t, fx.c, nil)
	if !errors.Is(err, ErrChecksum) || !strings.Contains(err.Error(), "never used") {
		t.Fatalf("wrong checksum: %v", err)
	}
	dir := fx.c.RepoDir(hubtest.DraftRepo)
	wrong := strings.Repeat("0", 64)
	if st, err := os.Stat(filepath.Join(dir, "blobs", wrong+".incomplete")); err != nil || st.Size() != int64(len(fx.local(draftQ8))) {
		t.Errorf("the partial file is not kept: %v", err)
	}
	if hubtest.Exists(filepath.Join(dir, "blobs", wrong)) || hubtest.Exists(filepath.Join(dir, "snapshots")) {
		t.Error("a file that failed its check is in the cache")
	}
	ref := Ref{Repo: hubtest.DraftRepo, File: draftQ8}
	if _, err := fx.c.Resolve(context.Background(), ref, false, nil); !errors.Is(err, ErrNotCached) {
		t.Errorf("resolving after a failed pull: %v", err)
	}
	// The partial was named by the wrong hash; with the right listing the
	// download starts again and succeeds.
	fx.hub.SetFaults(hubtest.Faults{})
	p, err := fx.pullDraft(t, fx.c, nil)
	if err != nil {
		t.Fatal(err)
	}
	fx.checkCached(t, p)
}

// A complete but corrupt partial file is checked, found wrong and replaced.
func TestPullReplacesCorruptPartial(t *testing.T) {
	fx := newFixture(t, draftQ8)
	sum := fx.hub.SHA256(hubtest.DraftRepo, draftQ8)
	blobs := filepath.Join(fx.c.RepoDir(hubtest.DraftRepo), "blobs")
	if err := os.MkdirAll(blobs, 0o755); err != nil {
		t.Fatal(err)
	}
	bad := bytes.Clone(fx.local(draftQ8))
	bad[len(bad)/2] ^= 0xff
	if err := os.WriteFile(filepath.Join(blobs, sum+".incomplete"), bad, 0o644); err != nil {
		t.Fatal(err)
	}
	var notes []string
	p, err := fx.pullDraft(t, fx.c, func(pr Progress) {
		if pr.Note != "" {
			notes = append(notes, pr.Note)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	fx.checkCached(t, p)
	if !slices.ContainsFunc(notes, func(s string) bool { return strings.Contains(s, "corrupt: starting over") }) {
		t.Errorf("notes %q", notes)
	}
}

func TestPullServerErrors(t *testing.T) {
	fx := newFixture(t, draftQ8)
	fx.hub.SetFaults(hubtest.Faults{Status500: 3})
	p, err := fx.pullDraft(t, fx.c, nil)
	if err != nil {
		t.Fatalf("after three 500s: %v", err)
	}
	fx.checkCached(t, p)
	if got := fx.sleeps.all(); !slices.Equal(got, []time.Duration{time.Second, 2 * time.Second, 4 * time.Second}) {
		t.Errorf("waits %v", got)
	}

	fx = newFixture(t, draftQ8)
	fx.hub.SetFaults(hubtest.Faults{Status500: 100})
	c := fx.client(fx.cfg, WithRetries(2))
	if _, err := fx.pullDraft(t, c, nil); !errors.Is(err, ErrServer) || !strings.Contains(err.Error(), "HTTP 500") {
		t.Errorf("a Hub that keeps failing: %v", err)
	}

	// Drops that never let a byte through give up after the retries.
	fx = newFixture(t, draftQ8)
	fx.hub.SetFaults(hubtest.Faults{Drops: 100, DropAfter: 0})
	c = fx.client(fx.cfg, WithRetries(3))
	if _, err := fx.pullDraft(t, c, nil); !errors.Is(err, ErrUnreachable) || !strings.Contains(err.Error(), "pull again to resume") {
		t.Errorf("endless drops: %v", err)
	}
}

func TestUnreachable(t *testing.T) {
	fx := newFixture(t, "none")
	cfg := fx.cfg
	cfg.Endpoint = "http://127.0.0.1:1"
	c := fx.client(cfg, WithRetries(2))
	_, err := c.Search(context.Background(), Query{Text: "x"})
	if !errors.Is(err, ErrUnreachable) || !strings.Contains(err.Error(), "127.0.0.1:1") {
		t.Errorf("unreachable host: %v", err)
	}
	if n := len(fx.sleeps.all()); n != 2 {
		t.Errorf("%d waits, want 2", n)
	}
}

func TestGated(t *testing.T) {
	fx := newFixture(t, "none")
	ref := Ref{Repo: "tandem-demo/gated-GGUF", Quant: "Q4_K_M"}
	_, err := fx.c.Resolve(context.Background(), ref, true, nil)
	if !errors.Is(err, ErrNeedsToken) || !strings.Contains(err.Error(), "HF_TOKEN") || !strings.Contains(err.Error(), fx.cfg.TokenFile) {
		t.Errorf("gated without a token: %v", err)
	}
	cfg := fx.cfg
	cfg.Token, cfg.TokenFrom = "hf_wrong", "HF_TOKEN"
	if _, err := fx.client(cfg).Resolve(context.Background(), ref, true, nil); !errors.Is(err, ErrForbidden) ||
		!strings.Contains(err.Error(), "accept its terms") {
		t.Errorf("gated with a token not allowed: %v", err)
	}
	cfg.Token = token
	if _, err := fx.client(cfg).Resolve(context.Background(), ref, true, nil); err != nil {
		t.Errorf("gated with the token: %v", err)
	}
}

func TestOffline(t *testing.T) {
	fx := newFixture(t, draftQ8)
	p, err := fx.pullDraft(t, fx.c, nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg := fx.cfg
	cfg.Offline = true
	off := fx.client(cfg)
	requests := fx.hub.Requests("info") + fx.hub.Requests("resolve") + fx.hub.Requests("search")
	ctx := context.Background()
	for _, s := range []string{"hf://" + hubtest.DraftRepo + "/" + draftQ8, hubtest.DraftRepo + ":Q8_0", hubtest.DraftRepo + ":q8_0"} {
		ref, _ := ParseRef(s)
		if got, err := off.Resolve(ctx, ref, true, nil); err != nil || got != p {
			t.Errorf("offline %s: %s %v", s, got, err)
		}
		f, st, err := off.OpenHeader(ctx, ref)
		if err != nil || st.Fetched != 0 || len(f.Tensors) == 0 {
			t.Errorf("offline header of %s: %v", s, err)
		} else {
			f.Close()
		}
	}
	if _, err := off.Resolve(ctx, Ref{Repo: hubtest.DraftRepo, Quant: "Q4_K_M"}, true, nil); !errors.Is(err, ErrNotCached) || !errors.Is(err, ErrOffline) {
		t.Errorf("offline, not cached: %v", err)
	}
	if _, err := off.Search(ctx, Query{Text: "factory"}); !errors.Is(err, ErrOffline) {
		t.Errorf("offline search: %v", err)
	}
	if _, err := off.Files(ctx, hubtest.DraftRepo, ""); !errors.Is(err, ErrOffline) {
		t.Errorf("offline files: %v", err)
	}
	if n := fx.hub.Requests("info") + fx.hub.Requests("resolve") + fx.hub.Requests("search"); n != requests {
		t.Errorf("offline mode sent %d requests", n-requests)
	}
}

func TestDiskSpace(t *testing.T) {
	fx := newFixture(t, draftQ8)
	c := fx.client(fx.cfg, WithFreeSpace(func(string) (int64, error) { return 1 << 20, nil }))
	_, err := fx.pullDraft(t, c, nil)
	if !errors.Is(err, ErrNoSpace) || !strings.Contains(err.Error(), "1.0 MiB is free") {
		t.Errorf("short of space: %v", err)
	}
	if fx.hub.Requests("cdn") != 0 {
		t.Error("downloaded with no room for the file")
	}
}

// Cancelling a slow download keeps the partial file; the next pull resumes.
func TestPullCancelAndResume(t *testing.T) {
	fx := newFixture(t, draftQ8)
	fx.hub.SetFaults(hubtest.Faults{BytesPerSecond: 4 << 20})
	ctx, cancel := context.WithCancel(context.Background())
	ref := Ref{Repo: hubtest.DraftRepo, File: draftQ8}
	_, err := fx.c.Resolve(ctx, ref, true, func(p Progress) {
		if p.Done > 500_000 {
			cancel()
		}
	})
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "kept for resuming") {
		t.Fatalf("cancelled pull: %v", err)
	}
	sum := fx.hub.SHA256(hubtest.DraftRepo, draftQ8)
	st, err := os.Stat(filepath.Join(fx.c.RepoDir(hubtest.DraftRepo), "blobs", sum+".incomplete"))
	if err != nil || st.Size() == 0 {
		t.Fatalf("no partial file kept: %v", err)
	}
	if _, err := fx.c.Cached(ref); !errors.Is(err, ErrNotCached) {
		t.Errorf("a partial download counts as cached: %v", err)
	}
	fx.hub.SetFaults(hubtest.Faults{})
	p, err := fx.pullDraft(t, fx.c, nil)
	if err != nil {
		t.Fatal(err)
	}
	fx.checkCached(t, p)
	if r := fx.hub.Ranges(); r[len(r)-1] == "" {
		t.Errorf("the second pull started over: %q", r)
	}
	f, err := gguf.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
}

// A server that goes quiet mid-body is given up on after the stall timeout
// and the download resumes.
func TestPullStalledConnection(t *testing.T) {
	fx := newFixture(t, draftQ8)
	fx.hub.SetFaults(hubtest.Faults{Drops: 2, DropAfter: 1 << 20, Stall: true})
	c := fx.client(fx.cfg, WithStallTimeout(100*time.Millisecond))
	var notes []string
	ref := Ref{Repo: hubtest.DraftRepo, File: draftQ8}
	p, err := c.Resolve(context.Background(), ref, true, func(pr Progress) {
		if pr.Note != "" {
			notes = append(notes, pr.Note)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	fx.checkCached(t, p)
	if want := []string{"", "bytes=1048576-", "bytes=2097152-"}; !slices.Equal(fx.hub.Ranges(), want) {
		t.Errorf("ranges %q, want %q", fx.hub.Ranges(), want)
	}
	// Header reads stall the same way.
	fx.hub.SetFaults(hubtest.Faults{Drops: 1, DropAfter: 1000, Stall: true})
	rf, err := c.Files(context.Background(), hubtest.DraftRepo, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.Header(context.Background(), hubtest.DraftRepo, rf.Commit, rf.Models[0]); err != nil {
		t.Errorf("header after a stall: %v", err)
	}
}
