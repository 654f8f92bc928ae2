package widgets

import (
	"testing"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/canvas"
	"fyne.io/fyne/v2/test"
	"fyne.io/fyne/v2/widget"
)

// A head-sharing draft's two ways: the one in use is marked, the other is
// one tap away, and a way that does not fit reads as a problem.
func TestMemoryPreviewBorrow(t *testing.T) {
	test.NewTempApp(t)
	p := NewMemoryPreview()
	var switched []int
	p.OnBorrow = func(i int) { switched = append(switched, i) }
	p.Set(Preview{Devices: []DeviceMemory{fitting()}, Fits: true, Summary: "Fits.", Borrow: &Borrow{
		Text: "The draft borrows the target's output head (64 MiB).",
		Options: []BorrowOption{
			{Text: "Use it where the target keeps it (GPU 0). The draft holds 10 MiB on GPU 1.", Chosen: true, Fits: true},
			{Text: "Copy it (64 MiB) to GPU 1. The draft holds 74 MiB on GPU 1; does not fit.", Fits: false},
		}}})
	w := test.NewTempWindow(t, p)
	w.Resize(fyne.NewSize(520, 480))
	assertMarkup(t, "preview_borrow.xml", p)

	buttons := buttonsNamed(p, "Switch")
	if len(buttons) != 1 {
		t.Fatalf("%d Switch buttons, want 1 (for the way not in use)", len(buttons))
	}
	test.Tap(buttons[0])
	p.SwitchBorrow(0) // in use already: nothing to do
	if len(switched) != 1 || switched[0] != 1 {
		t.Errorf("switched %v, want [1]", switched)
	}
	var danger int
	for _, o := range test.LaidOutObjects(p) {
		if l, ok := o.(*widget.Label); ok && l.Importance == widget.DangerImportance {
			danger++
		}
	}
	if danger != 1 {
		t.Errorf("%d lines shown as problems, want the copy that does not fit", danger)
	}

	p.Set(Preview{Devices: []DeviceMemory{fitting()}, Fits: true, Summary: "Fits."})
	if len(buttonsNamed(p, "Switch")) != 0 {
		t.Error("borrow options stay after a plan without a borrowing draft")
	}
}

// When nothing local fits, the preview offers a remote engine in words and
// one button.
func TestMemoryPreviewRemoteHint(t *testing.T) {
	test.NewTempApp(t)
	p := NewMemoryPreview()
	asked := 0
	p.OnRemote = func() { asked++ }
	p.Set(Preview{Devices: []DeviceMemory{overBudget()}, Summary: "Does not fit: GPU 1 is over by 1.5 GiB.",
		Remote: "No layout of these devices fits: run the model on a server that spans machines."})
	w := test.NewTempWindow(t, p)
	w.Resize(fyne.NewSize(520, 420))
	b := buttonsNamed(p, "Use a remote server…")
	if len(b) != 1 {
		t.Fatalf("%d remote buttons, want 1", len(b))
	}
	test.Tap(b[0])
	if asked != 1 {
		t.Errorf("OnRemote called %d times", asked)
	}
	p.Set(Preview{Devices: []DeviceMemory{fitting()}, Fits: true, Summary: "Fits."})
	if len(buttonsNamed(p, "Use a remote server…")) != 0 {
		t.Error("the remote hint stays once the layout fits")
	}
}

// Experts kept in system RAM: the CPU's bar beside the GPU's holds them,
// the legend names them only then, and the check box turns them off.
func TestMemoryPreviewExperts(t *testing.T) {
	test.NewTempApp(t)
	p := NewMemoryPreview()
	var calls [][2]bool
	p.OnExperts = func(draft, on bool) { calls = append(calls, [2]bool{draft, on}) }
	cpu := DeviceMemory{Label: "CPU · host memory", Role: "target", Capacity: 64 * gib,
		Segments: []Segment{{Weights, 0}, {Scratch, gib / 64}, {Experts, 17 * gib}}}
	p.Set(Preview{Devices: []DeviceMemory{fitting(), cpu}, Fits: true, Summary: "Fits.",
		Experts: []ExpertsOption{{Text: "Keep the target's experts in system RAM (17 GiB)", On: true}}})
	w := test.NewTempWindow(t, p)
	w.Resize(fyne.NewSize(520, 480))
	if !legendNames(p, "experts") {
		t.Error("the legend does not name the experts the CPU holds")
	}
	if got := cpu.Breakdown(); got != "scratch 16 MiB · experts 17 GiB" {
		t.Errorf("CPU breakdown %q", got)
	}
	var boxes []*widget.Check
	for _, o := range test.LaidOutObjects(p) {
		if c, ok := o.(*widget.Check); ok {
			boxes = append(boxes, c)
		}
	}
	if len(boxes) != 1 || !boxes[0].Checked {
		t.Fatalf("%d check boxes, want one, checked", len(boxes))
	}
	test.Tap(boxes[0])
	p.SetExperts(false, true) // on already: nothing to do
	if len(calls) != 1 || calls[0] != [2]bool{false, false} {
		t.Errorf("calls %v, want the target's experts turned off once", calls)
	}
	p.Set(Preview{Devices: []DeviceMemory{fitting()}, Fits: true, Summary: "Fits."})
	if legendNames(p, "experts") {
		t.Error("the legend names experts after a plan without them")
	}
}

// legendNames reports whether the preview's legend has an entry named s.
func legendNames(p *MemoryPreview, s string) bool {
	for _, o := range test.LaidOutObjects(p.legend) {
		if t, ok := o.(*canvas.Text); ok && t.Text == s && t.Visible() {
			return true
		}
	}
	return false
}
