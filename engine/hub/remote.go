package hub

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/tandem-run/tandem/engine/gguf"
)

// HeaderStats says what reading a remote header cost.
type HeaderStats struct {
	Fetched  int64 `json:"fetched_bytes"` // bytes transferred, all parts
	Size     int64 `json:"size_bytes"`    // the model's size, all parts
	Requests int   `json:"requests"`
}

// Header reads model m's header and tensor index (every part of a split
// model) by HTTP range requests, without downloading tensor data. The
// File's Path is the first part's hf:// name; it has no tensor data.
func (c *Client) Header(ctx context.Context, repo, rev string, m Model) (*gguf.File, HeaderStats, error) {
	var st HeaderStats
	if err := checkRepo(repo); err != nil {
		return nil, st, err
	}
	rev = cmpOr(rev, "main")
	var parts []gguf.Part
	var readers []*rangeReader
	for _, p := range m.Parts {
		if err := checkPath(p.Path); err != nil {
			return nil, st, err
		}
		r := &rangeReader{ctx: ctx, c: c, url: c.resolveURL(repo, rev, p.Path), size: p.Size,
			name: repo + "/" + p.Path}
		readers = append(readers, r)
		parts = append(parts, gguf.Part{Name: Scheme + repo + "/" + p.Path, Size: p.Size, R: r})
		st.Size += p.Size
	}
	f, err := gguf.OpenParts(parts)
	for _, r := range readers {
		st.Fetched += r.fetched
		st.Requests += r.requests
		if r.err != nil {
			// The reader's own error says more than the decoder's
			// "truncated" that it caused.
			err = r.err
		}
	}
	if err != nil {
		return nil, st, err
	}
	return f, st, nil
}

// rangeReader is a remote file's prefix, fetched by range requests and
// grown as the GGUF decoder reads on: the header's length is unknown until
// its last tensor entry is parsed.
type rangeReader struct {
	ctx      context.Context
	c        *Client
	url      string
	name     string // repo/file, for errors
	size     int64
	buf      []byte // bytes [0, len(buf)) of the file
	fetched  int64
	requests int
	err      error // sticky: the first failure
}

func (r *rangeReader) ReadAt(p []byte, off int64) (int, error) {
	if r.err != nil {
		return 0, r.err
	}
	if off >= r.size {
		return 0, io.EOF
	}
	end := min(off+int64(len(p)), r.size)
	if end > int64(len(r.buf)) {
		if err := r.grow(end); err != nil {
			r.err = err
			return 0, err
		}
	}
	n := copy(p, r.buf[off:end])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// grow fetches at least up to byte need and half as much again as is held,
// so the number of requests grows with the logarithm of the header's size
// while the bytes fetched past its end stay under half of it. A connection
// dropped mid-range keeps what arrived and asks for the rest.
func (r *rangeReader) grow(need int64) error {
	if need > r.c.maxHeader {
		return fmt.Errorf("hub: %s: %w (%d MiB): the header and tensor index go on past it; a GGUF header this large is broken or hostile",
			r.name, ErrHeaderTooLarge, r.c.maxHeader>>20)
	}
	have := int64(len(r.buf))
	want := min(max(need, have+have/2, r.c.firstRange), r.size, r.c.maxHeader)
	wait := firstWait
	for failures := 0; int64(len(r.buf)) < want; {
		b, err := r.c.fetchRange(r.ctx, r.url, r.name, int64(len(r.buf)), want)
		r.requests++
		r.fetched += int64(len(b))
		r.buf = append(r.buf, b...)
		if err == nil {
			continue
		}
		if len(b) > 0 {
			failures, wait = 0, firstWait
		} else {
			failures++
		}
		if !errors.Is(err, errDropped) || failures > r.c.retries {
			return err
		}
		if err := r.c.sleep(r.ctx, wait); err != nil {
			return err
		}
		wait = min(2*wait, maxWait)
	}
	return nil
}

// errDropped is a connection that ended before the bytes asked for came.
var errDropped = errors.New("the connection dropped")

// fetchRange GETs bytes [from, to) of u; a server that answers a range
// request with the whole file is an error (ErrNoRange), and the body is
// not read.
func (c *Client) fetchRange(ctx context.Context, u, what string, from, to int64) ([]byte, error) {
	resp, g, err := c.guarded(ctx, http.MethodGet, u, http.Header{
		"Range":           {fmt.Sprintf("bytes=%d-%d", from, to-1)},
		"Accept-Encoding": {"identity"},
	})
	if err != nil {
		return nil, err
	}
	defer g.stop()
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusPartialContent:
	case http.StatusOK:
		return nil, fmt.Errorf("hub: %s: %w (HTTP 200 to a request for bytes %d-%d): reading the header would download the whole file; download it instead",
			what, ErrNoRange, from, to-1)
	default:
		return nil, c.statusError(resp, what)
	}
	start, _, err := parseContentRange(resp.Header.Get("Content-Range"))
	if err != nil || start != from {
		return nil, fmt.Errorf("hub: %s: asked for bytes from %d, got Content-Range %q: %w", what, from, resp.Header.Get("Content-Range"), ErrServer)
	}
	b, err := io.ReadAll(io.LimitReader(g.reader(resp.Body), to-from))
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if errors.Is(err, errDropped) {
			return b, fmt.Errorf("hub: %s: reading bytes %d-%d: %w", what, from, to-1, err)
		}
		return b, fmt.Errorf("hub: %s: reading bytes %d-%d: %w: %w: %w", what, from, to-1, ErrUnreachable, errDropped, err)
	}
	if int64(len(b)) != to-from {
		return b, fmt.Errorf("hub: %s: got %d of bytes %d-%d: %w: %w", what, len(b), from, to-1, ErrUnreachable, errDropped)
	}
	return b, nil
}

// parseContentRange reads "bytes START-END/TOTAL" (TOTAL may be *).
func parseContentRange(s string) (start, total int64, err error) {
	spec, ok := strings.CutPrefix(s, "bytes ")
	rng, tot, ok2 := strings.Cut(spec, "/")
	a, _, ok3 := strings.Cut(rng, "-")
	if !ok || !ok2 || !ok3 {
		return 0, 0, fmt.Errorf("hub: Content-Range %q", s)
	}
	if start, err = strconv.ParseInt(a, 10, 64); err != nil {
		return 0, 0, err
	}
	total = -1
	if tot != "*" {
		if total, err = strconv.ParseInt(tot, 10, 64); err != nil {
			return 0, 0, err
		}
	}
	return start, total, nil
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
