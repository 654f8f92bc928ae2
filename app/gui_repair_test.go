//go:build !headless

package app

import (
	"slices"
	"strings"
	"testing"
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
