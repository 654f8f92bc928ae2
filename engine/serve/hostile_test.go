package serve

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The tests of this file are the attacks of issue 19 that the server must
// withstand: bodies that never arrive, clients without the key, web pages
// of other sites, requests that fill the queue from one address.

// listening runs s.Serve on a loopback port until the test ends and returns
// the address.
func listening(t *testing.T, s *Server) string {
	t.Helper()
	ln, err := Listen("127.0.0.1:0", s.opt.APIKey)
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- s.Serve(ctx, ln) }()
	t.Cleanup(func() {
		stop()
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return ln.Addr().String()
}

// rawRequest opens a connection and writes head (a request line and
// headers, "\n" for each line end) and then body, and nothing more.
func rawRequest(t *testing.T, addr, head, body string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := io.WriteString(c, strings.ReplaceAll(head, "\n", "\r\n")+"\r\n"+body); err != nil {
		t.Fatal(err)
	}
	return c
}

// answerOn reads the response that arrives on c. The deadline only keeps a
// server that never answers from stalling the test: it is far beyond any
// timeout the server is given here.
func answerOn(c net.Conn) (*http.Response, string, error) {
	c.SetReadDeadline(time.Now().Add(20 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return nil, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b), nil
}

// TestAuthBeforeBody: with an API key, a request without it is answered
// 401 as soon as its headers are in, without waiting for a body that is
// announced but never sent, and the connection is closed.
func TestAuthBeforeBody(t *testing.T) {
	opt := testOptions()
	opt.APIKey = "sekrit"
	g := &echo{}
	addr := listening(t, New(g, opt))
	for _, tc := range []struct {
		name, head string
		status     int
	}{
		{"no key", "POST /v1/chat/completions HTTP/1.1\nHost: 127.0.0.1\nContent-Type: application/json\nContent-Length: 200000\n", 401},
		{"wrong key", "POST /v1/completions HTTP/1.1\nHost: 127.0.0.1\nAuthorization: Bearer guess\nContent-Length: 200000\n", 401},
		{"chunked", "POST /v1/completions HTTP/1.1\nHost: 127.0.0.1\nTransfer-Encoding: chunked\n", 401},
		{"no route", "POST /v1/embeddings HTTP/1.1\nHost: 127.0.0.1\nContent-Length: 200000\n", 404},
		{"wrong method", "PUT /v1/completions HTTP/1.1\nHost: 127.0.0.1\nContent-Length: 200000\n", 405},
	} {
		c := rawRequest(t, addr, tc.head, `{"prompt":"the rest never com`)
		resp, body, err := answerOn(c)
		if err != nil {
			t.Errorf("%s: no answer while the body is pending: %v", tc.name, err)
			continue
		}
		if resp.StatusCode != tc.status || !resp.Close || decodeJSON[errorEnvelope](t, []byte(body)).Error.Message == "" {
			t.Errorf("%s: %d (close %v) %s", tc.name, resp.StatusCode, resp.Close, body)
		}
	}
	if len(g.reqs) != 0 {
		t.Errorf("%d requests reached the generator", len(g.reqs))
	}
}

// TestBodyTimeout: a body that stops arriving is answered 408 once
// Options.BodyTimeout has passed, and the generator never sees it; a slow
// but complete body is served.
func TestBodyTimeout(t *testing.T) {
	opt := testOptions()
	opt.BodyTimeout = 300 * time.Millisecond
	g := &echo{}
	addr := listening(t, New(g, opt))
	c := rawRequest(t, addr, "POST /v1/completions HTTP/1.1\nHost: 127.0.0.1\nContent-Length: 100\n", `{"prompt":"tr`)
	resp, body, err := answerOn(c)
	if err != nil {
		t.Fatalf("no answer to a stalled body: %v", err)
	}
	if resp.StatusCode != http.StatusRequestTimeout || !resp.Close || !strings.Contains(body, "did not arrive") {
		t.Errorf("stalled body: %d (close %v) %s", resp.StatusCode, resp.Close, body)
	}
	if len(g.reqs) != 0 {
		t.Errorf("a stalled request reached the generator")
	}

	// The deadline is lifted once the body is in: the connection's read
	// side stays quiet for the rest of a generation that outlasts it.
	slow := &echo{gate: make(chan struct{})}
	addr = listening(t, New(slow, opt))
	done := make(chan result, 1)
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	go func() {
		resp, err := client.Post("http://"+addr+"/v1/completions", "application/json", strings.NewReader(`{"prompt":"a b c","stream":true}`))
		if err != nil {
			done <- result{err: err}
			return
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		done <- result{status: resp.StatusCode, body: b, err: err}
	}()
	for range 3 {
		time.Sleep(opt.BodyTimeout / 2) // the generation outlives the body's timeout
		slow.gate <- struct{}{}
	}
	r := <-done
	if got, err := answer(r.body, true); r.err != nil || r.status != 200 || err != nil || got != "a b c" {
		t.Errorf("a generation longer than the body timeout: %d %q %v %v", r.status, got, err, r.err)
	}
}

// TestClientLimit: one address may have MaxClientRequests requests in
// flight; the next is answered 429 before its body is read, other
// addresses are still served, and a slot frees when a request ends.
func TestClientLimit(t *testing.T) {
	opt := testOptions()
	opt.MaxClientRequests = 2
	s, srv, g := blockedServer(t, opt)
	addr := strings.TrimPrefix(srv.URL, "http://")
	a := send(t.Context(), srv, "running", true)
	<-g.started
	b := send(t.Context(), srv, "waiting", false)
	waitFor(func() bool { return s.queue.waiting() == 1 })

	c := rawRequest(t, addr, "POST /v1/completions HTTP/1.1\nHost: 127.0.0.1\nContent-Length: 5000\n", `{"prompt":`)
	resp, body, err := answerOn(c)
	if err != nil {
		t.Fatalf("third request from the same address: no answer: %v", err)
	}
	if e := decodeJSON[errorEnvelope](t, []byte(body)).Error; resp.StatusCode != 429 || e.Code == nil || *e.Code != "client_limit" || resp.Header.Get("Retry-After") == "" || !resp.Close {
		t.Errorf("third request from the same address: %d %s", resp.StatusCode, body)
	}

	// Another address is not held to loopback's count.
	rec := httptest.NewRecorder()
	req := httptest.NewRequest("GET", "/v1/models", nil)
	req.RemoteAddr, req.Host = "192.0.2.7:4000", "192.0.2.1"
	s.ServeHTTP(rec, req)
	if rec.Code != 200 {
		t.Errorf("another address: %d %s", rec.Code, rec.Body)
	}
	close(g.gate)
	for _, ch := range []<-chan result{a, b} {
		if r := <-ch; r.status != 200 {
			t.Errorf("admitted request: %d %s %v", r.status, r.body, r.err)
		}
	}
	if status, body, _ := call(t, srv, "POST", "/v1/completions", `{"prompt":"after"}`); status != 200 {
		t.Errorf("once the others ended: %d %s", status, body)
	}
}

func TestClientKey(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		same bool
	}{
		{"127.0.0.1:1000", "127.0.0.1:2000", true},
		{"127.0.0.1:1000", "127.0.0.2:1000", false},
		{"[::ffff:192.0.2.1]:80", "192.0.2.1:81", true},
		{"[2001:db8::1]:80", "[2001:db8::ffff:2]:81", true}, // one host's /64
		{"[2001:db8::1]:80", "[2001:db8:0:1::1]:80", false},
		{"[fe80::1%eth0]:80", "[fe80::2%eth1]:80", true},
	} {
		if got := clientKey(tc.a) == clientKey(tc.b); got != tc.same {
			t.Errorf("clientKey(%s) == clientKey(%s): %v", tc.a, tc.b, got)
		}
	}
	if k := clientKey("@"); k != (netip.Prefix{}) {
		t.Errorf("an address that is not IP:port: %v", k)
	}
}

// fdsFor skips a test that needs more file descriptors than the process
// may open.
func fdsFor(t *testing.T, n uint64) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err == nil && lim.Cur < n {
		t.Skipf("needs %d file descriptors; the limit is %d", n, lim.Cur)
	}
}

// TestSlowBodiesDoNotStopAClient: a thousand loopback connections that
// announce a body and send almost none of it, without the key, are each
// answered 401 at once, and a client with the key is served meanwhile.
// Without a key, where nothing tells the slow clients from others, they
// hold at most MaxClientRequests requests and each of those ends at the
// body timeout.
func TestSlowBodiesDoNotStopAClient(t *testing.T) {
	const slow = 1000
	fdsFor(t, 2*slow+100) // both ends of each connection are in this process
	head := "POST /v1/chat/completions HTTP/1.1\nHost: 127.0.0.1\nContent-Type: application/json\nContent-Length: 200000\n"

	t.Run("with a key", func(t *testing.T) {
		opt := testOptions()
		opt.APIKey = "sekrit"
		addr := listening(t, New(&echo{}, opt))
		conns := make([]net.Conn, slow)
		for i := range conns {
			conns[i] = rawRequest(t, addr, head, `{"messages":[`)
		}
		status, body := post(t, addr, "sekrit", `{"messages":[{"role":"user","content":"served anyway"}]}`)
		if status != 200 || !strings.Contains(body, "served anyway") {
			t.Errorf("the client with the key: %d %s", status, body)
		}
		counts := answers(conns)
		if counts[401] != slow {
			t.Errorf("answers to the slow clients: %v, want %d × 401", counts, slow)
		}
	})

	t.Run("without a key", func(t *testing.T) {
		opt := testOptions()
		opt.MaxClientRequests = 16
		opt.BodyTimeout = time.Second
		addr := listening(t, New(&echo{}, opt))
		conns := make([]net.Conn, slow)
		for i := range conns {
			conns[i] = rawRequest(t, addr, head, `{"messages":[`)
		}
		counts := answers(conns)
		// How many reach the body timeout depends on how fast the
		// connections open: slots free as earlier ones time out.
		if counts[408] == 0 || counts[429] == 0 || counts[408]+counts[429] != slow {
			t.Errorf("answers to the slow clients: %v, want 408s for those admitted and 429s", counts)
		}
		if status, body := post(t, addr, "", `{"messages":[{"role":"user","content":"served after"}]}`); status != 200 {
			t.Errorf("a client once the slow ones ended: %d %s", status, body)
		}
	})
}

// post sends one chat request on a connection of its own.
func post(t *testing.T, addr, key, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), "POST", "http://"+addr+"/v1/chat/completions", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// answers reads the response on each connection, counting statuses (0: no
// answer).
func answers(conns []net.Conn) map[int]int {
	var mu sync.Mutex
	counts := map[int]int{}
	var wg sync.WaitGroup
	for _, c := range conns {
		wg.Go(func() {
			resp, _, err := answerOn(c)
			status := 0
			if err == nil {
				status = resp.StatusCode
			}
			mu.Lock()
			counts[status]++
			mu.Unlock()
		})
	}
	wg.Wait()
	return counts
}

// TestHostAndOrigin: without a key the server answers only Host names that
// a DNS rebinding cannot produce, and no web page of another origin unless
// allowed; an allowed origin gets CORS headers and its preflight answered.
func TestHostAndOrigin(t *testing.T) {
	type check struct {
		method, path, body string
		header             []string
		status             int
		code               string // of the error, if any
		acao               string // Access-Control-Allow-Origin wanted
	}
	chat := `{"messages":[{"role":"user","content":"hi"}]}`
	for _, tc := range []struct {
		name   string
		opt    func(*Options)
		checks []check
	}{
		{"loopback names", nil, []check{
			{"POST", "/v1/chat/completions", chat, []string{"Host", "127.0.0.1:8080"}, 200, "", ""},
			{"POST", "/v1/chat/completions", chat, []string{"Host", "localhost:8080"}, 200, "", ""},
			{"POST", "/v1/chat/completions", chat, []string{"Host", "LOCALHOST."}, 200, "", ""},
			{"POST", "/v1/chat/completions", chat, []string{"Host", "app.localhost:8080"}, 200, "", ""},
			{"POST", "/v1/chat/completions", chat, []string{"Host", "[::1]:8080"}, 200, "", ""},
			{"GET", "/v1/models", "", []string{"Host", "attacker.example:8080"}, 403, "host_not_allowed", ""},
			{"GET", "/health", "", []string{"Host", "attacker.example"}, 403, "host_not_allowed", ""},
			{"POST", "/v1/chat/completions", chat, []string{"Host", "localhost.attacker.example"}, 403, "host_not_allowed", ""},
		}},
		{"the configured host", func(o *Options) { o.Hosts = []string{"GPUBox.lan"} }, []check{
			{"POST", "/v1/chat/completions", chat, []string{"Host", "gpubox.lan:8080"}, 200, "", ""},
			{"POST", "/v1/chat/completions", chat, []string{"Host", "other.lan:8080"}, 403, "host_not_allowed", ""},
		}},
		{"a key makes the name moot", func(o *Options) { o.APIKey = "k" }, []check{
			{"POST", "/v1/chat/completions", chat, []string{"Host", "gpubox.lan:8080"}, 401, "invalid_api_key", ""},
			{"POST", "/v1/chat/completions", chat, []string{"Host", "gpubox.lan:8080", "Authorization", "Bearer k"}, 200, "", ""},
		}},
		{"cross-site", nil, []check{
			{"POST", "/v1/completions", `{"prompt":"x"}`, []string{"Origin", "http://attacker.example", "Content-Type", "text/plain"}, 403, "origin_not_allowed", ""},
			{"GET", "/v1/models", "", []string{"Origin", "http://attacker.example"}, 403, "origin_not_allowed", ""},
			{"POST", "/v1/completions", `{"prompt":"x"}`, []string{"Origin", "null"}, 403, "origin_not_allowed", ""},
			{"POST", "/v1/completions", `{"prompt":"x"}`, []string{"Sec-Fetch-Site", "cross-site"}, 403, "origin_not_allowed", ""},
			{"OPTIONS", "/v1/completions", "", []string{"Origin", "http://attacker.example", "Access-Control-Request-Method", "POST"}, 403, "origin_not_allowed", ""},
			{"POST", "/v1/completions", `{"prompt":"x"}`, []string{"Sec-Fetch-Site", "none"}, 200, "", ""},
			{"POST", "/v1/completions", `{"prompt":"x"}`, []string{"Host", "127.0.0.1:8080", "Origin", "http://127.0.0.1:8080"}, 200, "", ""}, // same origin
		}},
		{"allowed origin", func(o *Options) { o.AllowOrigins = []string{"http://localhost:3000"} }, []check{
			{"POST", "/v1/completions", `{"prompt":"x"}`, []string{"Origin", "http://localhost:3000"}, 200, "", "http://localhost:3000"},
			{"POST", "/v1/completions", `{"prompt":""}`, []string{"Origin", "http://localhost:3000"}, 400, "", "http://localhost:3000"},
			{"OPTIONS", "/v1/chat/completions", "", []string{"Origin", "http://localhost:3000", "Access-Control-Request-Method", "POST",
				"Access-Control-Request-Headers", "authorization,content-type,x-stainless-lang"}, 204, "", "http://localhost:3000"},
			{"POST", "/v1/completions", `{"prompt":"x"}`, []string{"Origin", "http://localhost:3001"}, 403, "origin_not_allowed", ""},
		}},
		{"any origin", func(o *Options) { o.AllowOrigins = []string{"*"} }, []check{
			{"POST", "/v1/completions", `{"prompt":"x"}`, []string{"Origin", "https://chat.example"}, 200, "", "*"},
			{"GET", "/v1/models", "", []string{"Origin", "https://chat.example", "Host", "attacker.example"}, 403, "host_not_allowed", ""},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opt := testOptions()
			if tc.opt != nil {
				tc.opt(&opt)
			}
			g := &echo{}
			srv := startServer(t, g, opt)
			for _, c := range tc.checks {
				req, err := http.NewRequestWithContext(t.Context(), c.method, srv.URL+c.path, strings.NewReader(c.body))
				if err != nil {
					t.Fatal(err)
				}
				for i := 0; i+1 < len(c.header); i += 2 {
					if c.header[i] == "Host" {
						req.Host = c.header[i+1]
					} else {
						req.Header.Set(c.header[i], c.header[i+1])
					}
				}
				before := len(g.reqs)
				resp, err := srv.Client().Do(req)
				if err != nil {
					t.Fatal(err)
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				what := fmt.Sprintf("%s %s %q", c.method, c.path, c.header)
				if resp.StatusCode != c.status {
					t.Errorf("%s: %d, want %d: %s", what, resp.StatusCode, c.status, b)
					continue
				}
				if c.code != "" {
					if e := decodeJSON[errorEnvelope](t, b).Error; e.Code == nil || *e.Code != c.code {
						t.Errorf("%s: error %s, want code %s", what, b, c.code)
					}
					if len(g.reqs) != before {
						t.Errorf("%s: refused, yet the generator ran", what)
					}
				}
				if got := resp.Header.Get("Access-Control-Allow-Origin"); got != c.acao {
					t.Errorf("%s: Access-Control-Allow-Origin %q, want %q", what, got, c.acao)
				}
				if c.method == "OPTIONS" && c.status == 204 {
					h := resp.Header
					if !strings.Contains(h.Get("Access-Control-Allow-Methods"), "POST") ||
						!strings.Contains(strings.ToLower(h.Get("Access-Control-Allow-Headers")), "x-stainless-lang") ||
						!strings.Contains(h.Get("Vary"), "Origin") {
						t.Errorf("%s: preflight headers %v", what, h)
					}
				}
			}
		})
	}
}

// TestManyStreams: 200 streamed requests at once each end with a whole
// stream or a 429 in OpenAI's shape; none fails or breaks off.
func TestManyStreams(t *testing.T) {
	s := New(&echo{}, testOptions())
	addr := listening(t, s)
	counts, errs := streamLoad(t.Context(), "http://"+addr, 200, `{"prompt":"one two three four five six","max_tokens":6,"stream":true}`)
	for _, err := range errs {
		t.Error(err)
	}
	if counts[200] == 0 || counts[200]+counts[429] != 200 {
		t.Errorf("statuses %v", counts)
	}
}

// streamLoad sends n copies of a streamed completion at once and counts the
// statuses; a transport error, a stream without [DONE] or a refusal other
// than a 429 in OpenAI's shape is an error.
func streamLoad(ctx context.Context, base string, n int, body string) (map[int]int, []error) {
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: n}}
	defer client.CloseIdleConnections()
	var (
		mu     sync.Mutex
		counts = map[int]int{}
		errs   []error
		wg     sync.WaitGroup
	)
	for i := range n {
		wg.Go(func() {
			err := func() error {
				req, err := http.NewRequestWithContext(ctx, "POST", base+"/v1/completions", strings.NewReader(body))
				if err != nil {
					return err
				}
				resp, err := client.Do(req)
				if err != nil {
					return err
				}
				defer resp.Body.Close()
				b, err := io.ReadAll(resp.Body)
				if err != nil {
					return err
				}
				mu.Lock()
				counts[resp.StatusCode]++
				mu.Unlock()
				switch resp.StatusCode {
				case 200:
					if !strings.HasSuffix(string(b), "data: [DONE]\n\n") {
						return fmt.Errorf("stream without [DONE]: %s", b)
					}
				case 429:
					var e errorEnvelope
					if err := json.Unmarshal(b, &e); err != nil || e.Error.Type != typeRateLimit || resp.Header.Get("Retry-After") == "" {
						return fmt.Errorf("429 %s", b)
					}
				default:
					return fmt.Errorf("status %d: %s", resp.StatusCode, b)
				}
				return nil
			}()
			if err != nil {
				mu.Lock()
				errs = append(errs, fmt.Errorf("request %d: %w", i, err))
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return counts, errs
}
