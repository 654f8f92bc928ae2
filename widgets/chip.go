package widgets

import (
	"image/color"
	"strings"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/canvas"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"
)

// ChipInfo describes one device chip.
type ChipInfo struct {
	ID     int      // the device index placements refer to
	Name   string   // "GPU 0"
	Model  string   // "NVIDIA H200"
	Memory string   // "139 GiB free of 141 GiB"
	Badges []string // links to other devices: "NVLink 1"
	CPU    bool
}

// Chip is a device on the GPU canvas: in the pool of all devices or in a
// model's zone. It can be dragged, and when focused it answers keys: T and D
// put it in the Target and Draft zones, Left and Right reorder it in its
// zone, Delete takes it out; a secondary tap shows the same as a menu.
type Chip struct {
	widget.BaseWidget
	info  ChipInfo
	zone  Zone
	owner *GPUCanvas // nil for the drag ghost

	focused bool
	bg      *canvas.Rectangle
	strip   *canvas.Rectangle
	texts   []*canvas.Text
}

func newChip(info ChipInfo, zone Zone, owner *GPUCanvas) *Chip {
	c := &Chip{info: info, zone: zone, owner: owner}
	c.ExtendBaseWidget(c)
	return c
}

// Info is the device the chip shows.
func (c *Chip) Info() ChipInfo { return c.info }

func (c *Chip) setInfo(info ChipInfo) {
	c.info = info
	c.Refresh()
}

func (c *Chip) CreateRenderer() fyne.WidgetRenderer {
	c.bg = canvas.NewRectangle(nil)
	c.bg.CornerRadius = theme.InputRadiusSize()
	c.bg.StrokeWidth = 2
	c.strip = canvas.NewRectangle(nil)
	c.strip.SetMinSize(fyne.NewSize(5, 0))
	c.strip.CornerRadius = 2
	lines := container.NewVBox()
	for range 4 {
		t := canvas.NewText("", nil)
		c.texts = append(c.texts, t)
		lines.Add(t)
	}
	c.texts[0].TextStyle.Bold = true
	c.applyInfo()
	body := container.NewBorder(nil, nil, c.strip, nil, lines)
	return widget.NewSimpleRenderer(container.NewStack(c.bg, container.New(&chipPadding{}, body)))
}

func (c *Chip) Refresh() {
	if c.bg != nil {
		c.applyInfo()
	}
	c.BaseWidget.Refresh()
}

func (c *Chip) applyInfo() {
	c.bg.FillColor = themeColor(theme.ColorNameInputBackground)
	c.bg.StrokeColor = themeColor(theme.ColorNameSeparator)
	if c.focused || c.owner == nil {
		c.bg.StrokeColor = themeColor(theme.ColorNamePrimary)
	}
	c.strip.FillColor = color.NRGBA{R: 0x76, G: 0xb9, A: 0xff}
	if c.info.CPU {
		c.strip.FillColor = color.NRGBA{R: 0x64, G: 0x74, B: 0x8b, A: 0xff}
	}
	fg, dim := themeColor(theme.ColorNameForeground), themeColor(theme.ColorNamePlaceHolder)
	set := func(t *canvas.Text, s string, col color.Color) {
		t.Text, t.Color, t.TextSize = s, col, theme.CaptionTextSize()
		t.Hidden = s == ""
	}
	set(c.texts[0], c.info.Name, fg)
	c.texts[0].TextSize = theme.TextSize()
	set(c.texts[1], c.info.Model, dim)
	set(c.texts[2], c.info.Memory, dim)
	set(c.texts[3], strings.Join(c.info.Badges, " · "), themeColor(theme.ColorNamePrimary))
	for _, t := range c.texts {
		t.Refresh()
	}
	c.bg.Refresh()
	c.strip.Refresh()
}

// chipPadding insets the chip's content and gives it a fixed width, so
// chips line up in rows.
type chipPadding struct{}

const chipWidth = 176

func (chipPadding) Layout(objs []fyne.CanvasObject, size fyne.Size) {
	p := theme.Padding()
	for _, o := range objs {
		o.Move(fyne.NewPos(p, p))
		o.Resize(fyne.NewSize(size.Width-2*p, size.Height-2*p))
	}
}

func (chipPadding) MinSize(objs []fyne.CanvasObject) fyne.Size {
	p := theme.Padding()
	var s fyne.Size
	for _, o := range objs {
		s = s.Max(o.MinSize())
	}
	return fyne.NewSize(max(chipWidth, s.Width+2*p), s.Height+2*p)
}

// Dragged moves the chip's ghost on the canvas's top layer.
func (c *Chip) Dragged(ev *fyne.DragEvent) {
	if c.owner != nil {
		c.owner.dragMoved(c, ev.Dragged)
	}
}

// DragEnd drops the chip where its ghost is.
func (c *Chip) DragEnd() {
	if c.owner != nil {
		c.owner.dragEnded(c)
	}
}

// Tapped focuses the chip, so its keys work.
func (c *Chip) Tapped(*fyne.PointEvent) {
	if cv := fyne.CurrentApp().Driver().CanvasForObject(c); cv != nil && c.owner != nil {
		cv.Focus(c)
	}
}

// TappedSecondary shows the chip's actions as a menu.
func (c *Chip) TappedSecondary(ev *fyne.PointEvent) {
	cv := fyne.CurrentApp().Driver().CanvasForObject(c)
	if cv == nil || c.owner == nil {
		return
	}
	var items []*fyne.MenuItem
	for _, a := range c.owner.actions(c) {
		items = append(items, fyne.NewMenuItem(a.label, a.do))
	}
	widget.ShowPopUpMenuAtPosition(fyne.NewMenu("", items...), cv, ev.AbsolutePosition)
}

func (c *Chip) FocusGained() {
	c.focused = true
	c.Refresh()
}

func (c *Chip) FocusLost() {
	c.focused = false
	c.Refresh()
}

// TypedRune handles T (target) and D (draft).
func (c *Chip) TypedRune(r rune) {
	if c.owner == nil {
		return
	}
	switch r {
	case 't', 'T':
		c.owner.add(ZoneTarget, c.info.ID, -1)
	case 'd', 'D':
		c.owner.add(ZoneDraft, c.info.ID, -1)
	}
}

// TypedKey handles Left/Right (reorder) and Delete/Backspace (remove).
func (c *Chip) TypedKey(ev *fyne.KeyEvent) {
	if c.owner == nil || c.zone == ZonePool {
		return
	}
	switch ev.Name {
	case fyne.KeyLeft, fyne.KeyUp:
		c.owner.shift(c.zone, c.info.ID, -1)
	case fyne.KeyRight, fyne.KeyDown:
		c.owner.shift(c.zone, c.info.ID, +1)
	case fyne.KeyDelete, fyne.KeyBackspace:
		c.owner.remove(c.zone, c.info.ID)
	}
}
