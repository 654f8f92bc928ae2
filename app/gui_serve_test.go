//go:build !headless

package app

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"syscall"
	"testing"

	"github.com/tandem-run/tandem/engine"
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

// The serve row's "At once" is the requests the server decodes together:
// a setting saved with the others and shown at the next start, planned
// (a KV cache of the context for each in the preview), loaded, and fixed
// while the server runs.
func TestServeParallelFromWindow(t *testing.T) {
	model := &fakeModel{pieces: []string{"Hi"}}
	var loaded engine.Config
	load := func(ctx context.Context, cfg engine.Config, progress func(engine.Progress)) (loadedModel, error) {
		loaded = cfg
		return loadReturning(model)(ctx, cfg, progress)
	}
	cpuLayout := func(s *Settings) { s.Layout.TargetDevices, s.Layout.DraftDevices = []int{2}, []int{2} }
	h := newHarness(t, cpuLayout, load)
	m := h.m
	m.chooseModel("target", h.demo.Target)
	m.chooseModel("draft", h.demo.Draft)
	h.settle()
	if got := m.serveCtl.ParallelValue(); got != 1 || m.plan == nil || m.plan.Parallel != 1 {
		t.Fatalf("at first the row shows %d at once, the plan %+v", got, m.plan)
	}
	kv := func() int64 {
		var n int64
		for _, b := range m.plan.Devices {
			n += b.Target.KV
		}
		return n
	}
	one := kv()
	m.serveCtl.Parallel.SetSelected("4")
	h.settle()
	if m.set.Layout.Parallel != 4 || m.plan.Parallel != 4 || kv() != 4*one {
		t.Fatalf("4 at once: setting %d, plan %d, target KV %d bytes (one: %d)", m.set.Layout.Parallel, m.plan.Parallel, kv(), one)
	}
	saved, _, _ := m.store.loadSettings()
	if saved.Layout.Parallel != 4 {
		t.Errorf("saved %d at once", saved.Layout.Parallel)
	}

	m.startLoad()
	h.waitFor("the load", func() bool { return m.cancelLoad == nil })
	if loaded.Plan == nil || loaded.Plan.Parallel != 4 {
		t.Fatalf("loaded plan %+v", loaded.Plan)
	}
	m.serveCtl.Tap()
	h.waitFor("the server", func() bool { return m.serveCtl.State().Running })
	if !m.serveCtl.Parallel.Disabled() {
		t.Error("the number at once can change while the server runs")
	}
	m.stopServe()
	h.waitFor("the server to stop", func() bool { st := m.serveCtl.State(); return !st.Running && !st.Busy })
	if m.serveCtl.Parallel.Disabled() {
		t.Error("the number at once stays fixed after the server stopped")
	}
	// Another number now is for the next load, and says so.
	m.serveCtl.Parallel.SetSelected("8")
	h.settle()
	if st := m.serveCtl.State(); !strings.Contains(st.Status, "loaded for 4 requests at once: load them again for 8") {
		t.Errorf("after choosing 8 with 4 loaded: %q", st.Status)
	}

	// The next start shows the saved number.
	h2 := newHarness(t, func(s *Settings) { cpuLayout(s); s.Layout.Parallel = 8 }, nil)
	if got := h2.m.serveCtl.ParallelValue(); got != 8 {
		t.Errorf("the next start shows %d at once", got)
	}
}
