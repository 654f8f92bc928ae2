package widgets

import (
	"testing"

	"fyne.io/fyne/v2"
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
