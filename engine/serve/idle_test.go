package serve

import (
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestIdleReleaseFollowsTheLastRequest: a release starts only when the last
// request in flight ends, never two at once, and a server that falls idle
// again during a release gets one more after it.
func TestIdleReleaseFollowsTheLastRequest(t *testing.T) {
	started := make(chan struct{})
	proceed := make(chan struct{})
	var mu sync.Mutex
	calls := 0
	r := &idleRelease{release: func() {
		mu.Lock()
		calls++
		mu.Unlock()
		started <- struct{}{}
		<-proceed
	}}

	a, b := r.enter(), r.enter()
	a()
	r.poke() // a connection closed: still a request in flight
	select {
	case <-started:
		t.Fatal("a release started while a request was still in flight")
	case <-time.After(20 * time.Millisecond):
	}
	b()
	<-started // the first release, blocked in proceed

	// Two more bursts end and a connection closes while it runs: one
	// release follows, not three.
	r.enter()()
	r.enter()()
	r.poke()
	proceed <- struct{}{}
	<-started
	proceed <- struct{}{}
	select {
	case <-started:
		t.Fatal("a third release ran for bursts that ended during the first")
	case <-time.After(20 * time.Millisecond):
	}
	mu.Lock()
	defer mu.Unlock()
	if calls != 2 {
		t.Fatalf("%d releases, want 2", calls)
	}
}

// TestServerReleasesMemoryWhenIdle: after a burst of concurrent requests,
// the server's ReleaseMemory runs once they have all ended.
func TestServerReleasesMemoryWhenIdle(t *testing.T) {
	released := make(chan struct{}, 64)
	opt := testOptions()
	opt.ReleaseMemory = func() { released <- struct{}{} }
	srv := startServer(t, &echo{}, opt)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			if status, body, _ := call(t, srv, "POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"max_tokens":4}`); status != 200 {
				t.Errorf("status %d: %s", status, body)
			}
		})
	}
	wg.Wait()
	select {
	case <-released:
	case <-time.After(10 * time.Second):
		t.Fatal("no memory release after the requests ended")
	}
}

// TestServeReleasesWhenConnectionsClose: a keep-alive connection holds its
// buffers after its request; closing it while the server is idle releases
// memory again.
func TestServeReleasesWhenConnectionsClose(t *testing.T) {
	released := make(chan struct{}, 64)
	opt := testOptions()
	opt.ReleaseMemory = func() { released <- struct{}{} }
	addr := listening(t, New(&echo{}, opt))
	client := &http.Client{Transport: &http.Transport{}}
	resp, err := client.Post("http://"+addr+"/v1/chat/completions", "application/json",
		strings.NewReader(`{"messages":[{"role":"user","content":"hi"}],"max_tokens":4}`))
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	wait := func(what string) {
		t.Helper()
		select {
		case <-released:
		case <-time.After(10 * time.Second):
			t.Fatalf("no memory release after %s", what)
		}
	}
	wait("the request")
	client.CloseIdleConnections()
	wait("the connection closed")
}
