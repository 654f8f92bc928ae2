package widgets

import (
	"slices"
	"strings"
	"testing"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/test"
)

func testChips() []ChipInfo {
	return []ChipInfo{
		{ID: 0, Name: "GPU 0", Model: "NVIDIA H200", Memory: "139 GiB free of 141 GiB", Badges: []string{"NVLink 1"}},
		{ID: 1, Name: "GPU 1", Model: "NVIDIA H200", Memory: "139 GiB free of 141 GiB", Badges: []string{"NVLink 0"}},
		{ID: 2, Name: "GPU 2", Model: "NVIDIA RTX 3090", Memory: "23 GiB free of 24 GiB"},
		{ID: 100, Name: "CPU", Model: "host memory", Memory: "62 GiB free of 64 GiB", CPU: true},
	}
}

// newTestCanvas shows a canvas with the test chips in a window and records
// every placement it reports.
func newTestCanvas(t *testing.T, p Placement) (*GPUCanvas, fyne.Window, *[]Placement) {
	t.Helper()
	test.NewTempApp(t)
	g := NewGPUCanvas()
	g.SetDevices(testChips())
	g.SetPlacement(p)
	var got []Placement
	g.OnChanged = func(p Placement) { got = append(got, p) }
	w := test.NewTempWindow(t, g)
	w.Resize(fyne.NewSize(900, 700))
	return g, w, &got
}

func center(o fyne.CanvasObject) fyne.Position {
	p := fyne.CurrentApp().Driver().AbsolutePositionForObject(o)
	return p.Add(fyne.NewPos(o.Size().Width/2, o.Size().Height/2))
}

// drag drags o so that its centre lands on to.
func drag(w fyne.Window, o fyne.CanvasObject, to fyne.Position) {
	from := center(o)
	test.Drag(w.Canvas(), from, to.X-from.X, to.Y-from.Y)
}

func last(t *testing.T, got *[]Placement, calls int) Placement {
	t.Helper()
	if len(*got) != calls {
		t.Fatalf("OnChanged called %d times, want %d", len(*got), calls)
	}
	return (*got)[calls-1]
}

func TestDragChipIntoZones(t *testing.T) {
	g, w, got := newTestCanvas(t, Placement{})
	drag(w, g.chipIn(ZonePool, 1), center(g.zones[ZoneTarget].all))
	if p := last(t, got, 1); !slices.Equal(p.Target, []int{1}) || len(p.Draft) != 0 {
		t.Fatalf("after dragging GPU 1 to the target: %+v", p)
	}
	// A GPU may serve both models.
	drag(w, g.chipIn(ZonePool, 1), center(g.zones[ZoneDraft].all))
	drag(w, g.chipIn(ZonePool, 0), center(g.chipIn(ZoneTarget, 1)).Subtract(fyne.NewPos(chipWidth/2-4, 0)))
	p := last(t, got, 3)
	if !slices.Equal(p.Target, []int{0, 1}) || !slices.Equal(p.Draft, []int{1}) {
		t.Fatalf("after dropping GPU 0 before GPU 1: %+v", p)
	}
	if g.chipIn(ZoneTarget, 0) == nil || g.chipIn(ZoneDraft, 1) == nil {
		t.Error("dropped chips are not shown in their zones")
	}
	assertImage(t, "gpucanvas.png", g)
}

func TestDragReordersAndRemoves(t *testing.T) {
	g, w, got := newTestCanvas(t, Placement{Target: []int{0, 1, 2}, Ratios: []float64{5, 3, 2}, Draft: []int{2}})
	// GPU 0 dropped right of GPU 2: last place, its ratio going with it.
	drag(w, g.chipIn(ZoneTarget, 0), center(g.chipIn(ZoneTarget, 2)).Add(fyne.NewPos(chipWidth/2-4, 0)))
	p := last(t, got, 1)
	if !slices.Equal(p.Target, []int{1, 2, 0}) || !slices.Equal(p.Ratios, []float64{3, 2, 5}) {
		t.Fatalf("reorder: %+v", p)
	}
	// Dragged out of every zone: removed from that zone only.
	drag(w, g.chipIn(ZoneTarget, 2), center(g.chipIn(ZonePool, 0)))
	p = last(t, got, 2)
	if !slices.Equal(p.Target, []int{1, 0}) || !slices.Equal(p.Ratios, []float64{3, 5}) || !slices.Equal(p.Draft, []int{2}) {
		t.Fatalf("remove: %+v", p)
	}
	// From the draft zone into the target zone: a move. The ratios typed
	// for the others stay; the newcomer gets their mean.
	drag(w, g.chipIn(ZoneDraft, 2), center(g.zones[ZoneTarget].all))
	p = last(t, got, 3)
	if !slices.Equal(p.Target, []int{1, 0, 2}) || len(p.Draft) != 0 || !slices.Equal(p.Ratios, []float64{3, 5, 4}) {
		t.Fatalf("move draft to target: %+v", p)
	}
	if g.ghost != nil || len(g.layer.Objects) != 0 {
		t.Error("drag ghost left on the top layer")
	}
}

func TestDragFromPoolToNowhereChangesNothing(t *testing.T) {
	g, w, got := newTestCanvas(t, Placement{Target: []int{0}})
	drag(w, g.chipIn(ZonePool, 2), center(g.chipIn(ZonePool, 0)))
	if len(*got) != 0 {
		t.Errorf("OnChanged called: %+v", *got)
	}
}

// Every drag has a keyboard equivalent on a focused chip.
func TestChipKeys(t *testing.T) {
	g, w, got := newTestCanvas(t, Placement{})
	c := w.Canvas()
	c.Focus(g.chipIn(ZonePool, 2))
	test.Type(c.Focused(), "t")
	c.Focus(g.chipIn(ZonePool, 0))
	test.Type(c.Focused(), "td")
	p := last(t, got, 3)
	if !slices.Equal(p.Target, []int{2, 0}) || !slices.Equal(p.Draft, []int{0}) {
		t.Fatalf("after T, T, D: %+v", p)
	}
	c.Focus(g.chipIn(ZoneTarget, 0))
	c.Focused().TypedKey(&fyne.KeyEvent{Name: fyne.KeyLeft})
	if p = last(t, got, 4); !slices.Equal(p.Target, []int{0, 2}) {
		t.Fatalf("after Left: %+v", p)
	}
	if c.Focused() != g.chipIn(ZoneTarget, 0) {
		t.Error("the moved chip lost the focus")
	}
	c.Focused().TypedKey(&fyne.KeyEvent{Name: fyne.KeyDelete})
	if p = last(t, got, 5); !slices.Equal(p.Target, []int{2}) {
		t.Fatalf("after Delete: %+v", p)
	}
}

func TestRatioFields(t *testing.T) {
	g, _, got := newTestCanvas(t, Placement{Target: []int{0, 1}})
	g.SetAutoRatios([]float64{50, 50})
	e0, e1 := g.ratios[0], g.ratios[1]
	if e0.PlaceHolder != "auto 50" {
		t.Errorf("placeholder %q", e0.PlaceHolder)
	}
	test.Type(e0, "3")
	if len(*got) != 0 {
		t.Fatalf("one of two ratios typed changed the placement: %+v", *got)
	}
	test.Type(e1, "1")
	if p := last(t, got, 1); !slices.Equal(p.Ratios, []float64{3, 1}) {
		t.Fatalf("ratios %v, want [3 1]", p.Ratios)
	}
	test.Type(e1, "x")
	if len(*got) != 1 {
		t.Error("an invalid ratio changed the placement")
	}
}

func TestSplitAndHeadSelects(t *testing.T) {
	g, _, got := newTestCanvas(t, Placement{Target: []int{0, 1}})
	g.split.SetSelected("tensor")
	g.head.SetSelected("replicated")
	p := last(t, got, 2)
	if p.Split != "tensor" || p.Head != "replicated" {
		t.Errorf("placement %+v", p)
	}
	g.head.SetSelected("auto")
	if p := last(t, got, 3); p.Head != "" {
		t.Errorf("auto head is %q, want empty", p.Head)
	}
}

func TestSetPlacementCleans(t *testing.T) {
	g, _, got := newTestCanvas(t, Placement{Target: []int{0, 7, 0, 1}, Ratios: []float64{1, 2, 3, 4}, Draft: []int{9}})
	p := g.Placement()
	if !slices.Equal(p.Target, []int{0, 1}) || !slices.Equal(p.Ratios, []float64{1, 4}) || len(p.Draft) != 0 || p.Split != "layer" {
		t.Errorf("cleaned placement %+v", p)
	}
	if len(*got) != 0 {
		t.Error("SetPlacement called OnChanged")
	}
}

// A chip's menu offers only what changes something: a lone chip in a zone
// has no Move left or Move right (they were its first items and did
// nothing), the first of two has Move right, the last Move left.
func TestChipMenuOffersWhatMoves(t *testing.T) {
	g, _, got := newTestCanvas(t, Placement{Target: []int{0, 1}, Draft: []int{2}})
	labels := func(c *Chip) (out []string) {
		for _, a := range g.actions(c) {
			out = append(out, a.label)
		}
		return out
	}
	for _, tc := range []struct {
		zone Zone
		id   int
		want string
	}{
		{ZoneDraft, 2, "Use for the target (T)|Remove (Delete)"},
		{ZoneTarget, 0, "Use for the draft (D)|Move right (→)|Remove (Delete)"},
		{ZoneTarget, 1, "Use for the draft (D)|Move left (←)|Remove (Delete)"},
	} {
		if l := strings.Join(labels(g.ChipOf(tc.zone, tc.id)), "|"); l != tc.want {
			t.Errorf("%s chip %d offers %q, want %q", tc.zone, tc.id, l, tc.want)
		}
	}
	for _, a := range g.actions(g.ChipOf(ZoneTarget, 1)) {
		if a.label == "Move left (←)" {
			a.do()
		}
	}
	if n := len(*got); n != 1 || !slices.Equal((*got)[0].Target, []int{1, 0}) {
		t.Errorf("after Move left: %v", *got)
	}
}
