package app

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/tandem-run/tandem/engine/serve"
	"github.com/tandem-run/tandem/kernels/sharedtest"
)

// startServe runs `tandem serve` with the demo pair and args until the test
// ends, and returns the /v1 address it prints and a function that stops it
// the way SIGINT does (its ctx ends) and returns what it returned.
func startServe(t *testing.T, args ...string) (url, line string, stop func() error) {
	t.Helper()
	target := sharedtest.Path(t, "models", "factory-target-Q8_0.gguf")
	draft := sharedtest.Path(t, "models", "factory-draft-Q8_0.gguf")
	ctx, cancel := context.WithCancel(t.Context())
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- runServe(ctx, append([]string{"--model", target, "--draft", draft, "--ctx", "256", "--addr", "127.0.0.1:0"}, args...), outW, io.Discard)
		outW.Close()
	}()
	stop = sync.OnceValue(func() error {
		cancel()
		return <-done
	})
	t.Cleanup(func() { stop() })
	line, err := bufio.NewReader(outR).ReadString('\n')
	if err != nil {
		t.Fatalf("no address printed: %v (%v)", err, stop())
	}
	_, url, ok := strings.Cut(strings.TrimSpace(line), " on ")
	if !ok || !strings.HasPrefix(url, "http://127.0.0.1:") {
		t.Fatalf("printed %q", line)
	}
	go io.Copy(io.Discard, outR)
	return url, line, stop
}

// TestServeCommand starts `tandem serve` on a free loopback port with the
// demo pair, reads the address it prints, completes a chat through it, and
// stops it.
func TestServeCommand(t *testing.T) {
	url, line, stop := startServe(t, "--api-key", "k")
	if !strings.Contains(line, "factory-target-Q8_0 (draft factory-draft-Q8_0.gguf)") {
		t.Errorf("printed %q", line)
	}
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	req, _ := http.NewRequestWithContext(t.Context(), "POST", url+"/chat/completions",
		strings.NewReader(`{"model":"factory-target-Q8_0","messages":[{"role":"user","content":"Hi"}],"max_tokens":8,"temperature":0,"stream":true}`))
	req.Header.Set("Authorization", "Bearer k")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"finish_reason":"length"`) || !strings.HasSuffix(string(body), "data: [DONE]\n\n") {
		t.Errorf("chat: %d\n%s", resp.StatusCode, body)
	}
	// The command's runner reaches the server whole: a grammar constrains
	// the answer, and /metrics shows the KV caches.
	for _, c := range []struct{ method, path, body, want string }{
		{"POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":"Hi"}],"max_tokens":8,"grammar":"root ::= \"yes\" | \"no\""}`, `"finish_reason":"stop"`},
		{"GET", "/metrics", "", `tandem_kv_cache_bytes{device="0",model="draft"}`},
	} {
		req, _ := http.NewRequestWithContext(t.Context(), c.method, strings.TrimSuffix(url, "/v1")+"/"+strings.TrimPrefix(c.path, "/"), strings.NewReader(c.body))
		req.Header.Set("Authorization", "Bearer k")
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(body), c.want) ||
			c.method == "POST" && !strings.Contains(string(body), `"content":"yes"`) && !strings.Contains(string(body), `"content":"no"`) {
			t.Errorf("%s: %d\n%s", c.path, resp.StatusCode, body)
		}
	}
	if err := stop(); err != nil {
		t.Errorf("serve after interrupt: %v", err)
	}
}

// TestServeBrowserAccess: a web page gets an answer from `tandem serve`
// only when --allow-origin names its origin (with CORS headers), and a
// request naming another host (DNS rebinding) gets none.
func TestServeBrowserAccess(t *testing.T) {
	url, _, _ := startServe(t, "--allow-origin", "http://localhost:3000, https://chat.example", "--addr", "localhost:0")
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	for _, tc := range []struct {
		origin, host string
		status       int
		acao         string
	}{
		{"http://localhost:3000", "", 200, "http://localhost:3000"},
		{"https://chat.example", "", 200, "https://chat.example"},
		{"http://attacker.example", "", 403, ""},
		{"", "attacker.example", 403, ""},
		{"", "localhost", 200, ""},
	} {
		req, _ := http.NewRequestWithContext(t.Context(), "POST", url+"/completions", strings.NewReader(`{"prompt":"Hi","max_tokens":1}`))
		req.Header.Set("Content-Type", "text/plain")
		if tc.origin != "" {
			req.Header.Set("Origin", tc.origin)
		}
		if tc.host != "" {
			req.Host = tc.host
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.status || resp.Header.Get("Access-Control-Allow-Origin") != tc.acao {
			t.Errorf("origin %q host %q: %d, Access-Control-Allow-Origin %q: %s", tc.origin, tc.host, resp.StatusCode, resp.Header.Get("Access-Control-Allow-Origin"), body)
		}
	}
}

func TestServeRefusesPublicAddressWithoutKey(t *testing.T) {
	t.Setenv("TANDEM_API_KEY", "")
	target := sharedtest.Path(t, "models", "factory-target-Q8_0.gguf")
	err := runServe(t.Context(), []string{"--model", target, "--addr", "0.0.0.0:0"}, io.Discard, io.Discard)
	if !errors.Is(err, serve.ErrNeedsKey) {
		t.Errorf("got %v, want ErrNeedsKey", err)
	}
}
