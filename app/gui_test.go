//go:build !headless

package app

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/test"
	"fyne.io/fyne/v2/widget"

	"github.com/tandem-run/tandem/assets"
	"github.com/tandem-run/tandem/engine"
	"github.com/tandem-run/tandem/engine/device"
)

// uiQueue stands in for fyne.Do: functions posted from workers wait in a
// queue until the test goroutine runs them, as the main goroutine would.
type uiQueue struct {
	mu sync.Mutex
	fs []func()
}

func (q *uiQueue) post(f func()) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.fs = append(q.fs, f)
}

func (q *uiQueue) take() []func() {
	q.mu.Lock()
	defer q.mu.Unlock()
	fs := q.fs
	q.fs = nil
	return fs
}

// guiHarness is a main window on Fyne's test driver with fake devices and
// a fake engine.
type guiHarness struct {
	t    *testing.T
	m    *mainWindow
	win  fyne.Window // shows m's content
	q    *uiQueue
	demo assets.DemoPair
}

const mib = 1 << 20

// testInventory is two 64 MiB virtual GPUs and a CPU with 1 GiB free.
func testInventory(t *testing.T) device.Inventory {
	inv, err := device.ParseVirtual("cuda0:64MiB,cuda0:64MiB")
	if err != nil {
		t.Fatal(err)
	}
	return withCPU(inv, strings.NewReader("MemTotal: 2097152 kB\nMemAvailable: 1048576 kB\n"))
}

func newHarness(t *testing.T, set func(*Settings), load loadFunc) *guiHarness {
	t.Helper()
	return newHarnessOn(t, testInventory(t), set, load)
}

// newHarnessOn is newHarness on the devices of inv.
func newHarnessOn(t *testing.T, inv device.Inventory, set func(*Settings), load loadFunc) *guiHarness {
	t.Helper()
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	a := test.NewTempApp(t)
	st := newTestStore(t)
	if set != nil {
		s := defaultSettings()
		set(&s)
		if err := st.saveSettings(s); err != nil {
			t.Fatal(err)
		}
	}
	demo, err := demoPair()
	if err != nil {
		t.Fatal(err)
	}
	h := &guiHarness{t: t, q: &uiQueue{}, demo: demo}
	m, err := newMainWindow(a, st, inv, load, h.q.post)
	if err != nil {
		t.Fatal(err)
	}
	m.picker = fakePicker{}
	// The window's content, shown at a desktop size in a test window.
	h.win = test.NewTempWindow(t, m.win.Content())
	h.win.Resize(fyne.NewSize(1280, 900))
	h.m = m
	t.Cleanup(func() {
		h.settle()
		if m.model != nil {
			m.model.Close()
		}
	})
	return h
}

// settle runs posted functions and waits for the workers until nothing is
// left to do.
func (h *guiHarness) settle() {
	h.t.Helper()
	for range 1000 {
		h.m.planner.wait()
		h.m.disk.wait()
		fs := h.q.take()
		if len(fs) == 0 {
			return
		}
		for _, f := range fs {
			f()
		}
	}
	h.t.Fatal("the UI never settled")
}

// waitFor settles until cond holds (for work on goroutines of its own,
// like a generation).
func (h *guiHarness) waitFor(what string, cond func() bool) {
	h.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			h.t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
		h.settle()
	}
}

// fakePicker answers every question with path.
type fakePicker struct{ path string }

func (p fakePicker) openModel(_ string, done func(string))   { done(p.path) }
func (p fakePicker) saveFile(_, _ string, done func(string)) { done(p.path) }

// fakeModel is a loaded model that answers with scripted pieces; each
// piece waits for a value on step when step is not nil.
type fakeModel struct {
	pieces []string
	step   chan struct{}
	mu     sync.Mutex
	reqs   []engine.Request
	closed bool
}

func (f *fakeModel) Generate(ctx context.Context, req engine.Request, emit func(engine.Event)) (engine.Stats, error) {
	f.mu.Lock()
	f.reqs = append(f.reqs, req)
	f.mu.Unlock()
	var s engine.Stats
	for _, p := range f.pieces {
		if f.step != nil {
			select {
			case <-f.step:
			case <-ctx.Done():
				s.FinishReason = "cancelled"
				return s, ctx.Err()
			}
		}
		s.GeneratedTokens++
		s.Drafted += 2
		s.Accepted++
		s.DecodeSeconds += 0.01
		emit(engine.Event{Kind: engine.EventToken, Text: p, Stats: s})
	}
	s.FinishReason = "stop"
	return s, nil
}

func (f *fakeModel) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed = true
	return nil
}

func (f *fakeModel) requests() []engine.Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]engine.Request(nil), f.reqs...)
}

// loadReturning is a loader that reports progress and returns model.
func loadReturning(model loadedModel) loadFunc {
	return func(ctx context.Context, cfg engine.Config, progress func(engine.Progress)) (loadedModel, error) {
		progress(engine.Progress{Model: "target", BytesDone: 1, BytesTotal: 2})
		progress(engine.Progress{Model: "target", BytesDone: 2, BytesTotal: 2})
		return model, nil
	}
}

// buttonsIn is the visible buttons inside o.
func buttonsIn(o fyne.CanvasObject) []*widget.Button {
	var out []*widget.Button
	for _, c := range test.LaidOutObjects(o) {
		if b, ok := c.(*widget.Button); ok && b.Visible() {
			out = append(out, b)
		}
	}
	return out
}

// tapButton taps the visible button labelled text inside o.
func tapButton(t *testing.T, o fyne.CanvasObject, text string) {
	t.Helper()
	for _, b := range buttonsIn(o) {
		if b.Text == text {
			test.Tap(b)
			return
		}
	}
	t.Fatalf("no button %q", text)
}
