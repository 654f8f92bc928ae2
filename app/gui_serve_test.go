//go:build !headless

package app

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"syscall"
	"testing"
)

func TestServeAddr(t *testing.T) {
	for in, want := range map[string]string{
		"":               "127.0.0.1:0",
		" 8081 ":         "127.0.0.1:8081",
		"127.0.0.1":      "127.0.0.1:0",
		"localhost:9000": "localhost:9000",
		"::1":            "[::1]:0",
		"[::1]:8080":     "[::1]:8080",
		"0.0.0.0:8080":   "0.0.0.0:8080",
		"192.168.1.5":    "192.168.1.5:0",
	} {
		if got := serveAddr(in); got != want {
			t.Errorf("serveAddr(%q) = %q, want %q", in, got, want)
		}
	}
}

// The server started from the window shows its address, answers the
// OpenAI API there from the loaded models, and stops when they are unloaded.
func TestServeFromWindow(t *testing.T) {
	model := &fakeModel{pieces: []string{"Hello", " there"}}
	h := loadedHarness(t, model)
	m := h.m
	if st := m.serveCtl.State(); !st.Ready || st.Running {
		t.Fatalf("loaded, the server control shows %+v", st)
	}
	m.serveCtl.Tap()
	h.waitFor("the server", func() bool { return m.serveCtl.State().Running })
	url := m.serveCtl.State().URL
	if !strings.HasPrefix(url, "http://127.0.0.1:") || !strings.HasSuffix(url, "/v1") || strings.HasSuffix(url, ":0/v1") {
		t.Fatalf("address shown %q", url)
	}

	resp, err := http.Post(url+"/chat/completions", "application/json",
		strings.NewReader(`{"messages":[{"role":"user","content":"hi"}],"max_tokens":8}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var out struct {
		Model   string `json:"model"`
		Choices []struct {
			Message struct{ Content string } `json:"message"`
		} `json:"choices"`
	}
	if err := json.Unmarshal(body, &out); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d, body %s (%v)", resp.StatusCode, body, err)
	}
	if len(out.Choices) != 1 || out.Choices[0].Message.Content != "Hello there" || out.Model != "factory-target-Q4_K_M" {
		t.Errorf("answer %s", body)
	}
	if n := len(model.requests()); n != 1 {
		t.Errorf("the loaded model got %d requests", n)
	}

	m.unload()
	h.waitFor("the server to stop", func() bool { st := m.serveCtl.State(); return !st.Running && !st.Busy })
	if st := m.serveCtl.State(); st.Ready || st.Error {
		t.Errorf("after unload the control shows %+v", st)
	}
	if _, err := http.Get(url + "/models"); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("after unload the address still answers: %v", err)
	}
	if !model.closed {
		t.Error("the models were not closed")
	}
}

// An address other machines can reach needs an API key; the control says
// so and nothing listens.
func TestServeRefusesOpenAddressWithoutKey(t *testing.T) {
	h := loadedHarness(t, &fakeModel{})
	m := h.m
	m.startServe("0.0.0.0:0", "")
	h.settle()
	st := m.serveCtl.State()
	if st.Running || !st.Error || !strings.Contains(st.Status, "API key") || m.server != nil {
		t.Errorf("without a key: %+v", st)
	}
	m.startServe("127.0.0.1:0", "")
	h.waitFor("the server", func() bool { return m.serveCtl.State().Running })
	m.stopServe()
	h.waitFor("the server to stop", func() bool { st := m.serveCtl.State(); return st.Ready && !st.Busy && !st.Running })
}
