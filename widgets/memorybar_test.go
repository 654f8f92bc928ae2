package widgets

import (
	"strings"
	"testing"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/test"
)

const gib = 1 << 30

func fitting() DeviceMemory {
	return DeviceMemory{Label: "GPU 0 · NVIDIA H200", Role: "target", Capacity: 10 * gib, Segments: []Segment{
		{Weights, 4 * gib}, {Head, gib / 2}, {KV, gib}, {Scratch, gib / 4}, {Overhead, gib / 2},
	}}
}

func overBudget() DeviceMemory {
	return DeviceMemory{Label: "GPU 1 · RTX 3090", Role: "both", Capacity: 8 * gib, Segments: []Segment{
		{Weights, 6 * gib}, {KV, 2 * gib}, {Draft, gib}, {Overhead, gib / 2},
	}}
}

func TestDeviceMemoryWords(t *testing.T) {
	if got := fitting().Verdict(); got != "6.3 GiB of 10 GiB, 3.8 GiB spare" {
		t.Errorf("fitting verdict %q", got)
	}
	o := overBudget()
	if o.Over() != gib+gib/2 || o.Verdict() != "9.5 GiB of 8.0 GiB: over by 1.5 GiB" {
		t.Errorf("over: %d, %q", o.Over(), o.Verdict())
	}
	if got := o.Breakdown(); got != "weights 6.0 GiB · KV cache 2.0 GiB · draft 1.0 GiB · overhead 512 MiB" {
		t.Errorf("breakdown %q", got)
	}
}

func TestMemoryBarImages(t *testing.T) {
	test.NewTempApp(t)
	for name, m := range map[string]DeviceMemory{"memorybar_fits.png": fitting(), "memorybar_over.png": overBudget()} {
		b := NewMemoryBar(m)
		b.Resize(fyne.NewSize(420, b.MinSize().Height))
		assertImage(t, name, b)
	}
}

// The over-budget part is drawn red from the capacity line to the end.
func TestMemoryBarOverShading(t *testing.T) {
	test.NewTempApp(t)
	b := NewMemoryBar(fitting())
	w := test.NewTempWindow(t, b)
	w.Resize(fyne.NewSize(500, 120))
	r := test.TempWidgetRenderer(t, b).(*memoryBarRenderer)
	if !r.over.Hidden || !r.limit.Hidden {
		t.Error("a fitting device shows the over-budget shading")
	}
	b.Set(overBudget())
	if r.over.Hidden || r.limit.Hidden {
		t.Fatal("an over-budget device shows no shading")
	}
	want := b.Size().Width * 8 / 9.5
	if got := r.over.Position().X; got < want-1 || got > want+1 {
		t.Errorf("shading starts at %.1f, want the capacity line at %.1f", got, want)
	}
	if r.verdict.Color != overColor() || !strings.Contains(r.verdict.Text, "over by") {
		t.Errorf("verdict %q in %v", r.verdict.Text, r.verdict.Color)
	}
}

func TestMemoryPreview(t *testing.T) {
	test.NewTempApp(t)
	p := NewMemoryPreview()
	var applied []int
	p.OnApply = func(i int) { applied = append(applied, i) }
	p.Set(Preview{Devices: []DeviceMemory{fitting(), overBudget()}, Summary: "Does not fit: GPU 1 is over by 1.5 GiB.",
		Suggestions: []string{"store the KV cache as q8_0", "use a context of 2048 tokens"}})
	w := test.NewTempWindow(t, p)
	w.Resize(fyne.NewSize(520, 420))
	assertMarkup(t, "preview_over.xml", p)

	// The second suggestion's Apply button.
	buttons := buttonsNamed(p, "Apply")
	if len(buttons) != 2 {
		t.Fatalf("%d Apply buttons, want 2", len(buttons))
	}
	test.Tap(buttons[1])
	if len(applied) != 1 || applied[0] != 1 {
		t.Errorf("applied %v, want [1]", applied)
	}

	p.Set(Preview{Devices: []DeviceMemory{fitting()}, Fits: true, Summary: "Fits."})
	assertMarkup(t, "preview_fits.xml", p)
}

// In a narrow window the line under the bar flows onto more lines rather
// than widening the bar past the window (the Models page at 800x600 was
// cut off by it: issue 26, item 10).
func TestMemoryBarBreakdownWraps(t *testing.T) {
	test.NewTempApp(t)
	b := NewMemoryBar(fitting())
	w := test.NewTempWindow(t, b)
	w.Resize(fyne.NewSize(900, 100))
	r := test.TempWidgetRenderer(t, b).(*memoryBarRenderer)
	rows := func() map[float32]bool {
		ys := map[float32]bool{}
		for _, t := range r.breakdown {
			ys[t.Position().Y] = true
		}
		return ys
	}
	if len(rows()) != 1 {
		t.Errorf("%d lines at 900 wide, want 1", len(rows()))
	}
	if min := b.MinSize().Width; min > 260 {
		t.Fatalf("min width %v: the bar cannot be narrower than its one-line breakdown", min)
	}
	b.Resize(fyne.NewSize(260, b.MinSize().Height))
	if len(rows()) < 2 || b.MinSize().Height <= 60 {
		t.Errorf("at 260 wide: %d lines, min height %v", len(rows()), b.MinSize().Height)
	}
	for _, t2 := range r.breakdown {
		if right := t2.Position().X + t2.Size().Width; right > 260 {
			t.Errorf("%q ends at %v, past the bar's width", t2.Text, right)
		}
	}
}
