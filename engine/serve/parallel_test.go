package serve

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"go.uber.org/goleak"

	"github.com/tandem-run/tandem/engine"
	"github.com/tandem-run/tandem/kernels/sharedtest"
)

// TestParallelQueue: with Parallel 2, two requests run on the generator at
// once, the next waits in turn, one past MaxQueue is answered 429, a
// waiting client that goes away leaves the line, and a client that goes
// away mid-stream frees its place for the next in line.
func TestParallelQueue(t *testing.T) {
	defer goleak.VerifyNone(t)
	opt := testOptions()
	opt.Parallel, opt.MaxQueue = 2, 2
	opt.MaxClientRequests = 5 // all from loopback: the queue, not the address, is full
	s, srv, g := blockedServer(t, opt)
	defer srv.Close()
	ctxA, goneA := context.WithCancel(t.Context())
	defer goneA()
	a := send(ctxA, srv, "first", true)
	b := send(t.Context(), srv, "second", true)
	started := map[string]bool{<-g.started: true, <-g.started: true}
	if !started["first"] || !started["second"] {
		t.Fatalf("started %v", started)
	}
	ctxC, goneC := context.WithCancel(t.Context())
	c := send(ctxC, srv, "queued then gone", false)
	waitFor(func() bool { return s.queue.waiting() == 1 })
	d := send(t.Context(), srv, "third in line", false)
	waitFor(func() bool { return s.queue.waiting() == 2 })
	status, body, hdr := call(t, srv, "POST", "/v1/completions", `{"prompt":"one too many"}`)
	if e := decodeJSON[errorEnvelope](t, body).Error; status != 429 || e.Type != typeRateLimit || hdr.Get("Retry-After") == "" {
		t.Errorf("past the queue: %d %s", status, body)
	}
	goneC()
	if r := <-c; !errors.Is(r.err, context.Canceled) {
		t.Fatalf("queued client: %+v", r)
	}
	waitFor(func() bool { return s.queue.waiting() == 1 })
	goneA() // the gate is shut: only the cancel ends A's generation
	if r := <-a; !errors.Is(r.err, context.Canceled) {
		t.Fatalf("streaming client: %+v", r)
	}
	if got := <-g.started; got != "third in line" {
		t.Fatalf("after the disconnect, %q started", got)
	}
	g.mu.Lock()
	most := g.most
	g.mu.Unlock()
	if most != 2 {
		t.Errorf("%d ran at once, want 2", most)
	}
	close(g.gate)
	for _, ch := range []<-chan result{b, d} {
		if r := <-ch; r.status != 200 {
			t.Errorf("request: %d %s %v", r.status, r.body, r.err)
		}
	}
}

// TestDemoPairParallel is issue 23's load on the CPU: 32 streamed greedy
// requests at once to the demo pair served with Parallel 8. All complete,
// each with the text the engine gives its prompt alone (one at a time,
// with the draft), and nothing is left running.
func TestDemoPairParallel(t *testing.T) {
	defer goleak.VerifyNone(t)
	cfg := engine.Config{
		Target:  sharedtest.Path(t, "models", "factory-target-Q8_0.gguf"),
		Draft:   sharedtest.Path(t, "models", "factory-draft-Q8_0.gguf"),
		Context: 256,
	}
	solo, err := engine.Load(t.Context(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	const distinct, n, tokens = 8, 32, 24
	want := make([]string, distinct)
	for i := range want {
		req := engine.Request{Prompt: fmt.Sprintf("Chapter %d.", i+1), MaxTokens: tokens}
		if want[i], _, err = collect(t.Context(), solo, req); err != nil {
			t.Fatal(err)
		}
	}
	solo.Close()
	cfg.Parallel = 8
	r, err := engine.Load(t.Context(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	srv := httptest.NewServer(New(r, Options{Model: "factory-target", Parallel: 8, MaxClientRequests: n}))
	defer srv.Close()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			body := fmt.Sprintf(`{"prompt":"Chapter %d.","max_tokens":%d,"temperature":0,"stream":true}`, i%distinct+1, tokens)
			resp, err := srv.Client().Post(srv.URL+"/v1/completions", "application/json", strings.NewReader(body))
			if err != nil {
				errs <- err
				return
			}
			b, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			got, aerr := answer(b, true)
			if err != nil || aerr != nil || resp.StatusCode != 200 || got != want[i%distinct] || !strings.HasSuffix(string(b), "data: [DONE]\n\n") {
				errs <- fmt.Errorf("request %d: %d %q (%v, %v), want %q", i, resp.StatusCode, got, err, aerr, want[i%distinct])
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
