package widgets

import (
	"slices"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/canvas"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/layout"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"
)

// Zone is where a chip sits on the canvas.
type Zone string

const (
	ZonePool   Zone = "pool" // every device, always all of them
	ZoneTarget Zone = "target"
	ZoneDraft  Zone = "draft"
)

// GPUCanvas shows every device as a chip in a pool and two zones, Target
// and Draft, that the chips are dragged into (a device may serve both).
// Dropping is hit-tested against the zones' absolute positions on DragEnd,
// because Fyne has no drop targets for objects inside a window; the dragged
// chip is drawn on a top layer so it stays visible over everything.
type GPUCanvas struct {
	widget.BaseWidget
	// OnChanged is called after every change the user makes.
	OnChanged func(Placement)

	devices    []ChipInfo
	pl         Placement
	autoRatios []float64 // the planner's ratios, shown greyed when pl.Ratios is nil

	chips   map[Zone]map[int]*Chip // reused, so focus survives a rebuild
	ratios  map[int]*widget.Entry
	pool    *fyne.Container
	zones   map[Zone]*zoneView
	split   *widget.Select
	head    *widget.Select
	layer   *fyne.Container // top layer with the drag ghost
	ghost   *Chip
	dragged fyne.Delta
	content fyne.CanvasObject
	quiet   bool // set while widgets are updated from code
}

type zoneView struct {
	box   *canvas.Rectangle
	slots *fyne.Container
	empty *widget.Label
	all   *fyne.Container
}

// NewGPUCanvas is an empty canvas.
func NewGPUCanvas() *GPUCanvas {
	g := &GPUCanvas{
		chips:  map[Zone]map[int]*Chip{ZonePool: {}, ZoneTarget: {}, ZoneDraft: {}},
		ratios: map[int]*widget.Entry{},
		pool:   container.NewHBox(),
		zones:  map[Zone]*zoneView{},
		layer:  container.NewWithoutLayout(),
		pl:     Placement{Split: "layer"},
		quiet:  true,
	}
	g.split = widget.NewSelect([]string{"layer", "tensor"}, func(s string) { g.userChange(func(p *Placement) { p.Split = s }) })
	g.head = widget.NewSelect([]string{"auto", "replicated", "split"}, func(s string) {
		g.userChange(func(p *Placement) {
			if p.Head = s; s == "auto" {
				p.Head = ""
			}
		})
	})

	targetHead := container.NewHBox(heading("Target"), layout.NewSpacer(),
		widget.NewLabel("split by"), g.split, widget.NewLabel("head"), g.head)
	g.zones[ZoneTarget] = newZoneView("Drop GPUs here for the target model (or focus a chip and press T)")
	g.zones[ZoneDraft] = newZoneView("Drop GPUs here for the draft model (or focus a chip and press D)")
	hint := widget.NewLabelWithStyle("Drag chips into a zone; drag them out to remove. Keys on a focused chip: T, D, ←/→ to reorder, Delete.",
		fyne.TextAlignLeading, fyne.TextStyle{Italic: true})
	hint.Wrapping = fyne.TextWrapWord
	body := container.NewVBox(
		heading("Devices"), chipRow(g.pool),
		targetHead, g.zones[ZoneTarget].all,
		heading("Draft"), g.zones[ZoneDraft].all,
		hint,
	)
	g.content = container.NewStack(body, g.layer)
	g.ExtendBaseWidget(g)
	g.rebuild()
	g.quiet = false
	return g
}

// chipRow scrolls a row of chips sideways, with room for their borders.
func chipRow(row *fyne.Container) fyne.CanvasObject {
	return container.NewHScroll(container.New(layout.NewCustomPaddedLayout(2, 2, 2, 2), row))
}

func heading(s string) *widget.Label {
	return widget.NewLabelWithStyle(s, fyne.TextAlignLeading, fyne.TextStyle{Bold: true})
}

func newZoneView(empty string) *zoneView {
	z := &zoneView{box: canvas.NewRectangle(nil), slots: container.NewHBox(), empty: widget.NewLabel(empty)}
	z.box.CornerRadius = theme.InputRadiusSize()
	z.box.StrokeWidth = 2
	z.empty.Importance = widget.LowImportance
	z.empty.Wrapping = fyne.TextWrapWord
	z.all = container.NewStack(z.box, container.NewPadded(container.NewStack(z.empty, chipRow(z.slots))))
	z.highlight(false)
	return z
}

func (z *zoneView) highlight(on bool) {
	z.box.FillColor = themeColor(theme.ColorNameInputBackground)
	z.box.StrokeColor = themeColor(theme.ColorNameSeparator)
	if on {
		z.box.FillColor = themeColor(theme.ColorNameHover)
		z.box.StrokeColor = themeColor(theme.ColorNamePrimary)
	}
	z.box.Refresh()
}

func (g *GPUCanvas) CreateRenderer() fyne.WidgetRenderer {
	return widget.NewSimpleRenderer(g.content)
}

// SetDevices shows these devices; placements keep only devices among them.
func (g *GPUCanvas) SetDevices(devs []ChipInfo) {
	g.devices = slices.Clone(devs)
	g.pl = g.clean(g.pl)
	g.quietly(g.rebuild)
}

// SetPlacement shows p without calling OnChanged.
func (g *GPUCanvas) SetPlacement(p Placement) {
	g.pl = g.clean(p)
	g.quietly(g.rebuild)
}

// SetAutoRatios gives the ratios the planner chose when Ratios is nil,
// shown greyed in the ratio fields.
func (g *GPUCanvas) SetAutoRatios(r []float64) {
	g.autoRatios = slices.Clone(r)
	g.quietly(g.rebuild)
}

// Placement is what the canvas shows.
func (g *GPUCanvas) Placement() Placement { return clonePlacement(g.pl) }

func (g *GPUCanvas) quietly(f func()) {
	q := g.quiet
	g.quiet = true
	f()
	g.quiet = q
}

// clean drops unknown and repeated devices and keeps Ratios in step with
// Target.
func (g *GPUCanvas) clean(p Placement) Placement {
	p = clonePlacement(p)
	known := func(id int) bool { return slices.ContainsFunc(g.devices, func(c ChipInfo) bool { return c.ID == id }) }
	var target []int
	var ratios []float64
	for i, id := range p.Target {
		if known(id) && !slices.Contains(target, id) {
			target = append(target, id)
			if len(p.Ratios) == len(p.Target) {
				ratios = append(ratios, p.Ratios[i])
			}
		}
	}
	p.Target = target
	if len(ratios) != len(target) || len(target) < 2 {
		ratios = nil
	}
	p.Ratios = ratios
	p.Draft = slices.DeleteFunc(slices.Compact(p.Draft), func(id int) bool { return !known(id) })
	if p.Split == "" {
		p.Split = "layer"
	}
	return p
}

// userChange applies a change made by the user and reports it.
func (g *GPUCanvas) userChange(f func(*Placement)) {
	if g.quiet {
		return
	}
	p := clonePlacement(g.pl)
	f(&p)
	g.pl = g.clean(p)
	g.quietly(g.rebuild)
	if g.OnChanged != nil {
		g.OnChanged(g.Placement())
	}
}

func (g *GPUCanvas) add(zone Zone, id, at int) {
	g.userChange(func(p *Placement) { p.insert(zone, id, at) })
}

func (g *GPUCanvas) remove(zone Zone, id int) {
	g.userChange(func(p *Placement) { p.remove(zone, id) })
}

func (g *GPUCanvas) shift(zone Zone, id, by int) {
	g.userChange(func(p *Placement) { p.shift(zone, id, by) })
}

type chipAction struct {
	label string
	do    func()
}

// actions are what a chip's menu offers; the same as its keys.
func (g *GPUCanvas) actions(c *Chip) []chipAction {
	id := c.info.ID
	var out []chipAction
	if !slices.Contains(g.pl.Target, id) {
		out = append(out, chipAction{"Use for the target (T)", func() { g.add(ZoneTarget, id, -1) }})
	}
	if !slices.Contains(g.pl.Draft, id) {
		out = append(out, chipAction{"Use for the draft (D)", func() { g.add(ZoneDraft, id, -1) }})
	}
	if c.zone != ZonePool {
		// Only the moves that move something: a lone chip's menu offered
		// Move left and Move right first, and choosing them did nothing
		// (issue 26, item 10).
		list := *zoneList(&g.pl, c.zone)
		i := slices.Index(list, id)
		if i > 0 {
			out = append(out, chipAction{"Move left (←)", func() { g.shift(c.zone, id, -1) }})
		}
		if i >= 0 && i < len(list)-1 {
			out = append(out, chipAction{"Move right (→)", func() { g.shift(c.zone, id, +1) }})
		}
		out = append(out, chipAction{"Remove (Delete)", func() { g.remove(c.zone, id) }})
	}
	return out
}

// chip returns the canvas's chip for device id in zone, made once.
func (g *GPUCanvas) chip(zone Zone, info ChipInfo) *Chip {
	c, ok := g.chips[zone][info.ID]
	if !ok {
		c = newChip(info, zone, g)
		g.chips[zone][info.ID] = c
	} else if !chipInfoEqual(c.info, info) {
		c.setInfo(info)
	}
	return c
}

func chipInfoEqual(a, b ChipInfo) bool {
	return a.ID == b.ID && a.Name == b.Name && a.Model == b.Model && a.Memory == b.Memory &&
		a.CPU == b.CPU && slices.Equal(a.Badges, b.Badges)
}

func (g *GPUCanvas) info(id int) (ChipInfo, bool) {
	i := slices.IndexFunc(g.devices, func(c ChipInfo) bool { return c.ID == id })
	if i < 0 {
		return ChipInfo{}, false
	}
	return g.devices[i], true
}

// rebuild lays the chips out for g.pl.
func (g *GPUCanvas) rebuild() {
	g.pool.Objects = g.pool.Objects[:0]
	for _, d := range g.devices {
		g.pool.Objects = append(g.pool.Objects, g.chip(ZonePool, d))
	}
	g.pool.Refresh()

	g.fillZone(ZoneTarget, g.pl.Target)
	g.fillZone(ZoneDraft, g.pl.Draft)
	g.split.SetSelected(g.pl.Split)
	head := g.pl.Head
	if head == "" {
		head = "auto"
	}
	g.head.SetSelected(head)
}

func (g *GPUCanvas) fillZone(zone Zone, ids []int) {
	z := g.zones[zone]
	z.slots.Objects = z.slots.Objects[:0]
	for i, id := range ids {
		info, _ := g.info(id)
		var slot fyne.CanvasObject = g.chip(zone, info)
		if zone == ZoneTarget && len(ids) > 1 {
			slot = container.NewVBox(slot, g.ratioField(i, id))
		}
		z.slots.Objects = append(z.slots.Objects, slot)
	}
	z.empty.Hidden = len(ids) > 0
	z.slots.Refresh()
	z.empty.Refresh()
}
