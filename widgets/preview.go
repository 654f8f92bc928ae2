package widgets

import (
	"cmp"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/canvas"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/layout"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"
)

// Preview is a plan as the memory preview shows it.
type Preview struct {
	Devices []DeviceMemory
	Fits    bool
	Summary string // one line: "Fits: 2 devices." or "Does not fit: GPU 0 is over by 1.2 GiB."
	// Suggestions are changes that make the plan fit, each offered as a
	// one-click fix.
	Suggestions []string
	// FixesTitle heads the suggestions; "" is "Each of these fits:".
	FixesTitle string
	Error      string // the plan could not be made at all
	// Remote, when set, offers a remote engine in words (no local layout
	// fits), with a button that calls OnRemote.
	Remote string
	// Borrow is how a head-sharing draft uses the target tensors it lacks,
	// one line per way with a one-click switch; nil: it borrows nothing.
	Borrow *Borrow
	// Experts offers, per model with routed experts, to keep them in
	// system RAM (llama.cpp's --cpu-moe), each a check box.
	Experts []ExpertsOption
}

// ExpertsOption is one model's choice of keeping its experts in system RAM.
type ExpertsOption struct {
	Text  string // "Keep the target's experts in system RAM (17 GiB, llama.cpp's --cpu-moe)"
	On    bool   // the plan shown keeps them there
	Draft bool   // the draft's experts, not the target's
}

// Borrow is what a draft borrows from the target and the ways to use it.
type Borrow struct {
	Text    string // "The draft borrows the target's output head (12 MiB)."
	Options []BorrowOption
}

// BorrowOption is one way to use the borrowed tensors, planned.
type BorrowOption struct {
	Text   string // the way and what the draft then holds on each device
	Chosen bool   // the plan shown uses it
	Fits   bool   // the whole plan fits with it
}

// MemoryPreview shows per-device memory bars, a legend, the verdict and the
// planner's suggestions with an Apply button each.
type MemoryPreview struct {
	widget.BaseWidget
	// OnApply is called with the index of the suggestion the user applies.
	OnApply func(i int)
	// OnBorrow is called with the index of the borrow option the user
	// switches to.
	OnBorrow func(i int)
	// OnRemote is called when the user takes up the remote-engine hint.
	OnRemote func()
	// OnExperts is called when the user turns keeping a model's experts
	// in system RAM on or off.
	OnExperts func(draft, on bool)

	p       Preview
	summary *widget.Label
	bars    *fyne.Container
	fixes   *fyne.Container
	borrow  *fyne.Container
	experts *fyne.Container
	remote  *fyne.Container
	legend  fyne.CanvasObject
	content *fyne.Container
}

// NewMemoryPreview is an empty preview.
func NewMemoryPreview() *MemoryPreview {
	m := &MemoryPreview{
		summary: widget.NewLabel(""),
		bars:    container.NewVBox(),
		fixes:   container.NewVBox(),
		borrow:  container.NewVBox(),
		experts: container.NewVBox(),
		remote:  container.NewVBox(),
		legend:  newLegend(Categories()),
	}
	m.summary.Wrapping = fyne.TextWrapWord
	m.summary.TextStyle.Bold = true
	m.experts.Hidden = true
	m.content = container.NewVBox(m.summary, m.bars, m.legend, m.experts, m.borrow, m.fixes, m.remote)
	m.ExtendBaseWidget(m)
	return m
}

// Set shows p.
func (m *MemoryPreview) Set(p Preview) {
	m.p = p
	m.summary.SetText(p.Summary)
	if p.Error != "" {
		m.summary.SetText(p.Error)
		m.summary.Importance = widget.DangerImportance
	} else if !p.Fits {
		m.summary.Importance = widget.DangerImportance
	} else {
		m.summary.Importance = widget.MediumImportance
	}
	m.summary.Refresh()

	objs := m.bars.Objects
	for len(objs) < len(p.Devices) {
		objs = append(objs, NewMemoryBar(DeviceMemory{}))
	}
	objs = objs[:len(p.Devices)]
	for i, d := range p.Devices {
		objs[i].(*MemoryBar).Set(d)
	}
	m.bars.Objects = objs
	m.bars.Refresh()
	cats := Categories()
	if p.holdsExperts() {
		cats = append(cats, Experts)
	}
	if len(cats) != len(m.legend.(*fyne.Container).Objects) {
		m.legend = newLegend(cats)
		m.content.Objects[2] = m.legend
		m.content.Refresh()
	}
	m.legend.(*fyne.Container).Hidden = len(p.Devices) == 0

	m.fixes.Objects = nil
	if len(p.Suggestions) > 0 {
		m.fixes.Add(widget.NewLabelWithStyle(cmp.Or(p.FixesTitle, "Each of these fits:"), fyne.TextAlignLeading, fyne.TextStyle{Italic: true}))
	}
	for i, s := range p.Suggestions {
		apply := widget.NewButtonWithIcon("Apply", theme.ConfirmIcon(), func() {
			if m.OnApply != nil {
				m.OnApply(i)
			}
		})
		text := widget.NewLabel(s)
		text.Wrapping = fyne.TextWrapWord
		m.fixes.Add(container.NewBorder(nil, nil, nil, apply, text))
	}
	m.fixes.Refresh()
	m.showExperts(p.Experts)
	m.showBorrow(p.Borrow)
	m.remote.Objects = nil
	if p.Remote != "" {
		use := widget.NewButtonWithIcon("Use a remote server…", theme.ComputerIcon(), m.UseRemote)
		m.remote.Add(container.NewBorder(nil, nil, nil, use, wrapped(p.Remote, fyne.TextStyle{})))
	}
	m.remote.Refresh()
}

// UseRemote takes up the remote-engine hint as if its button were tapped.
func (m *MemoryPreview) UseRemote() {
	if m.p.Remote != "" && m.OnRemote != nil {
		m.OnRemote()
	}
}

// showExperts shows a check box per model with routed experts.
func (m *MemoryPreview) showExperts(opts []ExpertsOption) {
	m.experts.Objects = nil
	for _, o := range opts {
		c := widget.NewCheck(o.Text, nil)
		c.SetChecked(o.On)
		c.OnChanged = func(on bool) { m.SetExperts(o.Draft, on) }
		m.experts.Add(c)
	}
	m.experts.Hidden = len(opts) == 0 // no gap in the column without them
	m.experts.Refresh()
}

// SetExperts turns a model's experts in system RAM on or off as if its
// check box were clicked.
func (m *MemoryPreview) SetExperts(draft, on bool) {
	for _, o := range m.p.Experts {
		if o.Draft == draft && o.On != on && m.OnExperts != nil {
			m.OnExperts(draft, on)
			return
		}
	}
}

// showBorrow lists the ways a draft can use what it borrows; the one in use
// is marked, each other has a Switch button.
func (m *MemoryPreview) showBorrow(b *Borrow) {
	m.borrow.Objects = nil
	if b != nil {
		m.borrow.Add(wrapped(b.Text, fyne.TextStyle{Bold: true}))
		for i, o := range b.Options {
			var act fyne.CanvasObject
			if o.Chosen {
				act = widget.NewLabelWithStyle("In use", fyne.TextAlignTrailing, fyne.TextStyle{Italic: true})
			} else {
				act = widget.NewButtonWithIcon("Switch", theme.ViewRefreshIcon(), func() { m.SwitchBorrow(i) })
			}
			text := wrapped(o.Text, fyne.TextStyle{})
			if !o.Fits {
				text.Importance = widget.DangerImportance
			}
			m.borrow.Add(container.NewBorder(nil, nil, nil, act, text))
		}
	}
	m.borrow.Refresh()
}

func wrapped(s string, style fyne.TextStyle) *widget.Label {
	l := widget.NewLabelWithStyle(s, fyne.TextAlignLeading, style)
	l.Wrapping = fyne.TextWrapWord
	return l
}

// Preview is what is shown.
func (m *MemoryPreview) Preview() Preview { return m.p }

// Apply applies suggestion i as if its button were tapped.
func (m *MemoryPreview) Apply(i int) {
	if i >= 0 && i < len(m.p.Suggestions) && m.OnApply != nil {
		m.OnApply(i)
	}
}

// SwitchBorrow switches to borrow option i as if its button were tapped.
func (m *MemoryPreview) SwitchBorrow(i int) {
	if b := m.p.Borrow; b != nil && i >= 0 && i < len(b.Options) && !b.Options[i].Chosen && m.OnBorrow != nil {
		m.OnBorrow(i)
	}
}

func (m *MemoryPreview) CreateRenderer() fyne.WidgetRenderer {
	return widget.NewSimpleRenderer(m.content)
}

// holdsExperts reports whether a device of p holds routed experts apart.
func (p Preview) holdsExperts() bool {
	for _, d := range p.Devices {
		for _, s := range d.Segments {
			if s.Category == Experts && s.Bytes > 0 {
				return true
			}
		}
	}
	return false
}

// newLegend is a row of colour swatches, one per category of cats.
func newLegend(cats []Category) fyne.CanvasObject {
	row := container.New(layout.NewRowWrapLayout())
	for _, c := range cats {
		sw := canvas.NewRectangle(c.Color())
		sw.SetMinSize(fyne.NewSize(12, 12))
		sw.CornerRadius = 2
		label := canvas.NewText(c.String(), themeColor(theme.ColorNamePlaceHolder))
		label.TextSize = theme.CaptionTextSize()
		row.Add(container.NewHBox(container.NewCenter(sw), label))
	}
	return row
}
