package serve

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// answer is the text of a response body, whole or streamed, chat or text.
func answer(body []byte, stream bool) (string, error) {
	type piece struct {
		Choices []struct {
			Text    string    `json:"text"`
			Message chatDelta `json:"message"`
			Delta   chatDelta `json:"delta"`
		} `json:"choices"`
	}
	if !stream {
		var p piece
		if err := json.Unmarshal(body, &p); err != nil || len(p.Choices) != 1 {
			return "", fmt.Errorf("bad body %s", body)
		}
		return p.Choices[0].Text + p.Choices[0].Message.Content, nil
	}
	var text strings.Builder
	sc := bufio.NewScanner(strings.NewReader(string(body)))
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		var p piece
		if err := json.Unmarshal([]byte(data), &p); err != nil {
			return "", fmt.Errorf("bad event %s", data)
		}
		for _, c := range p.Choices {
			text.WriteString(c.Text + c.Delta.Content)
		}
	}
	return text.String(), nil
}

// TestHundredConcurrent sends 100 short requests at once, streamed and
// whole, chat and text: all must complete with their own answer, the
// runner must see one at a time, and nothing may be left running.
func TestHundredConcurrent(t *testing.T) {
	defer goleak.VerifyNone(t)
	g := &echo{}
	opt := testOptions()
	opt.MaxClientRequests = 100 // all from loopback: one client to the server
	srv := httptest.NewServer(New(g, opt))
	defer srv.Close()
	var wg sync.WaitGroup
	errs := make(chan error, 100)
	for i := range 100 {
		wg.Go(func() {
			words := fmt.Sprintf("request %d says hi", i)
			path, body := "/v1/chat/completions", fmt.Sprintf(`{"messages":[{"role":"user","content":%q}]`, words)
			if i%2 == 1 {
				path, body = "/v1/completions", fmt.Sprintf(`{"prompt":%q,"max_tokens":9`, words)
			}
			stream := i%4 >= 2
			if stream {
				body += `,"stream":true`
			}
			resp, err := srv.Client().Post(srv.URL+path, "application/json", strings.NewReader(body+"}"))
			if err != nil {
				errs <- err
				return
			}
			defer resp.Body.Close()
			b, err := io.ReadAll(resp.Body)
			if err != nil || resp.StatusCode != 200 {
				errs <- fmt.Errorf("request %d: status %d, %v: %s", i, resp.StatusCode, err, b)
				return
			}
			if stream && !strings.HasSuffix(string(b), "data: [DONE]\n\n") {
				errs <- fmt.Errorf("request %d: stream not finished: %s", i, b)
			}
			if got, err := answer(b, stream); err != nil || got != words {
				errs <- fmt.Errorf("request %d: answer %q (%v), want %q", i, got, err, words)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.most != 1 || len(g.reqs) != 100 {
		t.Errorf("%d generations, at most %d at once; want 100, 1", len(g.reqs), g.most)
	}
}

// blockedServer runs a server whose generations wait for the test to open
// the gate; started receives each one's text as it begins.
func blockedServer(t *testing.T, opt Options) (*Server, *httptest.Server, *echo) {
	t.Helper()
	g := &echo{gate: make(chan struct{}), started: make(chan string, 8)}
	s := New(g, opt)
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	return s, srv, g
}

// send posts a completion of prompt in the background; the result arrives
// on the returned channel.
func send(ctx context.Context, srv *httptest.Server, prompt string, stream bool) <-chan result {
	out := make(chan result, 1)
	go func() {
		body := fmt.Sprintf(`{"prompt":%q,"max_tokens":50,"stream":%v}`, prompt, stream)
		req, err := http.NewRequestWithContext(ctx, "POST", srv.URL+"/v1/completions", strings.NewReader(body))
		if err != nil {
			out <- result{err: err}
			return
		}
		resp, err := srv.Client().Do(req)
		if err != nil {
			out <- result{err: err}
			return
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		out <- result{status: resp.StatusCode, body: b, err: err, header: resp.Header}
	}()
	return out
}

type result struct {
	status int
	body   []byte
	header http.Header
	err    error
}

func waitFor(cond func() bool) {
	for !cond() {
		waitBriefly()
	}
}

// TestDisconnectFreesSlot: a client that goes away mid-stream, or while
// queued, gives up its place, and the next request runs.
func TestDisconnectFreesSlot(t *testing.T) {
	s, srv, g := blockedServer(t, testOptions())
	ctxA, goneA := context.WithCancel(t.Context())
	a := send(ctxA, srv, "first", true)
	if got := <-g.started; got != "first" {
		t.Fatalf("started %q", got)
	}
	ctxC, goneC := context.WithCancel(t.Context())
	c := send(ctxC, srv, "queued then gone", false)
	b := send(t.Context(), srv, "second one", false)
	waitFor(func() bool { return s.queue.waiting() == 2 })

	goneC()
	if r := <-c; !errors.Is(r.err, context.Canceled) {
		t.Fatalf("queued client: %+v", r)
	}
	waitFor(func() bool { return s.queue.waiting() == 1 })

	goneA() // the gate is still shut: only the cancel can end A's generation
	if r := <-a; !errors.Is(r.err, context.Canceled) {
		t.Fatalf("streaming client: %+v", r)
	}
	if got := <-g.started; got != "second one" {
		t.Fatalf("after the disconnect, %q started", got)
	}
	close(g.gate)
	r := <-b
	if got, err := answer(r.body, false); r.status != 200 || err != nil || got != "second one" {
		t.Fatalf("second request: %d %s", r.status, r.body)
	}
}

// TestQueueFull: past MaxQueue waiting requests, the next is answered 429.
func TestQueueFull(t *testing.T) {
	opt := testOptions()
	opt.MaxQueue = 1
	opt.MaxClientRequests = 3 // all from loopback: the queue, not the address, is full
	s, srv, g := blockedServer(t, opt)
	a := send(t.Context(), srv, "running", true)
	<-g.started
	b := send(t.Context(), srv, "waiting", false)
	waitFor(func() bool { return s.queue.waiting() == 1 })
	status, body, hdr := call(t, srv, "POST", "/v1/completions", `{"prompt":"one too many"}`)
	if e := decodeJSON[errorEnvelope](t, body).Error; status != 429 || e.Type != typeRateLimit || hdr.Get("Retry-After") == "" {
		t.Errorf("third request: %d %s", status, body)
	}
	close(g.gate)
	for _, ch := range []<-chan result{a, b} {
		if r := <-ch; r.status != 200 {
			t.Errorf("queued request: %d %s %v", r.status, r.body, r.err)
		}
	}
}

// TestServeShutdown: cancelling Serve's ctx stops new connections, lets the
// running stream finish, and returns once it has.
func TestServeShutdown(t *testing.T) {
	defer goleak.VerifyNone(t)
	g := &echo{gate: make(chan struct{}), started: make(chan string, 1)}
	s := New(g, testOptions())
	ln, err := Listen("127.0.0.1:0", "")
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(t.Context())
	served := make(chan error, 1)
	go func() { served <- s.Serve(ctx, ln) }()
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	out := make(chan result, 1)
	go func() {
		resp, err := client.Post("http://"+ln.Addr().String()+"/v1/completions", "application/json", strings.NewReader(`{"prompt":"still finishing","stream":true}`))
		if err != nil {
			out <- result{err: err}
			return
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		out <- result{status: resp.StatusCode, body: b, err: err}
	}()
	<-g.started
	stop()
	waitFor(func() bool { // the listener closes at once
		c, err := net.Dial("tcp", ln.Addr().String())
		if err == nil {
			c.Close()
		}
		return err != nil
	})
	close(g.gate)
	r := <-out
	if got, err := answer(r.body, true); r.err != nil || got != "still finishing" || !strings.HasSuffix(string(r.body), "[DONE]\n\n") {
		t.Errorf("in-flight stream: %q %v %v", got, err, r.err)
	}
	if err := <-served; err != nil {
		t.Errorf("Serve: %v", err)
	}
}

// TestServeShutdownCancels: a request still running after the grace period
// is cancelled, and Serve returns once its handler has.
func TestServeShutdownCancels(t *testing.T) {
	defer goleak.VerifyNone(t)
	opt := testOptions()
	opt.ShutdownGrace = 50 * time.Millisecond
	g := &echo{gate: make(chan struct{}), started: make(chan string, 1)}
	s := New(g, opt)
	ln, err := Listen("127.0.0.1:0", "")
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(t.Context())
	served := make(chan error, 1)
	go func() { served <- s.Serve(ctx, ln) }()
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	out := make(chan error, 1)
	go func() {
		resp, err := client.Post("http://"+ln.Addr().String()+"/v1/completions", "application/json", strings.NewReader(`{"prompt":"never ends"}`))
		if err == nil {
			_, err = io.ReadAll(resp.Body)
			resp.Body.Close()
		}
		out <- err
	}()
	<-g.started
	stop()
	if err := <-served; err != nil {
		t.Errorf("Serve: %v", err)
	}
	g.mu.Lock()
	if g.running != 0 {
		t.Errorf("a generation outlived Serve")
	}
	g.mu.Unlock()
	<-out
}

func TestCheckAddr(t *testing.T) {
	for _, tc := range []struct {
		addr, key string
		ok        bool
	}{
		{"127.0.0.1:8080", "", true},
		{"127.1.2.3:0", "", true},
		{"[::1]:8080", "", true},
		{"localhost:8080", "", true},
		{":8080", "", false},
		{"0.0.0.0:8080", "", false},
		{"192.168.1.5:8080", "", false},
		{"example.com:80", "", false},
		{"0.0.0.0:8080", "k", true},
		{"nonsense", "k", false},
	} {
		err := CheckAddr(tc.addr, tc.key)
		if (err == nil) != tc.ok {
			t.Errorf("CheckAddr(%q, %q) = %v", tc.addr, tc.key, err)
		}
		if err != nil && tc.key == "" && !errors.Is(err, ErrNeedsKey) {
			t.Errorf("CheckAddr(%q): %v does not wrap ErrNeedsKey", tc.addr, err)
		}
	}
	if _, err := Listen("0.0.0.0:0", ""); !errors.Is(err, ErrNeedsKey) {
		t.Errorf("Listen on every interface without a key: %v", err)
	}
}
