//go:build !headless

package app

import (
	"fmt"
	"strings"
	"testing"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/test"
	"fyne.io/fyne/v2/widget"

	"github.com/tandem-run/tandem/engine/device"
	"github.com/tandem-run/tandem/widgets"
)

// inAppMenuHeight is what the menu bar Fyne draws inside the window takes
// on X11 (the test window has no menu bar; models-800x600.png measures it
// at 28 px).
const inAppMenuHeight = 30

// rect is an object's place on the canvas.
type rect struct{ x0, y0, x1, y1 float32 }

func (r rect) inside(o rect) bool {
	const slack = 0.5 // rounding of positions
	return r.x0 >= o.x0-slack && r.y0 >= o.y0-slack && r.x1 <= o.x1+slack && r.y1 <= o.y1+slack
}

func (r rect) and(o rect) rect {
	return rect{max(r.x0, o.x0), max(r.y0, o.y0), min(r.x1, o.x1), min(r.y1, o.y1)}
}

func (r rect) String() string {
	return fmt.Sprintf("(%.0f,%.0f)-(%.0f,%.0f)", r.x0, r.y0, r.x1, r.y1)
}

// visibleRects walks the shown objects under o, placed at pos and seen
// through clip (the window, narrowed by each scroller on the way), and
// reports for each one in want its place and the part of the window it
// can be seen through.
func visibleRects(o fyne.CanvasObject, pos fyne.Position, clip rect, want map[fyne.CanvasObject]string, found map[string][2]rect) {
	if !o.Visible() {
		return
	}
	at := pos.Add(o.Position())
	r := rect{at.X, at.Y, at.X + o.Size().Width, at.Y + o.Size().Height}
	if name, ok := want[o]; ok {
		found[name] = [2]rect{r, clip}
	}
	if _, ok := o.(*container.Scroll); ok {
		clip = clip.and(r)
	}
	var children []fyne.CanvasObject
	switch c := o.(type) {
	case *fyne.Container:
		children = c.Objects
	case fyne.Widget:
		children = test.WidgetRenderer(c).Objects()
	}
	for _, k := range children {
		visibleRects(k, at, clip, want, found)
	}
}

// On an 800x600 screen, with the two notices of a first start on a machine
// without GPUs, every control of the Models page is in view without
// scrolling: the model buttons, the device zones, the context and KV cache
// fields, the memory preview, Load and the API server (issue 26: the Draft
// zone, Context, KV cache and the preview needed scrolling).
func TestModelsPageFitsSmallScreen(t *testing.T) {
	inv := withCPU(device.Inventory{Reason: "the NVIDIA driver is installed but not loaded"},
		strings.NewReader("MemTotal: 2097152 kB\nMemAvailable: 1048576 kB\n"))
	h := newHarnessOn(t, inv, nil, nil)
	m := h.m
	m.openModels()
	h.settle()
	if got := len(m.notice.shown); got != 2 {
		t.Fatalf("%d notices shown on a first start without GPUs, want 2:\n%s", got, m.notice.Text())
	}
	want := map[fyne.CanvasObject]string{
		m.gpus.ZoneArea(widgets.ZoneTarget): "Target zone",
		m.gpus.ZoneArea(widgets.ZoneDraft):  "Draft zone",
		m.ctxEntry:                          "Context field",
		m.kvSelect:                          "KV cache select",
		m.preview:                           "memory preview",
		m.loadBtn:                           "Load",
		m.serveCtl:                          "API server",
	}
	seen := map[string]int{} // the target's buttons come first, then the draft's
	for _, b := range buttonsIn(m.pages.Items[0].Content) {
		switch b.Text {
		case "Choose…", "Recent", "None":
			seen[b.Text]++
			want[b] = fmt.Sprintf("button %q #%d", b.Text, seen[b.Text])
		}
	}
	if seen["Choose…"] != 2 || seen["Recent"] != 2 || seen["None"] != 1 {
		t.Fatalf("model buttons %v", seen)
	}
	for _, s := range []string{"Context", "KV cache"} {
		want[labelIn(t, m.pages.Items[0].Content, s)] = s + " label"
	}
	for _, n := range m.notice.shown {
		want[n] = "notice " + n.Text()[:20]
	}
	// Fyne opens the window no smaller than its content's minimum.
	size := fitWindow(screenPixels{800, 600}, 1)
	size.Height -= inAppMenuHeight
	size = size.Max(h.win.Content().MinSize())
	if size.Width > 800 || size.Height+inAppMenuHeight > 600 {
		t.Fatalf("the window's content is %v at the least: more than an 800x600 screen holds", size)
	}
	h.win.Resize(size)
	h.settle()
	found := map[string][2]rect{}
	win := rect{0, 0, size.Width, size.Height}
	visibleRects(h.win.Content(), fyne.Position{}, win, want, found)
	for _, name := range want {
		r, ok := found[name]
		switch {
		case !ok:
			t.Errorf("%s is not shown", name)
		case !r[0].inside(r[1]):
			t.Errorf("%s at %v, outside what can be seen of it, %v", name, r[0], r[1])
		}
	}
}

// labelIn is the label under o that says text.
func labelIn(t *testing.T, o fyne.CanvasObject, text string) fyne.CanvasObject {
	t.Helper()
	var hit fyne.CanvasObject
	var walk func(fyne.CanvasObject)
	walk = func(o fyne.CanvasObject) {
		switch c := o.(type) {
		case *widget.Label:
			if c.Text == text {
				hit = c
			}
		case *fyne.Container:
			for _, k := range c.Objects {
				walk(k)
			}
		case fyne.Widget:
			for _, k := range test.WidgetRenderer(c).Objects() {
				walk(k)
			}
		}
	}
	walk(o)
	if hit == nil {
		t.Fatalf("no label %q", text)
	}
	return hit
}
