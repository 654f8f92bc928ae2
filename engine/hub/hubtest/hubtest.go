// Package hubtest is a fake Hugging Face Hub for tests and the screenshot
// script. It serves real GGUF files with the Hub's JSON shapes (model
// search, model info with LFS blobs), resolve URLs that redirect to a CDN
// path honouring Range as the real CDN does, gated repositories, and
// faults to inject: 500s, connections dropped mid-body, Range ignored,
// wrong checksums in the listing, slow links.
package hubtest

import (
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Repo is a model repository to serve.
type Repo struct {
	ID    string
	Files []RepoFile
	// Gated repositories list their files to anyone but serve them only
	// with the hub's token.
	Gated            bool
	Downloads, Likes int64
	LastModified     time.Time
}

// RepoFile is one file of a Repo: its path in the repository and the local
// file whose bytes it serves.
type RepoFile struct {
	Path, Local string
}

// Faults are failures the hub injects until they are used up or changed.
type Faults struct {
	Status500 int   // the next N requests of any kind answer 500
	Drops     int   // the next N file downloads end the connection...
	DropAfter int64 // ...after this many bytes of the body
	Stall     bool  // ...or, instead, stop sending and keep it open
	NoRange   bool  // downloads ignore Range and send the whole file
	WrongSHA  bool  // listings give a wrong SHA-256 for every file
	// BytesPerSecond slows file bodies down (0: full speed).
	BytesPerSecond int64
}

// Hub is the fake Hub; serve it with httptest.NewServer or http.Serve.
type Hub struct {
	token string
	repos map[string]*repo

	mu       sync.Mutex
	faults   Faults
	served   int64          // file body bytes written
	requests map[string]int // by kind: search, info, resolve, cdn
	ranges   []string       // Range headers of file requests, in order
}

type repo struct {
	Repo
	commit string
	files  []file
}

type file struct {
	RepoFile
	size   int64
	sha256 string
	blobID string
}

// New is a hub serving repos; token is the one gated repositories accept.
func New(token string, repos ...Repo) (*Hub, error) {
	h := &Hub{token: token, repos: map[string]*repo{}, requests: map[string]int{}}
	for _, r := range repos {
		sum := sha1.Sum([]byte("commit of " + r.ID))
		rp := &repo{Repo: r, commit: hex.EncodeToString(sum[:])}
		for _, f := range r.Files {
			fl, err := describe(f)
			if err != nil {
				return nil, fmt.Errorf("hubtest: %s: %w", r.ID, err)
			}
			rp.files = append(rp.files, fl)
		}
		h.repos[r.ID] = rp
	}
	return h, nil
}

func describe(f RepoFile) (file, error) {
	in, err := os.Open(f.Local)
	if err != nil {
		return file{}, err
	}
	defer in.Close()
	s256, s1 := sha256.New(), sha1.New()
	st, err := in.Stat()
	if err != nil {
		return file{}, err
	}
	fmt.Fprintf(s1, "blob %d\x00", st.Size())
	if _, err := io.Copy(io.MultiWriter(s256, s1), in); err != nil {
		return file{}, err
	}
	return file{RepoFile: f, size: st.Size(), sha256: hex.EncodeToString(s256.Sum(nil)), blobID: hex.EncodeToString(s1.Sum(nil))}, nil
}

// SetFaults replaces the faults to inject.
func (h *Hub) SetFaults(f Faults) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.faults = f
}

// Served is how many bytes of file bodies the hub has sent.
func (h *Hub) Served() int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.served
}

// Requests is how many requests of a kind (search, info, resolve, cdn)
// the hub has answered.
func (h *Hub) Requests(kind string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.requests[kind]
}

// Ranges are the Range headers of file requests so far ("" for none).
func (h *Hub) Ranges() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.ranges)
}

// Commit is the commit id the hub gives repo.
func (h *Hub) Commit(repoID string) string {
	if r := h.repos[repoID]; r != nil {
		return r.commit
	}
	return ""
}

// SHA256 is the hash of a repository file's bytes.
func (h *Hub) SHA256(repoID, p string) string {
	if r := h.repos[repoID]; r != nil {
		for _, f := range r.files {
			if f.Path == p {
				return f.sha256
			}
		}
	}
	return ""
}

func (h *Hub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	if h.faults.Status500 > 0 {
		h.faults.Status500--
		h.mu.Unlock()
		http.Error(w, "injected failure", http.StatusInternalServerError)
		return
	}
	h.mu.Unlock()
	p := r.URL.Path
	switch {
	case p == "/api/models":
		h.count("search")
		h.search(w, r)
	case strings.HasPrefix(p, "/api/models/"):
		h.count("info")
		h.info(w, r, strings.TrimPrefix(p, "/api/models/"))
	case strings.HasPrefix(p, "/cdn/"):
		h.count("cdn")
		h.cdn(w, r, strings.TrimPrefix(p, "/cdn/"))
	case strings.Contains(p, "/resolve/"):
		h.count("resolve")
		h.resolve(w, r)
	default:
		notFound(w, "RepoNotFound")
	}
}

func (h *Hub) count(kind string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.requests[kind]++
}

func notFound(w http.ResponseWriter, code string) {
	w.Header().Set("X-Error-Code", code)
	http.Error(w, code, http.StatusNotFound)
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}

// searchItem is one result of GET /api/models as the Hub writes it.
type searchItem struct {
	MongoID      string   `json:"_id"`
	ID           string   `json:"id"`
	ModelID      string   `json:"modelId"`
	Author       string   `json:"author"`
	Likes        int64    `json:"likes"`
	Downloads    int64    `json:"downloads"`
	Private      bool     `json:"private"`
	Gated        any      `json:"gated"`
	Tags         []string `json:"tags"`
	PipelineTag  string   `json:"pipeline_tag"`
	LibraryName  string   `json:"library_name"`
	CreatedAt    string   `json:"createdAt"`
	LastModified string   `json:"lastModified"`
}

func (h *Hub) item(r *repo) searchItem {
	var g any = false
	if r.Gated {
		g = "manual"
	}
	owner, _, _ := strings.Cut(r.ID, "/")
	mod := r.LastModified
	if mod.IsZero() {
		mod = time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	}
	return searchItem{MongoID: r.commit[:24], ID: r.ID, ModelID: r.ID, Author: owner, Likes: r.Likes, Downloads: r.Downloads,
		Gated: g, Tags: []string{"gguf", "text-generation"}, PipelineTag: "text-generation", LibraryName: "gguf",
		CreatedAt: "2026-10-01T12:00:00.000Z", LastModified: mod.Format("2006-01-02T15:04:05.000Z")}
}

// search answers GET /api/models?search=&filter=gguf&sort=&direction=-1&limit=.
func (h *Hub) search(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	words := strings.Fields(strings.ToLower(q.Get("search")))
	var out []searchItem
	var matched []*repo
	for _, rp := range h.repos {
		id := strings.ToLower(rp.ID)
		ok := true
		for _, w := range words {
			ok = ok && strings.Contains(id, w)
		}
		if ok && (q.Get("filter") != "gguf" || hasGGUF(rp)) {
			matched = append(matched, rp)
		}
	}
	key := func(rp *repo) int64 {
		switch q.Get("sort") {
		case "likes":
			return rp.Likes
		case "lastModified":
			return rp.LastModified.Unix()
		}
		return rp.Downloads
	}
	slices.SortFunc(matched, func(a, b *repo) int {
		if c := int(key(b) - key(a)); c != 0 && q.Get("direction") == "-1" {
			return c
		} else if c != 0 {
			return -c
		}
		return strings.Compare(a.ID, b.ID)
	})
	limit, err := strconv.Atoi(q.Get("limit"))
	if err != nil || limit <= 0 {
		limit = 1000
	}
	for i, rp := range matched {
		if i == limit {
			break
		}
		out = append(out, h.item(rp))
	}
	if out == nil {
		out = []searchItem{}
	}
	writeJSON(w, out)
}

func hasGGUF(r *repo) bool {
	for _, f := range r.files {
		if strings.HasSuffix(f.Path, ".gguf") {
			return true
		}
	}
	return false
}

// info answers GET /api/models/OWNER/NAME[/revision/REV][?blobs=true].
func (h *Hub) info(w http.ResponseWriter, r *http.Request, rest string) {
	id, rev, _ := strings.Cut(rest, "/revision/")
	rp := h.repos[id]
	if rp == nil {
		notFound(w, "RepoNotFound")
		return
	}
	if rev != "" && rev != "main" && rev != rp.commit {
		notFound(w, "RevisionNotFound")
		return
	}
	blobs := r.URL.Query().Get("blobs") == "true"
	h.mu.Lock()
	wrong := h.faults.WrongSHA
	h.mu.Unlock()
	type lfs struct {
		SHA256      string `json:"sha256"`
		Size        int64  `json:"size"`
		PointerSize int    `json:"pointerSize"`
	}
	type sibling struct {
		Name   string `json:"rfilename"`
		BlobID string `json:"blobId,omitempty"`
		Size   int64  `json:"size,omitempty"`
		LFS    *lfs   `json:"lfs,omitempty"`
	}
	sibs := []sibling{{Name: ".gitattributes"}, {Name: "README.md"}}
	if blobs {
		sibs = []sibling{{Name: ".gitattributes", BlobID: strings.Repeat("a", 40), Size: 1519}, {Name: "README.md", BlobID: strings.Repeat("b", 40), Size: 312}}
	}
	for _, f := range rp.files {
		s := sibling{Name: f.Path}
		if blobs {
			sum := f.sha256
			if wrong {
				sum = strings.Repeat("0", 64)
			}
			s.BlobID, s.Size, s.LFS = strings.Repeat("c", 40), f.size, &lfs{SHA256: sum, Size: f.size, PointerSize: 135}
		}
		sibs = append(sibs, s)
	}
	it := h.item(rp)
	writeJSON(w, map[string]any{
		"_id": it.MongoID, "id": it.ID, "modelId": it.ModelID, "author": it.Author, "sha": rp.commit,
		"lastModified": it.LastModified, "private": false, "gated": it.Gated, "disabled": false,
		"downloads": it.Downloads, "likes": it.Likes, "library_name": "gguf", "tags": it.Tags,
		"pipeline_tag": it.PipelineTag, "createdAt": it.CreatedAt, "siblings": sibs,
	})
}

// resolve answers /OWNER/NAME/resolve/REV/PATH as the Hub does for LFS
// files: a redirect to the CDN with the file's commit, etag and size.
func (h *Hub) resolve(w http.ResponseWriter, r *http.Request) {
	before, after, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/resolve/")
	rp := h.repos[before]
	if rp == nil {
		notFound(w, "RepoNotFound")
		return
	}
	rev, fp, _ := strings.Cut(after, "/")
	if rev != "main" && rev != rp.commit {
		notFound(w, "RevisionNotFound")
		return
	}
	if rp.Gated {
		auth := r.Header.Get("Authorization")
		switch {
		case auth == "":
			w.Header().Set("X-Error-Code", "GatedRepo")
			http.Error(w, "Access to model "+rp.ID+" is restricted. You must have access to it and be authenticated to access it.", http.StatusUnauthorized)
			return
		case auth != "Bearer "+h.token:
			w.Header().Set("X-Error-Code", "GatedRepo")
			http.Error(w, "Access to model "+rp.ID+" is restricted and you are not in the authorized list.", http.StatusForbidden)
			return
		}
	}
	for _, f := range rp.files {
		if f.Path != fp {
			continue
		}
		w.Header().Set("X-Repo-Commit", rp.commit)
		w.Header().Set("X-Linked-Etag", `"`+f.sha256+`"`)
		w.Header().Set("X-Linked-Size", strconv.FormatInt(f.size, 10))
		w.Header().Set("ETag", `"`+f.blobID+`"`)
		w.Header().Set("Location", "/cdn/"+f.sha256+"?name="+path.Base(f.Path))
		w.WriteHeader(http.StatusFound)
		return
	}
	w.Header().Set("X-Repo-Commit", rp.commit)
	notFound(w, "EntryNotFound")
}

// cdn serves a file's bytes by its SHA-256, with the faults.
func (h *Hub) cdn(w http.ResponseWriter, r *http.Request, sum string) {
	var f *file
	for _, rp := range h.repos {
		for i := range rp.files {
			if rp.files[i].sha256 == sum {
				f = &rp.files[i]
			}
		}
	}
	if f == nil {
		http.NotFound(w, r)
		return
	}
	in, err := os.Open(f.Local)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	defer in.Close()
	h.mu.Lock()
	h.ranges = append(h.ranges, r.Header.Get("Range"))
	faults := h.faults
	drop := int64(-1)
	if h.faults.Drops > 0 && r.Method == http.MethodGet {
		h.faults.Drops--
		drop = h.faults.DropAfter
	}
	h.mu.Unlock()
	if faults.NoRange {
		r.Header.Del("Range")
	}
	fw := &faultWriter{ResponseWriter: w, h: h, drop: drop, stall: faults.Stall, rate: faults.BytesPerSecond, done: r.Context().Done()}
	http.ServeContent(fw, r, path.Base(f.Path), time.Time{}, in)
}

// faultWriter counts body bytes, slows them down and drops the connection.
type faultWriter struct {
	http.ResponseWriter
	h       *Hub
	drop    int64 // end the connection after this many bytes; -1: never
	stall   bool  // at drop, go quiet until the client gives up instead
	rate    int64
	written int64
	done    <-chan struct{}
}

func (f *faultWriter) Write(p []byte) (int, error) {
	var n int
	for len(p) > 0 {
		chunk := p
		if f.rate > 0 {
			chunk = p[:min(len(p), int(max(f.rate/20, 1)))]
		}
		if f.drop >= 0 && f.written+int64(len(chunk)) > f.drop {
			chunk = chunk[:f.drop-f.written]
		}
		k, err := f.ResponseWriter.Write(chunk)
		n += k
		f.written += int64(k)
		f.h.mu.Lock()
		f.h.served += int64(k)
		f.h.mu.Unlock()
		if err != nil {
			return n, err
		}
		p = p[k:]
		if f.drop >= 0 && f.written >= f.drop {
			if fl, ok := f.ResponseWriter.(http.Flusher); ok {
				fl.Flush()
			}
			if f.stall {
				<-f.done
			}
			panic(http.ErrAbortHandler) // the server closes the connection mid-body
		}
		if f.rate > 0 {
			select {
			case <-f.done:
				return n, http.ErrAbortHandler
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	return n, nil
}
