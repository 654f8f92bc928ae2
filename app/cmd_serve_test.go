package app

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/tandem-run/tandem/engine/serve"
	"github.com/tandem-run/tandem/kernels/sharedtest"
)

// TestServeCommand starts `tandem serve` on a free loopback port with the
// demo pair, reads the address it prints, completes a chat through it, and
// stops it the way SIGINT does (its ctx ends).
func TestServeCommand(t *testing.T) {
	target := sharedtest.Path(t, "models", "factory-target-Q8_0.gguf")
	draft := sharedtest.Path(t, "models", "factory-draft-Q8_0.gguf")
	ctx, stop := context.WithCancel(t.Context())
	defer stop()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- runServe(ctx, []string{"--model", target, "--draft", draft, "--ctx", "256", "--addr", "127.0.0.1:0", "--api-key", "k"}, outW, io.Discard)
		outW.Close()
	}()
	line, err := bufio.NewReader(outR).ReadString('\n')
	if err != nil {
		t.Fatalf("no address printed: %v (%v)", err, <-done)
	}
	_, url, ok := strings.Cut(strings.TrimSpace(line), " on ")
	if !ok || !strings.HasPrefix(url, "http://127.0.0.1:") || !strings.Contains(line, "factory-target-Q8_0 (draft factory-draft-Q8_0.gguf)") {
		t.Fatalf("printed %q", line)
	}
	go io.Copy(io.Discard, outR)

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
	stop()
	if err := <-done; err != nil {
		t.Errorf("serve after interrupt: %v", err)
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
