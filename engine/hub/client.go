package hub

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Errors a caller may tell apart. Every error of this package wraps one of
// these, a context error or an I/O error, and starts with "hub: ".
var (
	ErrOffline        = errors.New("offline mode (HF_HUB_OFFLINE) uses only files already in the cache")
	ErrUnreachable    = errors.New("the Hub cannot be reached")
	ErrNotFound       = errors.New("not found")
	ErrNeedsToken     = errors.New("a Hugging Face token is needed")
	ErrForbidden      = errors.New("the token is not allowed to read this")
	ErrServer         = errors.New("the Hub answered with an error")
	ErrNoGGUF         = errors.New("no GGUF files")
	ErrNoRange        = errors.New("the server ignores range requests")
	ErrHeaderTooLarge = errors.New("the GGUF header is larger than the cap")
	ErrChecksum       = errors.New("the download does not match the Hub's SHA-256")
	ErrNoSpace        = errors.New("not enough free disk space")
	ErrNotCached      = errors.New("not downloaded yet")
	ErrBadRef         = errors.New("not a Hub reference")
	ErrAmbiguous      = errors.New("the reference matches several models")
)

// Defaults of a Client.
const (
	DefaultRetries = 5
	// DefaultMaxHeader caps a remote header read: real vocabularies of
	// 256k tokens with merges make headers of 10-20 MB; hundreds of MB
	// would be a broken or hostile file.
	DefaultMaxHeader  = 128 << 20
	defaultFirstRange = 256 << 10
	firstWait         = time.Second
	maxWait           = 8 * time.Second
	maxRetryAfter     = time.Minute
	// DefaultStallTimeout ends a connection whose body stops arriving (or
	// whose response does not start) for this long; the transfer then
	// resumes like any dropped one.
	DefaultStallTimeout = 30 * time.Second
)

// Client talks to one Hub endpoint and keeps files in one cache.
type Client struct {
	cfg        Config
	hc         *http.Client
	sleep      func(ctx context.Context, d time.Duration) error
	retries    int
	maxHeader  int64
	firstRange int64
	stall      time.Duration
	freeSpace  func(dir string) (int64, error)
}

// Option changes a Client's defaults (tests inject clocks and limits).
type Option func(*Client)

// WithHTTPClient sends requests through hc.
func WithHTTPClient(hc *http.Client) Option { return func(c *Client) { c.hc = hc } }

// WithSleep replaces the wait between retries.
func WithSleep(sleep func(ctx context.Context, d time.Duration) error) Option {
	return func(c *Client) { c.sleep = sleep }
}

// WithRetries sets how many times a failed request (or a download that
// made no progress) is tried again.
func WithRetries(n int) Option { return func(c *Client) { c.retries = n } }

// WithMaxHeader caps how many bytes a remote header read may fetch.
func WithMaxHeader(n int64) Option { return func(c *Client) { c.maxHeader = n } }

// WithStallTimeout sets how long a response may go without a byte.
func WithStallTimeout(d time.Duration) Option { return func(c *Client) { c.stall = d } }

// WithFreeSpace replaces the free-disk-space probe (bytes free under dir;
// negative: unknown, no check).
func WithFreeSpace(f func(dir string) (int64, error)) Option {
	return func(c *Client) { c.freeSpace = f }
}

// New is a Client for cfg.
func New(cfg Config, opts ...Option) *Client {
	c := &Client{cfg: cfg, hc: defaultHTTP(), sleep: sleepCtx, retries: DefaultRetries,
		maxHeader: DefaultMaxHeader, firstRange: defaultFirstRange, stall: DefaultStallTimeout, freeSpace: freeSpace}
	for _, o := range opts {
		o(c)
	}
	hc := *c.hc
	hc.CheckRedirect = keepTokenHome
	c.hc = &hc
	return c
}

// keepTokenHome follows redirects but sends the token only to the host it
// was meant for: the Hub sends downloads on to a CDN on another host (Go
// itself would keep it for a subdomain such as cdn-lfs.huggingface.co).
func keepTokenHome(req *http.Request, via []*http.Request) error {
	if len(via) >= 10 {
		return errors.New("hub: stopped after 10 redirects")
	}
	if req.URL.Host != via[0].URL.Host {
		req.Header.Del("Authorization")
	}
	return nil
}

// Config is the client's configuration.
func (c *Client) Config() Config { return c.cfg }

// defaultHTTP is net/http's client with limits on connecting and on
// waiting for a response to start, so a dead host is an error, not a hang.
func defaultHTTP() *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.ResponseHeaderTimeout = DefaultStallTimeout
	t.TLSHandshakeTimeout = DefaultStallTimeout
	return &http.Client{Transport: t}
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// send makes a request, retrying network errors, 429 and 5xx with
// exponential backoff (or the server's Retry-After). The response returned
// has some other status; the caller closes its body.
func (c *Client) send(ctx context.Context, method, u string, header http.Header) (*http.Response, error) {
	if c.cfg.Offline {
		return nil, fmt.Errorf("hub: %s: %w", u, ErrOffline)
	}
	wait := firstWait
	for attempt := 0; ; attempt++ {
		req, err := http.NewRequestWithContext(ctx, method, u, nil)
		if err != nil {
			return nil, fmt.Errorf("hub: %w", err)
		}
		for k, v := range header {
			req.Header[k] = v
		}
		if c.cfg.Token != "" {
			req.Header.Set("Authorization", "Bearer "+c.cfg.Token)
		}
		resp, err := c.hc.Do(req)
		if err == nil && resp.StatusCode != http.StatusTooManyRequests && resp.StatusCode < 500 {
			return resp, nil
		}
		if ctx.Err() != nil {
			if resp != nil {
				resp.Body.Close()
			}
			return nil, ctx.Err()
		}
		pause := wait
		if resp != nil {
			if s, perr := strconv.Atoi(resp.Header.Get("Retry-After")); perr == nil && s > 0 {
				pause = min(time.Duration(s)*time.Second, maxRetryAfter)
			}
			if attempt >= c.retries {
				defer resp.Body.Close()
				return nil, c.statusError(resp, u)
			}
			io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
			resp.Body.Close()
		} else if attempt >= c.retries {
			return nil, fmt.Errorf("hub: %w (%s, tried %d times): %v", ErrUnreachable, hostOf(u), attempt+1, err)
		}
		if err := c.sleep(ctx, pause); err != nil {
			return nil, err
		}
		wait = min(2*wait, maxWait)
	}
}

// statusError explains a response that is not a success; what names the
// repository or file asked for.
func (c *Client) statusError(resp *http.Response, what string) error {
	code := resp.Header.Get("X-Error-Code")
	status := resp.StatusCode
	where := c.cfg.TokenFile
	switch {
	case status == http.StatusUnauthorized && c.cfg.Token != "":
		return fmt.Errorf("hub: %s: HTTP 401: %w: the token from %s was refused; make a new one at %s/settings/tokens",
			what, ErrForbidden, c.cfg.TokenFrom, c.cfg.Endpoint)
	case status == http.StatusUnauthorized, status == http.StatusForbidden && c.cfg.Token == "":
		return fmt.Errorf("hub: %s: HTTP %d: %w (the repository is gated or private, or does not exist): "+
			"make a read token at %s/settings/tokens and put it in HF_TOKEN or in %s",
			what, status, ErrNeedsToken, c.cfg.Endpoint, where)
	case status == http.StatusForbidden:
		return fmt.Errorf("hub: %s: HTTP 403: %w (token from %s): if the repository is gated, accept its terms on its page first",
			what, ErrForbidden, c.cfg.TokenFrom)
	case status == http.StatusNotFound:
		kind := "repository or file"
		switch code {
		case "RepoNotFound":
			kind = "repository"
		case "EntryNotFound":
			kind = "file"
		case "RevisionNotFound":
			kind = "revision"
		}
		return fmt.Errorf("hub: %s: HTTP 404: %s %w", what, kind, ErrNotFound)
	}
	msg := resp.Header.Get("X-Error-Message")
	if msg == "" {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 200))
		msg = strings.TrimSpace(string(b))
	}
	if msg != "" {
		msg = ": " + msg
	}
	return fmt.Errorf("hub: %s: %w: HTTP %d%s", what, ErrServer, status, msg)
}

func hostOf(u string) string {
	if p, err := url.Parse(u); err == nil && p.Host != "" {
		return p.Host
	}
	return u
}

var (
	repoPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9_.-]+$`)
	// revPattern keeps revisions to branch, tag and commit names that are
	// safe as a file name under refs/.
	revPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]*$`)
)

// checkRepo rejects ids that are not owner/name or could escape the cache
// folder ("--" separates owner and name there; the Hub forbids it in ids).
func checkRepo(repo string) error {
	if !repoPattern.MatchString(repo) || strings.Contains(repo, "--") || strings.Contains(repo, "..") {
		return fmt.Errorf("hub: %q: want a repository id like owner/name: %w", repo, ErrBadRef)
	}
	return nil
}

func checkRevision(rev string) error {
	if !revPattern.MatchString(rev) || strings.Contains(rev, "..") {
		return fmt.Errorf("hub: revision %q: %w", rev, ErrBadRef)
	}
	return nil
}

// checkPath rejects file paths that could leave a snapshot folder.
func checkPath(p string) error {
	if p == "" || strings.HasPrefix(p, "/") || strings.Contains(p, "\\") {
		return fmt.Errorf("hub: file %q: %w", p, ErrBadRef)
	}
	for _, seg := range strings.Split(p, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return fmt.Errorf("hub: file %q: %w", p, ErrBadRef)
		}
	}
	return nil
}

// escapePath escapes each segment of a repository file path.
func escapePath(p string) string {
	segs := strings.Split(p, "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	return strings.Join(segs, "/")
}

// resolveURL is where the Hub serves a file (redirecting to its CDN).
func (c *Client) resolveURL(repo, rev, file string) string {
	return c.cfg.Endpoint + "/" + repo + "/resolve/" + url.PathEscape(rev) + "/" + escapePath(file)
}
