package widgets

import (
	"fmt"
	"strings"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/canvas"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"
	"github.com/dustin/go-humanize"
)

// Segment is one category's bytes on a device.
type Segment struct {
	Category Category
	Bytes    int64
}

// DeviceMemory is what one device will hold, by category, against what it
// can hold.
type DeviceMemory struct {
	Label    string // "GPU 0 · NVIDIA H200"
	Role     string // "target", "draft" or "both"
	Capacity int64
	Segments []Segment
}

// Total is the sum of the segments.
func (d DeviceMemory) Total() int64 {
	var n int64
	for _, s := range d.Segments {
		n += s.Bytes
	}
	return n
}

// Over is how far the total exceeds the capacity (0 when it fits).
func (d DeviceMemory) Over() int64 { return max(0, d.Total()-d.Capacity) }

// Verdict is the caption people read: "1.2 GiB of 80 GiB, 78.8 GiB spare"
// or "over by 310 MiB".
func (d DeviceMemory) Verdict() string {
	if over := d.Over(); over > 0 {
		return fmt.Sprintf("%s of %s: over by %s", ibytes(d.Total()), ibytes(d.Capacity), ibytes(over))
	}
	return fmt.Sprintf("%s of %s, %s spare", ibytes(d.Total()), ibytes(d.Capacity), ibytes(d.Capacity-d.Total()))
}

// Breakdown lists the non-empty categories: "weights 1.1 GiB · KV 64 MiB".
func (d DeviceMemory) Breakdown() string {
	return strings.Join(d.breakdownParts(), " · ")
}

func (d DeviceMemory) breakdownParts() []string {
	var parts []string
	for _, s := range d.Segments {
		if s.Bytes > 0 {
			parts = append(parts, s.Category.String()+" "+ibytes(s.Bytes))
		}
	}
	return parts
}

func ibytes(n int64) string { return humanize.IBytes(uint64(max(0, n))) }

// MemoryBar is one device's stacked bar: a segment per category against
// its capacity, the part beyond capacity shaded red with the amount.
type MemoryBar struct {
	widget.BaseWidget
	mem DeviceMemory
}

// NewMemoryBar shows m.
func NewMemoryBar(m DeviceMemory) *MemoryBar {
	b := &MemoryBar{mem: m}
	b.ExtendBaseWidget(b)
	return b
}

// Set shows m instead.
func (b *MemoryBar) Set(m DeviceMemory) {
	b.mem = m
	b.Refresh()
}

// Memory is what the bar shows.
func (b *MemoryBar) Memory() DeviceMemory { return b.mem }

func (b *MemoryBar) CreateRenderer() fyne.WidgetRenderer {
	r := &memoryBarRenderer{bar: b,
		title:   canvas.NewText("", nil),
		verdict: canvas.NewText("", nil),
		track:   canvas.NewRectangle(nil),
		over:    canvas.NewRectangle(nil),
		limit:   canvas.NewRectangle(nil),
	}
	r.title.TextStyle.Bold = true
	r.verdict.Alignment = fyne.TextAlignTrailing
	r.track.CornerRadius = 3
	r.refresh()
	return r
}

const barHeight = 16

type memoryBarRenderer struct {
	bar            *MemoryBar
	title, verdict *canvas.Text
	// breakdown is the line under the bar, a text per category; the
	// texts flow onto more lines when the bar is narrower than they are,
	// so a narrow window keeps every amount in view.
	breakdown          []*canvas.Text
	track, over, limit *canvas.Rectangle
	segments           []*canvas.Rectangle
}

// flow places the breakdown's texts in lines of at most width and
// returns their height.
func (r *memoryBarRenderer) flow(width float32, place bool) float32 {
	x, y, lineH := float32(0), float32(0), float32(0)
	for _, t := range r.breakdown {
		sz := t.MinSize()
		if x > 0 && x+sz.Width > width {
			x, y = 0, y+lineH
		}
		if place {
			t.Move(fyne.NewPos(x, y))
			t.Resize(sz)
		}
		x += sz.Width
		lineH = max(lineH, sz.Height)
	}
	return y + lineH
}

// flowWidth is the breakdown's width on one line.
func (r *memoryBarRenderer) flowWidth() float32 {
	var w float32
	for _, t := range r.breakdown {
		w += t.MinSize().Width
	}
	return w
}

func (r *memoryBarRenderer) Destroy() {}

// head is the height of the title and the verdict at width: one line
// when both fit side by side, else the verdict under the title.
func (r *memoryBarRenderer) head(width float32) (height float32, oneLine bool) {
	th := r.title.MinSize().Height
	if r.title.MinSize().Width+r.verdict.MinSize().Width+4*theme.Padding() <= width {
		return th, true
	}
	return 2 * th, false
}

func (r *memoryBarRenderer) MinSize() fyne.Size {
	pad := theme.Padding()
	w := max(r.title.MinSize().Width, r.verdict.MinSize().Width, 240)
	for _, t := range r.breakdown {
		w = max(w, t.MinSize().Width)
	}
	width := r.bar.Size().Width
	if width <= 0 { // not laid out yet: as wide as one line of each wants
		width = r.title.MinSize().Width + r.verdict.MinSize().Width + 4*pad
		width = max(width, r.flowWidth())
	}
	width = max(width, w)
	hh, _ := r.head(width)
	return fyne.NewSize(w, hh+barHeight+r.flow(width, false)+2*pad)
}

func (r *memoryBarRenderer) Layout(size fyne.Size) {
	pad := theme.Padding()
	th := r.title.MinSize().Height
	hh, oneLine := r.head(size.Width)
	r.title.Move(fyne.NewPos(0, 0))
	if oneLine {
		r.title.Resize(fyne.NewSize(size.Width/2, th))
		r.verdict.Move(fyne.NewPos(size.Width/2, 0))
		r.verdict.Resize(fyne.NewSize(size.Width/2, th))
	} else {
		r.title.Resize(fyne.NewSize(size.Width, th))
		r.verdict.Move(fyne.NewPos(0, th))
		r.verdict.Resize(fyne.NewSize(size.Width, th))
	}
	y := hh + pad
	r.track.Move(fyne.NewPos(0, y))
	r.track.Resize(fyne.NewSize(size.Width, barHeight))

	m := r.bar.mem
	scale := float32(max(m.Capacity, m.Total(), 1))
	x := float32(0)
	for i, s := range m.Segments {
		w := size.Width * float32(s.Bytes) / scale
		r.segments[i].Move(fyne.NewPos(x, y))
		r.segments[i].Resize(fyne.NewSize(w, barHeight))
		x += w
	}
	capX := size.Width * float32(m.Capacity) / scale
	r.over.Move(fyne.NewPos(capX, y))
	r.over.Resize(fyne.NewSize(size.Width-capX, barHeight))
	r.over.Hidden = m.Over() == 0
	r.limit.Move(fyne.NewPos(capX-1, y-2))
	r.limit.Resize(fyne.NewSize(2, barHeight+4))
	r.limit.Hidden = m.Over() == 0

	r.flow(size.Width, true)
	for _, t := range r.breakdown {
		t.Move(t.Position().AddXY(0, y+barHeight+pad))
	}
}

func (r *memoryBarRenderer) Objects() []fyne.CanvasObject {
	objs := []fyne.CanvasObject{r.title, r.verdict, r.track}
	for _, s := range r.segments {
		objs = append(objs, s)
	}
	objs = append(objs, r.over, r.limit)
	for _, t := range r.breakdown {
		objs = append(objs, t)
	}
	return objs
}

func (r *memoryBarRenderer) Refresh() {
	r.refresh()
	r.Layout(r.bar.Size())
	canvas.Refresh(r.bar)
}

func (r *memoryBarRenderer) refresh() {
	m := r.bar.mem
	fg := themeColor(theme.ColorNameForeground)
	r.title.Text, r.title.Color = m.Label, fg
	if m.Role != "" {
		r.title.Text += "  (" + m.Role + ")"
	}
	r.verdict.Text, r.verdict.Color = m.Verdict(), fg
	if m.Over() > 0 {
		r.verdict.Color = overColor()
		r.verdict.TextStyle.Bold = true
	} else {
		r.verdict.TextStyle.Bold = false
	}
	parts := m.breakdownParts()
	for len(r.breakdown) < len(parts) {
		r.breakdown = append(r.breakdown, canvas.NewText("", nil))
	}
	r.breakdown = r.breakdown[:len(parts)]
	for i, p := range parts {
		if i < len(parts)-1 {
			p += " · "
		}
		t := r.breakdown[i]
		t.Text, t.Color, t.TextSize = p, themeColor(theme.ColorNamePlaceHolder), theme.CaptionTextSize()
		t.Refresh()
	}
	r.track.FillColor = themeColor(theme.ColorNameInputBackground)
	r.over.FillColor = withAlpha(overColor(), 0x8c)
	r.limit.FillColor = overColor()

	for len(r.segments) < len(m.Segments) {
		r.segments = append(r.segments, canvas.NewRectangle(nil))
	}
	r.segments = r.segments[:len(m.Segments)]
	for i, s := range m.Segments {
		r.segments[i].FillColor = s.Category.Color()
	}
	for _, t := range []*canvas.Text{r.title, r.verdict} {
		t.Refresh()
	}
}
