package widgets

import (
	"strings"
	"testing"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/test"
)

func TestModelCard(t *testing.T) {
	test.NewTempApp(t)
	c := NewModelCard(ModelInfo{Title: "Draft model"})
	c.Resize(fyne.NewSize(360, 300))
	assertMarkup(t, "card_empty.xml", c)
	c.Set(ModelInfo{Title: "Draft model", File: "factory-draft-Q8_0.gguf",
		Rows:    [][2]string{{"architecture", "llama"}, {"parameters", "4.2M"}},
		Verdict: "Its vocabulary (8192 tokens) differs from the target's (32000).", Bad: true})
	assertMarkup(t, "card_bad.xml", c)
}

func TestNoticeDetails(t *testing.T) {
	test.NewTempApp(t)
	n := NewNotice()
	w := test.NewTempWindow(t, n)
	w.Resize(fyne.NewSize(500, 200))
	if n.Visible() {
		t.Error("a new notice is visible")
	}
	n.Set(NoticeError, "Loading failed: out of memory on GPU 0.", "engine: load: cuda: alloc 2147483648 bytes: CUDA_ERROR_OUT_OF_MEMORY")
	if !n.Visible() || n.detail.Visible() {
		t.Fatal("error shown with its detail open, or not shown")
	}
	d := buttonsNamed(n, "Details")
	if len(d) != 1 {
		t.Fatal("no Details button")
	}
	test.Tap(d[0])
	if !n.detail.Visible() {
		t.Error("Details did not show the detail")
	}
	assertMarkup(t, "notice_error_details.xml", n)
	dismissed := false
	n.OnDismiss(func() { dismissed = true })
	n.Set(NoticeInfo, "The demo pair is selected.", "")
	if len(buttonsNamed(n, "Details")) != 0 {
		t.Error("Details offered without detail")
	}
	for _, o := range test.LaidOutObjects(n) {
		if b, ok := o.(fyne.Tappable); ok && b != nil && isCloseButton(o) {
			test.Tap(b)
		}
	}
	if !dismissed || n.Visible() {
		t.Error("closing did not hide and report")
	}
}

func TestMeter(t *testing.T) {
	test.NewTempApp(t)
	m := NewMeter()
	m.Resize(fyne.NewSize(200, 30))
	m.Set(1.7, "acceptance")
	if m.Value() != 1 {
		t.Errorf("value %v not clamped to 1", m.Value())
	}
	m.Set(0.25, "acceptance 25%")
	r := test.TempWidgetRenderer(t, m).(*meterRenderer)
	r.Layout(fyne.NewSize(200, 30))
	if w := r.fill.Size().Width; w != 50 {
		t.Errorf("fill %v wide, want a quarter of 200", w)
	}
}

// A caption wider than the meter is cut with an ellipsis rather than
// widening the meter (and the window around it); the whole caption is
// still the meter's Text and shows whole once there is room.
func TestMeterElidesCaption(t *testing.T) {
	test.NewTempApp(t)
	m := NewMeter()
	long := "acceptance 46% (6 of 13 drafted) · 30 tokens, 713.9 tok/s · first token after 0.06 s · drafting off: drafting costs more than it saves on this pair"
	m.Set(0.46, long)
	r := test.TempWidgetRenderer(t, m).(*meterRenderer)
	if w := m.MinSize().Width; w > 120 {
		t.Errorf("meter min width %v with a long caption, want 120", w)
	}
	r.Layout(fyne.NewSize(300, 30))
	shown := r.text.Text
	if !strings.HasSuffix(shown, "…") || !strings.HasPrefix(long, strings.TrimSuffix(shown, "…")) || r.text.MinSize().Width > 300 {
		t.Errorf("at 300 wide the caption shows %q (%v wide)", shown, r.text.MinSize().Width)
	}
	if m.Text() != long {
		t.Errorf("Text() %q", m.Text())
	}
	r.Layout(fyne.NewSize(2000, 30))
	if r.text.Text != long {
		t.Errorf("at 2000 wide the caption shows %q", r.text.Text)
	}
}

// A compact notice keeps a long text to one line until More unfolds it,
// and Less folds it again; each fold is reported so the page can lay out.
func TestNoticeCompact(t *testing.T) {
	test.NewTempApp(t)
	long := "No GPUs listed: the NVIDIA driver is installed but not loaded. Models run on the CPU. " +
		"For NVIDIA GPUs, install the NVIDIA driver, reboot and start Tandem again; no CUDA toolkit is needed."
	n := NewNotice()
	w := test.NewTempWindow(t, n)
	w.Resize(fyne.NewSize(500, 300))
	n.Set(NoticeInfo, long, "")
	full := n.MinSize().Height
	if len(buttonsNamed(n, "More")) != 0 {
		t.Error("a notice that is not compact offers More")
	}
	n.SetCompact(true)
	one := n.MinSize().Height
	if !n.Folded() || one >= full {
		t.Fatalf("compact notice %v high, the whole text %v: not one line", one, full)
	}
	folds := 0
	n.OnFold(func() { folds++ })
	more := buttonsNamed(n, "More")
	if len(more) != 1 {
		t.Fatal("no More button on a compact notice")
	}
	test.Tap(more[0])
	if n.Folded() || n.MinSize().Height != full || folds != 1 {
		t.Fatalf("after More: folded %v, %v high (want %v), %d folds reported", n.Folded(), n.MinSize().Height, full, folds)
	}
	test.Tap(buttonsNamed(n, "Less")[0])
	if !n.Folded() || n.MinSize().Height != one || folds != 2 {
		t.Errorf("after Less: folded %v, %v high (want %v), %d folds reported", n.Folded(), n.MinSize().Height, one, folds)
	}
}
