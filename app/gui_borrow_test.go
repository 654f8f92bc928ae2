//go:build !headless

package app

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/tandem-run/tandem/engine"
	"github.com/tandem-run/tandem/engine/plan"
	"github.com/tandem-run/tandem/kernels/quant"
	"github.com/tandem-run/tandem/kernels/sharedtest"
)

// An EAGLE-3 draft on a GPU of its own: its card says it borrows the
// target's embedding and head, the preview shows where the borrowed head is
// used and what a copy would cost, and one click switches the way, planned
// again.
func TestBorrowedHeadShownAndSwitched(t *testing.T) {
	var loadedWith engine.Config
	load := func(ctx context.Context, cfg engine.Config, progress func(engine.Progress)) (loadedModel, error) {
		loadedWith = cfg
		return infoModel{&fakeModel{}, []string{"token_embd.weight", "output.weight"}}, nil
	}
	h := newHarness(t, func(s *Settings) { s.Layout.TargetDevices, s.Layout.DraftDevices = []int{0}, []int{1} }, load)
	m := h.m
	m.chooseModel("target", h.demo.Target)
	m.chooseModel("draft", sharedtest.Path(t, "models", "factory-eagle3-F16.gguf"))
	h.settle()
	var row string
	for _, r := range m.draftCard.Info().Rows {
		if r[0] == "borrows" {
			row = r[1]
		}
	}
	if !strings.Contains(row, "EAGLE-3") || !strings.Contains(row, "output head") {
		t.Errorf("draft card rows %q: nothing says it borrows the head", m.draftCard.Info().Rows)
	}

	b := m.preview.Preview().Borrow
	if m.plan == nil || b == nil || len(b.Options) != 2 {
		t.Fatalf("preview borrow %+v (plan %v)", b, m.plan != nil)
	}
	if !strings.Contains(b.Text, "output.weight") || !strings.Contains(b.Text, "a copy costs") {
		t.Errorf("borrow text %q", b.Text)
	}
	chosen, other := -1, -1
	gpu1 := "on " + planDeviceName(m.plan, 1)
	for i, o := range b.Options {
		if !strings.Contains(o.Text, "The draft holds") || !strings.Contains(o.Text, gpu1) {
			t.Errorf("option %d %q does not give the draft's cost per device", i, o.Text)
		}
		if o.Chosen {
			chosen = i
		} else {
			other = i
		}
	}
	if chosen < 0 || other < 0 || !strings.HasPrefix(b.Options[chosen].Text, "Use the target's") {
		t.Fatalf("options %+v: in place is not the one in use", b.Options)
	}
	inPlace := m.plan.Devices

	m.preview.SwitchBorrow(other)
	h.settle()
	if m.set.Layout.Borrow != string(plan.BorrowCopy) || m.plan == nil || m.plan.Draft.Placement.Borrow != plan.BorrowCopy {
		t.Fatalf("after the switch: layout borrow %q, plan %v", m.set.Layout.Borrow, m.plan != nil)
	}
	b = m.preview.Preview().Borrow
	if !b.Options[other].Chosen || !strings.HasPrefix(b.Options[other].Text, "Copy the target's") {
		t.Errorf("after the switch the preview shows %+v", b.Options)
	}
	draftOn1 := func(ds []plan.Budget) int64 {
		for _, d := range ds {
			if d.Device.Index == 1 {
				return d.Draft.Total()
			}
		}
		return 0
	}
	if draftOn1(m.plan.Devices) <= draftOn1(inPlace) {
		t.Errorf("the copy does not add to the draft's GPU: %d, in place %d", draftOn1(m.plan.Devices), draftOn1(inPlace))
	}

	// Loaded, the engine gets the plan's way, and the card says what the
	// engine borrowed.
	m.startLoad()
	h.waitFor("the load", func() bool { return m.model != nil })
	if p := loadedWith.Plan; p == nil || p.Draft.Placement.Borrow != plan.BorrowCopy || len(p.Draft.Placement.Devices) != 1 || p.Draft.Placement.Devices[0] != 1 {
		t.Fatalf("loaded with plan %+v", loadedWith.Plan)
	}
	if want := "on " + deviceName(m.inv.Devices[0]) + " (draft on " + deviceName(m.inv.Devices[1]) + ")"; !strings.Contains(m.status.Text, want) {
		t.Errorf("status %q does not say %q", m.status.Text, want)
	}
	if rows := m.draftCard.Info().Rows; !strings.Contains(rows[len(rows)-1][1], "loaded using the target's token embedding and output head") {
		t.Errorf("loaded draft card rows %q", rows)
	}
	m.unload()
	h.settle()
	if rows := m.draftCard.Info().Rows; strings.Contains(rows[len(rows)-1][1], "loaded") {
		t.Errorf("unloaded draft card rows %q", rows)
	}
}

// infoModel is a fake loaded model that describes itself like the engine.
type infoModel struct {
	*fakeModel
	borrows []string
}

func (m infoModel) Info() engine.Info { return engine.Info{DraftBorrows: m.borrows} }

// The window's config loads an EAGLE-3 draft through the real engine on the
// plan's placement (here the CPU, with the head copied), and the card then
// names what the engine borrowed.
func TestEagle3DraftLoadsAsPlanned(t *testing.T) {
	h := newHarness(t, func(s *Settings) {
		s.Layout.TargetDevices, s.Layout.DraftDevices, s.Layout.Borrow = []int{2}, []int{2}, string(plan.BorrowCopy)
	}, engineLoad)
	m := h.m
	m.chooseModel("target", h.demo.Target)
	m.chooseModel("draft", sharedtest.Path(t, "models", "factory-eagle3-F16.gguf"))
	h.settle()
	m.startLoad()
	h.waitFor("the load", func() bool { return m.cancelLoad == nil })
	if m.model == nil {
		t.Fatalf("not loaded: %q", m.errNotice.Text())
	}
	if len(m.draftBorrows) == 0 || !strings.Contains(m.draftCard.Info().Rows[len(m.draftCard.Info().Rows)-1][1], "loaded using") {
		t.Errorf("borrows %v, card %q", m.draftBorrows, m.draftCard.Info().Rows)
	}
	st, err := m.model.Generate(context.Background(), engine.Request{Prompt: "Hello", MaxTokens: 4}, func(engine.Event) {})
	if err != nil || st.GeneratedTokens != 4 {
		t.Errorf("generation: %+v, %v", st, err)
	}
}

// The planner's "store the KV cache as q8_0" fix, one click in the window,
// turns a layout that does not fit (a context whose F16 cache outgrows the
// host's 1 GiB) into one that loads through the real engine, with the
// plan's q8_0 cache, and chats.
func TestKVFixLoadsAndChats(t *testing.T) {
	h := newHarness(t, func(s *Settings) {
		// Past the demo's trained 2048 tokens: the override is ticked.
		s.Layout.TargetDevices, s.Layout.Ctx, s.Layout.CtxOverride = []int{2}, 300000, true
	}, engineLoad)
	m := h.m
	m.chooseModel("target", h.demo.Target)
	m.setModel("draft", nil)
	h.settle()
	if kv := m.kvSelect.Options; !slices.Equal(kv, []string{"f16", "q8_0", "q4_0", "f32"}) {
		t.Errorf("the CPU's cache types offered: %v", kv)
	}
	pv := m.preview.Preview()
	fix := slices.Index(pv.Suggestions, "Store the KV cache as q8_0.")
	if pv.Fits || fix < 0 {
		t.Fatalf("preview %+v: want one over budget with the q8_0 fix", pv)
	}
	m.preview.Apply(fix)
	h.settle()
	if !m.preview.Preview().Fits || m.set.Layout.KVType != "q8_0" || m.kvSelect.Selected != "q8_0" {
		t.Fatalf("after the fix: %+v, KV %q, select %q", m.preview.Preview(), m.set.Layout.KVType, m.kvSelect.Selected)
	}
	m.startLoad()
	h.waitFor("the load", func() bool { return m.cancelLoad == nil })
	if m.model == nil {
		t.Fatalf("not loaded: %q", m.errNotice.Text())
	}
	r := m.model.(*engine.Runner)
	if kv := r.Plan().KV; kv != plan.SameKV(quant.Q8_0) {
		t.Errorf("loaded with a %v cache", kv)
	}
	c := m.chat
	c.input.SetText("Quote Genesis 1:1.")
	c.sendInput()
	h.waitFor("the answer", func() bool {
		msgs := c.view.Messages()
		return len(msgs) == 2 && !msgs[1].Streaming && msgs[1].Text != ""
	})
	t.Logf("answer: %q", c.view.Messages()[1].Text)
}
