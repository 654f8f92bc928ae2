//go:build !headless

package app

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"fyne.io/fyne/v2/test"
	"fyne.io/fyne/v2/widget"

	"github.com/tandem-run/tandem/engine/plan"
)

// The CPU dragged into the Draft zone beside GPU 0: the one-block demo
// draft cannot be shared, so the planner refuses the layout. The status
// leaves "Planning…", the preview says what to do in the user's terms (the
// Draft zone has no ratio to raise), and a one-click fix plans and loads.
// Issue 26, item 3.
func TestIdleDraftDeviceOffersAFix(t *testing.T) {
	h := newHarness(t, func(s *Settings) { s.Layout.TargetDevices, s.Layout.DraftDevices = []int{1}, []int{0, 2} }, nil)
	m := h.m
	m.chooseModel("target", h.demo.Target)
	m.chooseModel("draft", h.demo.Draft)
	h.settle()
	if st := m.status.Text; strings.Contains(st, "Planning") || !m.loadBtn.Disabled() {
		t.Errorf("status %q, Load disabled %v", st, m.loadBtn.Disabled())
	}
	pv := m.preview.Preview()
	if strings.Contains(pv.Error, "ratio") || !strings.Contains(pv.Error, "cuda0/0") || !strings.Contains(pv.Error, "2 blocks") {
		t.Errorf("preview error %q", pv.Error)
	}
	t.Logf("refused: %q, fixes %q", pv.Error, pv.Suggestions)
	fix := slices.IndexFunc(pv.Suggestions, func(s string) bool { return strings.HasPrefix(s, "Run the draft on CPU only") })
	if fix < 0 {
		t.Fatalf("fixes %q: none runs the draft on the CPU alone", pv.Suggestions)
	}
	m.preview.Apply(fix)
	h.settle()
	if !slices.Equal(m.set.Layout.DraftDevices, []int{2}) || !slices.Equal(m.gpus.Placement().Draft, []int{2}) {
		t.Errorf("draft devices %v, canvas %v after the fix", m.set.Layout.DraftDevices, m.gpus.Placement().Draft)
	}
	if pv := m.preview.Preview(); pv.Error != "" || !pv.Fits || m.loadBtn.Disabled() {
		t.Errorf("after the fix: %+v, Load disabled %v, status %q", pv, m.loadBtn.Disabled(), m.status.Text)
	}
}

// A target device given too low a ratio: the fix names its share in the
// user's percent, and the target's ratios take it.
func TestIdleTargetDeviceOffersAFix(t *testing.T) {
	h := newHarness(t, func(s *Settings) {
		s.Layout.TargetDevices, s.Layout.TargetRatios, s.Layout.DraftDevices = []int{0, 1}, []float64{1, 100}, []int{1}
	}, nil)
	m := h.m
	m.chooseModel("target", h.demo.Target)
	h.settle()
	pv := m.preview.Preview()
	if !strings.Contains(pv.Error, "cuda0/0") || !strings.Contains(pv.Error, "ratio") {
		t.Errorf("preview error %q", pv.Error)
	}
	t.Logf("refused: %q, fixes %q", pv.Error, pv.Suggestions)
	fix := slices.IndexFunc(pv.Suggestions, func(s string) bool { return strings.HasPrefix(s, "Give cuda0/0 a ") })
	if fix < 0 {
		t.Fatalf("fixes %q: none raises the share", pv.Suggestions)
	}
	m.preview.Apply(fix)
	h.settle()
	if r := m.set.Layout.TargetRatios; len(r) != 2 || r[0] <= 1 || !slices.Equal(m.gpus.Placement().Ratios, r) {
		t.Errorf("ratios %v, canvas %v after the fix", r, m.gpus.Placement().Ratios)
	}
	if pv := m.preview.Preview(); pv.Error != "" || m.plan == nil {
		t.Errorf("after the fix: %+v", pv)
	}
}

// The context field is bounded by the target's trained length: 99999 is
// refused with the reason until the override is ticked, the plan keeps
// the trained length meanwhile, and a too-large context's fixes are the
// trained length or powers of two below it (24999 once). Issue 26, item 4.
func TestContextBoundByTrainedLength(t *testing.T) {
	h := newHarness(t, func(s *Settings) { s.Layout.TargetDevices, s.Layout.DraftDevices = []int{0}, []int{1} }, nil)
	m := h.m
	m.chooseModel("target", h.demo.Target)
	h.settle()
	trained := plan.TrainedCtx(m.target)
	if trained <= 0 || trained >= 99999 {
		t.Fatalf("the demo target's trained length is %d", trained)
	}
	if m.ctxEntry.PlaceHolder != fmt.Sprintf("auto: %d", min(trained, plan.DefaultCtx)) || m.ctxUnit.Text != fmt.Sprintf("tokens (trained on %d)", trained) || m.ctxOver.Visible() {
		t.Errorf("placeholder %q, unit %q, override shown %v", m.ctxEntry.PlaceHolder, m.ctxUnit.Text, m.ctxOver.Visible())
	}
	test.Type(m.ctxEntry, "99999")
	h.settle()
	if m.set.Layout.Ctx == 99999 || m.plan == nil || m.plan.Ctx > trained {
		t.Errorf("99999 taken: layout %d, plan %v", m.set.Layout.Ctx, m.plan)
	}
	if !strings.HasPrefix(m.ctxHint.Text, fmt.Sprintf("At most %d", trained)) || m.ctxHint.Importance != widget.DangerImportance {
		t.Errorf("entry %q, hint %q", m.ctxEntry.Text, m.ctxHint.Text)
	}
	if !m.ctxOver.Visible() {
		t.Fatal("the override is not offered")
	}
	test.Tap(m.ctxOver)
	h.settle()
	if m.set.Layout.Ctx != 99999 || !m.set.Layout.CtxOverride || m.plan == nil || m.plan.Ctx != 99999 {
		t.Fatalf("with the override: layout %+v, plan %v", m.set.Layout, m.plan)
	}
	if !strings.Contains(m.ctxHint.Text, "fall apart") {
		t.Errorf("hint %q", m.ctxHint.Text)
	}
	var ctxFixes int
	for _, s := range m.plan.Suggestions {
		if c := s.Change.Ctx; c > 0 {
			ctxFixes++
			if c > trained || c != trained && c&(c-1) != 0 {
				t.Errorf("fix %q: a context neither trained nor a power of two below it", s.Text)
			}
		}
	}
	if m.plan.Fits || ctxFixes == 0 {
		t.Errorf("99999 tokens on a 64 MiB GPU: fits %v, %d context fixes", m.plan.Fits, ctxFixes)
	}
	// Unticked, the saved number stays but the plan is bounded again.
	test.Tap(m.ctxOver)
	h.settle()
	if m.set.Layout.CtxOverride || m.plan == nil || m.plan.Ctx > trained {
		t.Errorf("override off: layout %+v, plan %v", m.set.Layout, m.plan)
	}
}
