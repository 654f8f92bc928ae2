package hub

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tandem-run/tandem/engine/hub/hubtest"
	"github.com/tandem-run/tandem/kernels/sharedtest"
)

// sleeps records the waits between retries instead of waiting.
type sleeps struct {
	mu sync.Mutex
	d  []time.Duration
}

func (s *sleeps) sleep(ctx context.Context, d time.Duration) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.d = append(s.d, d)
	return ctx.Err()
}

func (s *sleeps) all() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.d)
}

// fixture is a fake Hub serving some demo files and a client of it with a
// fresh cache.
type fixture struct {
	hub    *hubtest.Hub
	srv    *httptest.Server
	c      *Client
	cfg    Config
	sleeps *sleeps
	models string // shared/models
}

const token = "hf_testtoken"

// newFixture serves the demo repositories, keeping only the files named
// (all when none), plus a gated copy of the draft's Q4_K_M and a
// repository with no GGUF file.
func newFixture(t *testing.T, keep ...string) *fixture {
	t.Helper()
	dir := sharedtest.Path(t, "models")
	repos, err := hubtest.DemoRepos(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(keep) > 0 {
		for i := range repos {
			repos[i].Files = slices.DeleteFunc(repos[i].Files, func(f hubtest.RepoFile) bool { return !slices.Contains(keep, f.Path) })
		}
	}
	repos = append(repos,
		hubtest.Repo{ID: "tandem-demo/gated-GGUF", Gated: true, Files: []hubtest.RepoFile{{Path: "factory-draft-Q4_K_M.gguf", Local: filepath.Join(dir, "factory-draft-Q4_K_M.gguf")}}},
		hubtest.Repo{ID: "tandem-demo/no-gguf"})
	return serve(t, dir, repos...)
}

func serve(t *testing.T, models string, repos ...hubtest.Repo) *fixture {
	t.Helper()
	h, err := hubtest.New(token, repos...)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	fx := &fixture{hub: h, srv: srv, sleeps: &sleeps{}, models: models}
	home := t.TempDir()
	fx.cfg = Config{Endpoint: srv.URL, Cache: filepath.Join(home, "hub"), TokenFile: filepath.Join(home, "token")}
	fx.c = fx.client(fx.cfg)
	return fx
}

func (fx *fixture) client(cfg Config, opts ...Option) *Client {
	return New(cfg, append([]Option{WithHTTPClient(fx.srv.Client()), WithSleep(fx.sleeps.sleep)}, opts...)...)
}

func (fx *fixture) local(name string) []byte {
	b, err := os.ReadFile(filepath.Join(fx.models, name))
	if err != nil {
		panic(err)
	}
	return b
}

func TestSearch(t *testing.T) {
	fx := newFixture(t, "factory-draft-Q8_0.gguf", "factory-target-Q4_K_M.gguf", "factory-eagle3-F16.gguf")
	for _, tc := range []struct {
		q    Query
		want []string
	}{
		{Query{Text: "factory"}, []string{hubtest.TargetRepo, hubtest.DraftRepo, hubtest.Eagle3Repo}},
		{Query{Text: "factory", Sort: SortLikes}, []string{hubtest.TargetRepo, hubtest.Eagle3Repo, hubtest.DraftRepo}},
		{Query{Text: "factory", Sort: SortUpdated, Limit: 2}, []string{hubtest.Eagle3Repo, hubtest.TargetRepo}},
		{Query{Text: "Eagle3 factory"}, []string{hubtest.Eagle3Repo}},
		{Query{Text: "no such model"}, nil},
	} {
		repos, err := fx.c.Search(context.Background(), tc.q)
		if err != nil {
			t.Fatalf("%+v: %v", tc.q, err)
		}
		var ids []string
		for _, r := range repos {
			ids = append(ids, r.ID)
		}
		if !slices.Equal(ids, tc.want) {
			t.Errorf("%+v: %v, want %v", tc.q, ids, tc.want)
		}
	}
	repos, _ := fx.c.Search(context.Background(), Query{Text: "gated"})
	if len(repos) != 1 || repos[0].Gated == "" || repos[0].Downloads != 0 || repos[0].LastModified.IsZero() {
		t.Errorf("gated repo: %+v", repos)
	}
}

func TestFiles(t *testing.T) {
	fx := newFixture(t)
	rf, err := fx.c.Files(context.Background(), hubtest.TargetRepo, "")
	if err != nil {
		t.Fatal(err)
	}
	var quants []string
	for _, m := range rf.Models {
		quants = append(quants, m.Quant)
		if len(m.Parts) != 1 || m.Parts[0].SHA256 != fx.hub.SHA256(hubtest.TargetRepo, m.Name) || m.Size != int64(len(fx.local(m.Name))) {
			t.Errorf("%s: %+v", m.Name, m)
		}
	}
	if !slices.Equal(quants, []string{"Q4_K_M", "Q8_0", "F16"}) || rf.Commit != fx.hub.Commit(hubtest.TargetRepo) {
		t.Errorf("quants %v (want smallest first), commit %s", quants, rf.Commit)
	}
	rf, err = fx.c.Files(context.Background(), hubtest.DraftRepo, "")
	if err != nil || len(rf.Models) != 14 {
		t.Fatalf("draft repo: %v models, %v", len(rf.Models), err)
	}
	m, err := rf.Find(Ref{Quant: "IQ4_XS"})
	if err != nil || m.Name != "factory-draft-IQ4_XS.gguf" {
		t.Errorf("find IQ4_XS: %v %v", m.Name, err)
	}
	if _, err := rf.Find(Ref{Quant: "Q3_K_S"}); !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "Q4_K_M") {
		t.Errorf("missing quant: %v", err)
	}
	if _, err := rf.Find(Ref{}); !errors.Is(err, ErrAmbiguous) {
		t.Errorf("no quant in a repo of many: %v", err)
	}

	for _, tc := range []struct {
		repo string
		want error
	}{
		{"tandem-demo/no-gguf", ErrNoGGUF},
		{"tandem-demo/missing", ErrNotFound},
		{"../etc", ErrBadRef},
		{"a--b/c", ErrBadRef},
	} {
		_, err := fx.c.Files(context.Background(), tc.repo, "")
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.repo, err, tc.want)
		}
	}
}

func TestQuantAndGrouping(t *testing.T) {
	for name, want := range map[string]string{
		"Qwen3-8B-Q4_K_M.gguf":                  "Q4_K_M",
		"qwen3-8b-q4_k_m.gguf":                  "Q4_K_M",
		"Llama-3.1-8B-Instruct-IQ4_XS.gguf":     "IQ4_XS",
		"model-UD-Q4_K_XL-00001-of-00002.gguf":  "Q4_K_XL",
		"gemma-3-27b-it-BF16.gguf":              "BF16",
		"mmproj-F16.gguf":                       "F16",
		"phi-4.Q8_0.gguf":                       "Q8_0",
		"tiny.gguf":                             "",
		"Q4_K_M/Big-Q4_K_M-00002-of-00003.gguf": "Q4_K_M",
	} {
		if got := QuantOf(name); got != want {
			t.Errorf("QuantOf(%q) = %q, want %q", name, got, want)
		}
	}
	f := func(p string, size int64) File { return File{Path: p, Size: size, SHA256: strings.Repeat("1", 64)} }
	models, incomplete := groupModels([]File{
		f("Big-Q4_K_M-00002-of-00002.gguf", 5), f("Big-Q4_K_M-00001-of-00002.gguf", 7),
		f("Half-Q8_0-00001-of-00003.gguf", 1), f("Half-Q8_0-00003-of-00003.gguf", 1),
		f("small-Q2_K.gguf", 3),
	})
	if len(models) != 2 || models[0].Name != "small-Q2_K.gguf" || models[1].Name != "Big-Q4_K_M-00001-of-00002.gguf" ||
		models[1].Size != 12 || models[1].Quant != "Q4_K_M" || models[1].Parts[1].Path != "Big-Q4_K_M-00002-of-00002.gguf" {
		t.Errorf("models %+v", models)
	}
	if len(incomplete) != 1 || !strings.Contains(incomplete[0], "2 of 3") {
		t.Errorf("incomplete %v", incomplete)
	}
}

func TestParseRef(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Ref
		bad  bool
	}{
		{in: "hf://owner/name/file-Q4_K_M.gguf", want: Ref{Repo: "owner/name", File: "file-Q4_K_M.gguf"}},
		{in: "hf://owner/name/sub/dir/f.gguf", want: Ref{Repo: "owner/name", File: "sub/dir/f.gguf"}},
		{in: "hf://owner/name:q4_k_m", want: Ref{Repo: "owner/name", Quant: "Q4_K_M"}},
		{in: "owner/name:Q8_0", want: Ref{Repo: "owner/name", Quant: "Q8_0"}},
		{in: "owner/name:model.gguf", want: Ref{Repo: "owner/name", File: "model.gguf"}},
		{in: "hf://owner/name@v1.0:Q8_0", want: Ref{Repo: "owner/name", Revision: "v1.0", Quant: "Q8_0"}},
		{in: "hf://owner/name", want: Ref{Repo: "owner/name"}},
		{in: "owner/name", bad: true},
		{in: "hf://owner/name/../../etc/passwd.gguf", bad: true},
		{in: "hf://owner/name/readme.md", bad: true},
		{in: "hf://own--er/name:Q4_0", bad: true},
		{in: "hf://owner/name@../x:Q4_0", bad: true},
		{in: "hf://owner", bad: true},
		{in: "hf://owner/name:", bad: true},
	} {
		got, err := ParseRef(tc.in)
		if tc.bad {
			if err == nil {
				t.Errorf("%q parsed as %+v", tc.in, got)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%q: %+v %v, want %+v", tc.in, got, err, tc.want)
		}
		if again, err := ParseRef(got.String()); err != nil || again != got {
			t.Errorf("%q: String %q reads back as %+v %v", tc.in, got.String(), again, err)
		}
	}
	for s, want := range map[string]bool{
		"hf://a/b": true, "a/b:Q4_K_M": true, "models/x.gguf": false, "./a/b:c": false, "/a/b:c": false, "x.gguf": false,
	} {
		if IsRef(s) != want {
			t.Errorf("IsRef(%q) = %v", s, !want)
		}
	}
}

func TestConfigFromEnv(t *testing.T) {
	home := t.TempDir()
	tokenFile := filepath.Join(home, ".cache", "huggingface", "token")
	if err := os.MkdirAll(filepath.Dir(tokenFile), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(tokenFile, []byte("hf_fromfile\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		env  map[string]string
		want Config
	}{
		{map[string]string{}, Config{Endpoint: DefaultEndpoint, Cache: home + "/.cache/huggingface/hub",
			Token: "hf_fromfile", TokenFrom: tokenFile, TokenFile: tokenFile}},
		{map[string]string{"HF_ENDPOINT": "https://mirror.example/", "HF_TOKEN": "hf_env", "HF_HUB_OFFLINE": "yes"},
			Config{Endpoint: "https://mirror.example", Cache: home + "/.cache/huggingface/hub", Token: "hf_env", TokenFrom: "HF_TOKEN",
				TokenFile: tokenFile, Offline: true}},
		{map[string]string{"HF_HOME": "~/hf", "HF_HUB_OFFLINE": "0"}, Config{Endpoint: DefaultEndpoint, Cache: home + "/hf/hub",
			TokenFile: home + "/hf/token"}},
		{map[string]string{"XDG_CACHE_HOME": "/x", "HF_HUB_CACHE": "/y/hub", "HF_TOKEN_PATH": "/nonexistent/tok"},
			Config{Endpoint: DefaultEndpoint, Cache: "/y/hub", TokenFile: "/nonexistent/tok"}},
	} {
		tc.env["HOME"] = home
		got := ConfigFromEnv(func(k string) string { return tc.env[k] })
		if got != tc.want {
			t.Errorf("%v:\n got %+v\nwant %+v", tc.env, got, tc.want)
		}
	}
}

// The token goes to the Hub, not to the CDN it redirects downloads to.
func TestTokenStaysWithTheHub(t *testing.T) {
	var cdnAuth, hubAuth string
	cdn := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cdnAuth = r.Header.Get("Authorization")
		http.Error(w, "stop here", http.StatusTeapot)
	}))
	defer cdn.Close()
	hubSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hubAuth = r.Header.Get("Authorization")
		http.Redirect(w, r, cdn.URL+"/blob", http.StatusFound)
	}))
	defer hubSrv.Close()
	c := New(Config{Endpoint: hubSrv.URL, Token: "hf_secret", Cache: t.TempDir()}, WithRetries(0))
	c.fetchRange(context.Background(), c.resolveURL("o/n", "main", "f.gguf"), "f", 0, 10)
	if hubAuth != "Bearer hf_secret" || cdnAuth != "" {
		t.Errorf("the Hub got %q, the CDN got %q", hubAuth, cdnAuth)
	}
}
