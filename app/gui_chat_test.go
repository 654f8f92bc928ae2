//go:build !headless

package app

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tandem-run/tandem/engine"
	"github.com/tandem-run/tandem/engine/spec"
)

// loadedHarness is a harness with the demo pair chosen on the CPU and fake
// models loaded.
func loadedHarness(t *testing.T, model *fakeModel) *guiHarness {
	t.Helper()
	h := newHarness(t, func(s *Settings) { s.Layout.TargetDevices, s.Layout.DraftDevices = []int{2}, []int{2} }, loadReturning(model))
	h.m.chooseModel("target", h.demo.Target)
	h.m.chooseModel("draft", h.demo.Draft)
	h.settle()
	h.m.startLoad()
	h.waitFor("the load", func() bool { return h.m.cancelLoad == nil })
	if h.m.model != model {
		t.Fatalf("not loaded: %q", h.m.errNotice.Text())
	}
	return h
}

func TestLoadShowsProgressAndOpensChat(t *testing.T) {
	h := loadedHarness(t, &fakeModel{})
	m := h.m
	if m.bar.Value != 1 || !strings.HasPrefix(m.status.Text, "Loaded: factory-target-Q4_K_M.gguf with draft factory-draft-Q8_0.gguf on CPU") {
		t.Errorf("bar %v, status %q", m.bar.Value, m.status.Text)
	}
	if m.chat.local != m.model || !strings.HasPrefix(m.chat.engine.Text, "Local:") {
		t.Errorf("chat engine %q", m.chat.engine.Text)
	}
	if m.pages.Selected() != m.chatTab || m.win.Canvas().Focused() != m.chat.input {
		t.Errorf("after loading the window shows page %q, focused %v; want the chat's prompt", m.pages.Selected().Text, m.win.Canvas().Focused())
	}
	if !m.loadBtn.Disabled() == false || m.unloadBtn.Disabled() {
		t.Error("after loading, Unload should be enabled")
	}
	m.unload()
	h.settle()
	if m.model != nil || m.chat.local != nil || !h.m.unloadBtn.Disabled() {
		t.Error("unload left the model in place")
	}
}

func TestLoadCancelAndError(t *testing.T) {
	started := make(chan struct{})
	h := newHarness(t, func(s *Settings) { s.Layout.TargetDevices = []int{2} }, func(ctx context.Context, cfg engine.Config, progress func(engine.Progress)) (loadedModel, error) {
		// The engine gets the plan the preview showed.
		if cfg.Threads < 1 || cfg.Plan == nil || !cfg.Plan.Fits || !slices.Equal(cfg.Plan.Target.Placement.Devices, []int{2}) {
			return nil, fmt.Errorf("bad config %+v", cfg)
		}
		close(started)
		<-ctx.Done()
		return nil, ctx.Err()
	})
	m := h.m
	m.chooseModel("target", h.demo.Target)
	h.settle()
	m.startLoad()
	<-started
	if m.cancelBtn.Disabled() || !m.loadBtn.Disabled() {
		t.Error("while loading, Cancel should be the enabled one")
	}
	m.cancel()
	h.waitFor("the cancelled load", func() bool { return m.cancelLoad == nil })
	if m.model != nil || m.status.Text != "Loading cancelled." {
		t.Errorf("status %q", m.status.Text)
	}

	m.load = func(context.Context, engine.Config, func(engine.Progress)) (loadedModel, error) {
		return nil, errors.New("engine: target x.gguf: out of memory")
	}
	m.startLoad()
	h.waitFor("the failed load", func() bool { return m.cancelLoad == nil })
	if !m.errNotice.Visible() || !strings.Contains(m.errNotice.Text(), "Loading failed") {
		t.Errorf("error notice %q", m.errNotice.Text())
	}
}

func lastMessage(c *chatPage) Message { return c.conv.Messages[len(c.conv.Messages)-1] }

// The answer streams into the transcript, Stop keeps what came, and
// Regenerate answers again.
func TestChatStreamsStopsRegenerates(t *testing.T) {
	model := &fakeModel{pieces: []string{"And God", " said,", " Let there be light"}, step: make(chan struct{})}
	h := loadedHarness(t, model)
	c := h.m.chat
	c.input.SetText("Quote Genesis 1:3.")
	c.sendInput()
	model.step <- struct{}{}
	model.step <- struct{}{}
	h.waitFor("two streamed pieces", func() bool {
		msgs := c.view.Messages()
		return len(msgs) == 2 && msgs[1].Text == "And God said,"
	})
	if msgs := c.view.Messages(); !msgs[1].Streaming || c.stop.Disabled() || !c.send.Disabled() {
		t.Errorf("while streaming: %+v, stop disabled %v", msgs[1], c.stop.Disabled())
	}
	if !strings.Contains(c.meter.Text(), "acceptance 50%") {
		t.Errorf("meter %q", c.meter.Text())
	}
	c.escape() // Esc stops
	h.waitFor("the stop", func() bool { return c.cancel == nil })
	if m := lastMessage(c); m.Content != "And God said," || m.Stats == nil || m.Stats.FinishReason != "cancelled" {
		t.Fatalf("after Stop: %+v %+v", m, m.Stats)
	}
	if got := c.view.Messages()[1]; got.Streaming || !strings.Contains(got.Stats, "stopped") {
		t.Errorf("stopped message shows %+v", got)
	}

	model.step = nil
	c.regenerate()
	h.waitFor("the regenerated answer", func() bool { return c.cancel == nil })
	if len(c.conv.Messages) != 2 || lastMessage(c).Content != "And God said, Let there be light" {
		t.Fatalf("after Regenerate: %+v", c.conv.Messages)
	}
	reqs := model.requests()
	last := reqs[len(reqs)-1]
	if len(last.Messages) != 1 || last.Messages[0].Content != "Quote Genesis 1:3." { // no system prompt by default
		t.Errorf("regenerate asked %+v", last.Messages)
	}
	if c.conv.Title != "Quote Genesis 1:3." {
		t.Errorf("title %q", c.conv.Title)
	}
}

func TestChatEditResend(t *testing.T) {
	model := &fakeModel{pieces: []string{"ok"}}
	h := loadedHarness(t, model)
	c := h.m.chat
	for _, q := range []string{"first", "second"} {
		c.input.SetText(q)
		c.sendInput()
		h.waitFor("an answer", func() bool { return c.cancel == nil })
	}
	c.edit(0)
	if c.input.Text != "first" || !c.notice.Visible() {
		t.Fatalf("edit did not load the message: %q", c.input.Text)
	}
	c.input.SetText("first, edited")
	c.sendInput()
	h.waitFor("the resent answer", func() bool { return c.cancel == nil })
	if len(c.conv.Messages) != 2 || c.conv.Messages[0].Content != "first, edited" {
		t.Errorf("after edit and resend: %+v", c.conv.Messages)
	}
}

// Conversations are saved as they change and reopened by the next start;
// export writes Markdown.
func TestConversationsReopenAndExport(t *testing.T) {
	model := &fakeModel{pieces: []string{"A fortune."}}
	h := loadedHarness(t, model)
	c := h.m.chat
	c.input.SetText("Tell me a fortune.")
	c.sendInput()
	h.waitFor("an answer", func() bool { return c.cancel == nil })
	h.settle()

	m2, err := newMainWindow(h.m.app, h.m.store, testInventory(t), nil, h.q.post)
	if err != nil {
		t.Fatal(err)
	}
	h2 := &guiHarness{t: t, m: m2, q: h.q}
	h2.settle()
	c2 := m2.chat
	if c2.conv == nil || c2.conv.Title != "Tell me a fortune." || len(c2.conv.Messages) != 2 {
		t.Fatalf("reopened conversation %+v", c2.conv)
	}
	if got := c2.view.Messages(); len(got) != 2 || got[1].Text != "A fortune." {
		t.Errorf("reopened transcript %+v", got)
	}

	out := filepath.Join(t.TempDir(), "fortune.md")
	m2.picker = fakePicker{path: out}
	c2.export()
	h2.settle()
	b, err := os.ReadFile(out)
	if err != nil || !strings.Contains(string(b), "## Assistant\n\nA fortune.") {
		t.Errorf("export: %v\n%s", err, b)
	}
}

func TestChatWithoutModelSaysWhatToDo(t *testing.T) {
	h := newHarness(t, nil, nil)
	c := h.m.chat
	c.input.SetText("hello")
	c.sendInput()
	if !c.notice.Visible() || !strings.Contains(c.notice.Text(), "No model loaded") {
		t.Errorf("notice %q", c.notice.Text())
	}
	if c.conv != nil && len(c.conv.Messages) > 0 {
		t.Error("a message was added with nothing to answer it")
	}
}

// A conversation from a newer Tandem opens read-only: sending, editing,
// regenerating and deleting leave it (and its file) as they are, and say why.
func TestNewerConversationReadOnly(t *testing.T) {
	h := newHarness(t, nil, nil)
	const newer = `{"version": 2, "title": "From the future", "updated": "2099-01-01T00:00:00Z",
  "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]}`
	path := filepath.Join(h.m.store.dir, conversationsDir, "20990101-000000.json")
	os.WriteFile(path, []byte(newer), 0o600)
	m, err := newMainWindow(h.m.app, h.m.store, testInventory(t), nil, h.q.post)
	if err != nil {
		t.Fatal(err)
	}
	h.m = m
	h.settle()
	c := m.chat
	model := &fakeModel{pieces: []string{"overwritten"}}
	c.useLocal(model, engine.Config{})
	if c.conv == nil || !c.conv.ReadOnly || c.conv.Title != "From the future" {
		t.Fatalf("opened %+v", c.conv)
	}
	if !c.send.Disabled() || !strings.Contains(c.notice.Text(), "read-only") {
		t.Errorf("send enabled %v, notice %q", !c.send.Disabled(), c.notice.Text())
	}
	c.notice.Hide()
	c.input.SetText("more")
	c.sendInput()
	c.regenerate()
	c.edit(0)
	c.deleteChat()
	h.settle()
	if len(model.requests()) != 0 || c.conv == nil || len(c.conv.Messages) != 2 || c.editing != -1 || !slices.Contains(c.convs, c.conv) {
		t.Errorf("after send, regenerate, edit and delete: %d requests, conversation %+v", len(model.requests()), c.conv)
	}
	if !strings.Contains(c.notice.Text(), "read-only") {
		t.Errorf("notice %q", c.notice.Text())
	}
	if b, err := os.ReadFile(path); err != nil || string(b) != newer {
		t.Errorf("the file now: %q, %v", b, err)
	}
}

// manualClock is a clock the test moves.
type manualClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *manualClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *manualClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// The meter waits for the first token (no "0.0 tok/s"), then shows the
// time to it, then the decode rate from the first measured step; the
// answer keeps the time to first token and the prompt's rate.
func TestChatMeterFromFirstStep(t *testing.T) {
	model := &fakeModel{pieces: []string{"And", " God", " said"}, step: make(chan struct{})}
	h := loadedHarness(t, model)
	c := h.m.chat
	clock := &manualClock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	c.now = clock.now
	c.input.SetText("Quote Genesis 1:3.")
	c.sendInput()
	if got := c.meter.Text(); got != "Waiting for the first token…" {
		t.Errorf("meter before the first token: %q", got)
	}
	clock.advance(250 * time.Millisecond)
	model.step <- struct{}{}
	h.waitFor("the first piece", func() bool { return strings.Contains(c.meter.Text(), "first token after") })
	if got := c.meter.Text(); strings.Contains(got, "tok/s") || !strings.Contains(got, "first token after 0.25 s") {
		t.Errorf("meter after the first token: %q", got)
	}
	clock.advance(100 * time.Millisecond)
	model.step <- struct{}{}
	h.waitFor("the second piece", func() bool { return strings.Contains(c.meter.Text(), "tok/s") })
	if got := c.meter.Text(); !strings.Contains(got, "2 tokens, 10.0 tok/s") {
		t.Errorf("meter after the second token: %q", got) // 1 token in 0.1 s since the first
	}
	model.step <- struct{}{}
	h.waitFor("the answer", func() bool { return c.cancel == nil })
	st := lastMessage(c).Stats
	if st == nil || st.TTFTSeconds != 0.25 || st.TokS != 100 {
		t.Fatalf("stats %+v", st)
	}
	if got := c.view.Messages()[1].Stats; !strings.Contains(got, "first token after 0.25 s") {
		t.Errorf("the answer's line %q", got)
	}
	if got := (MessageStats{Tokens: 30, TokS: 329.1, TTFTSeconds: 0.05, PromptTokens: 21, PrefillTokS: 871}).summary(); got != "30 tokens, 329.1 tok/s · first token after 0.05 s · prompt 21 tokens at 871 tok/s" {
		t.Errorf("summary %q", got)
	}
}

// Deleting a chat moves its file aside with an Undo; Undo brings it back,
// and once the Undo is closed the file is gone. Issue 26, item 6.
func TestDeleteChatUndo(t *testing.T) {
	model := &fakeModel{pieces: []string{"A fortune."}}
	h := loadedHarness(t, model)
	c := h.m.chat
	c.input.SetText("Tell me a fortune.")
	c.sendInput()
	h.waitFor("an answer", func() bool { return c.cancel == nil })
	h.settle()
	conv := c.conv
	files := func() []string {
		f, _ := filepath.Glob(filepath.Join(h.m.store.dir, conversationsDir, "*.json"))
		return f
	}
	if len(files()) != 1 {
		t.Fatalf("saved files %v", files())
	}
	c.deleteChat()
	h.settle()
	if slices.Contains(c.convs, conv) || len(files()) != 0 || !strings.Contains(c.notice.Text(), "Deleted “Tell me a fortune.”") {
		t.Fatalf("after delete: listed %v, files %v, notice %q", slices.Contains(c.convs, conv), files(), c.notice.Text())
	}
	tapButton(t, c.notice.shown[0], "Undo")
	h.settle()
	if c.conv != conv || len(files()) != 1 || c.notice.Visible() {
		t.Fatalf("after Undo: open %q, files %v, notice %q", c.conv.Title, files(), c.notice.Text())
	}
	if got := c.view.Messages(); len(got) != 2 || got[1].Text != "A fortune." {
		t.Errorf("restored transcript %+v", got)
	}
	c.deleteChat()
	h.settle()
	closeNotice(t, c.notice.shown[0]) // the Undo is over
	h.settle()
	aside, _ := filepath.Glob(filepath.Join(h.m.store.dir, deletedDir, "*"))
	if len(files()) != 0 || len(aside) != 0 {
		t.Errorf("after closing the Undo: files %v, aside %v", files(), aside)
	}
}

// The chat list is newest first with dates, can be searched, and a chat
// can be renamed; two chats with the same first message can be told apart.
func TestChatListRenameSearchDates(t *testing.T) {
	model := &fakeModel{pieces: []string{"ok"}}
	h := loadedHarness(t, model)
	c := h.m.chat
	for _, q := range []string{"Tell me a fortune.", "Quote Genesis 1:3.", "Tell me a fortune."} {
		c.newChat()
		c.input.SetText(q)
		c.sendInput()
		h.waitFor("an answer", func() bool { return c.cancel == nil })
		h.settle()
	}
	if len(c.shown) != 3 || c.shown[0] != c.conv {
		t.Fatalf("listed %d, the open chat first: %v", len(c.shown), c.shown[0] == c.conv)
	}
	for i := 1; i < len(c.shown); i++ {
		if c.shown[i].Updated.After(c.shown[i-1].Updated) {
			t.Errorf("not newest first at %d", i)
		}
	}
	c.title.SetText("Fortune, again")
	h.settle()
	saved, _, _ := h.m.store.loadConversations()
	if saved[0].Title != "Fortune, again" || c.shown[0].Title != "Fortune, again" {
		t.Errorf("after renaming: saved %q, listed %q", saved[0].Title, c.shown[0].Title)
	}
	c.search.SetText("genesis")
	if len(c.shown) != 2 || c.shown[1].Title != "Quote Genesis 1:3." {
		t.Errorf("search: %d listed", len(c.shown)) // the open chat stays listed
	}
	c.search.SetText("")
	now := time.Date(2026, 3, 2, 9, 30, 0, 0, time.UTC)
	for at, want := range map[time.Time]string{
		now.Add(-time.Hour):      "Today, 08:30",
		now.Add(-20 * time.Hour): "Yesterday, 13:30",
		now.AddDate(0, -1, 0):    "2 Feb, 09:30",
		now.AddDate(-1, 0, 0):    "2 Mar 2025",
	} {
		if got := when(at, now); got != want {
			t.Errorf("when(%v) = %q, want %q", at, got, want)
		}
	}
}

// The side panel's presets set the sampling the engine gets; a value typed
// by hand makes it Custom. The repeat penalty reaches the request.
func TestSamplingPresetsInThePanel(t *testing.T) {
	model := &fakeModel{pieces: []string{"ok"}}
	h := loadedHarness(t, model)
	c := h.m.chat
	if c.preset.Selected != "Precise" {
		t.Errorf("preset %q on a first start", c.preset.Selected)
	}
	c.preset.SetSelected("Balanced")
	if c.samplingFields[0].Text != "0.7" || c.samplingFields[4].Text != "1.1" || h.m.set.Chat.Preset != presetBalanced {
		t.Errorf("after Balanced: temperature %q, repeat penalty %q", c.samplingFields[0].Text, c.samplingFields[4].Text)
	}
	c.samplingFields[4].SetText("1.3")
	if c.preset.Selected != presetCustom || h.m.set.Chat.Preset != "" {
		t.Errorf("after typing: preset %q", c.preset.Selected)
	}
	c.input.SetText("hi")
	c.sendInput()
	h.waitFor("an answer", func() bool { return c.cancel == nil })
	reqs := model.requests()
	if s := reqs[len(reqs)-1].Sampling; s.Temperature != 0.7 || s.RepeatPenalty != 1.3 || s.TopP != 0.9 {
		t.Errorf("request sampling %+v", s)
	}
}

// verboseModel answers like model, with the statistics of a long answer
// whose draft was turned off: the longest line the chat shows under an
// answer and in its meter.
type verboseModel struct{ *fakeModel }

func (v verboseModel) Generate(ctx context.Context, req engine.Request, emit func(engine.Event)) (engine.Stats, error) {
	s, err := v.fakeModel.Generate(ctx, req, func(ev engine.Event) {
		ev.Stats.DraftOff = spec.ReasonCosts
		emit(ev)
	})
	s.GeneratedTokens, s.Drafted, s.Accepted, s.DecodeSeconds = 12345, 23456, 12345, 98.7
	s.PromptTokens, s.PrefillSeconds, s.DraftOff = 54321, 12.3, spec.ReasonCosts
	return s, err
}

// The end of an answer leaves the window's minimum size alone, so the
// window is not resized (under Xvfb the slowest frame of all: two stalls
// over 100 ms in frames.json came from an answer's statistics line, wider
// than the transcript, growing the window by 21 pixels), and it renders
// the answer alone: the messages before it keep their widgets and text.
func TestAnswerEndKeepsWindowSize(t *testing.T) {
	model := &fakeModel{pieces: []string{"And God", " said,", " Let there be light"}}
	h := loadedHarness(t, model)
	c := h.m.chat
	c.local = verboseModel{model}
	before := h.win.Content().MinSize()
	c.input.SetText("Quote Genesis 1:3.")
	c.sendInput()
	h.waitFor("the first answer", func() bool { return c.cancel == nil })
	first := c.view.Messages()
	c.input.SetText("And verse 4?")
	c.sendInput()
	h.waitFor("the second answer", func() bool { return c.cancel == nil })
	msgs := c.view.Messages()
	if len(msgs) != 4 || !strings.Contains(msgs[3].Stats, "drafting off") || !strings.Contains(c.meter.Text(), "drafting off") {
		t.Fatalf("transcript %+v, meter %q", msgs, c.meter.Text())
	}
	if after := h.win.Content().MinSize(); after.Width > before.Width {
		t.Errorf("the window's minimum width went from %v to %v after two answers with a long statistics line", before.Width, after.Width)
	}
	if !slices.Equal(msgs[:2], first) {
		t.Errorf("the first exchange changed: %+v, was %+v", msgs[:2], first)
	}
}
