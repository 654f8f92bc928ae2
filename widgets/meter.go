package widgets

import (
	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/canvas"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"
)

// Meter is a thin horizontal gauge with a caption, used for the live draft
// acceptance rate: the filled part is the value (0 to 1).
type Meter struct {
	widget.BaseWidget
	value float64
	text  string
}

// NewMeter is an empty meter.
func NewMeter() *Meter {
	m := &Meter{}
	m.ExtendBaseWidget(m)
	return m
}

// Set shows value (clamped to [0, 1]) with a caption.
func (m *Meter) Set(value float64, text string) {
	m.value, m.text = min(max(value, 0), 1), text
	m.Refresh()
}

// Value is the fraction shown.
func (m *Meter) Value() float64 { return m.value }

// Text is the caption shown.
func (m *Meter) Text() string { return m.text }

func (m *Meter) CreateRenderer() fyne.WidgetRenderer {
	r := &meterRenderer{m: m, track: canvas.NewRectangle(nil), fill: canvas.NewRectangle(nil), text: canvas.NewText("", nil)}
	r.track.CornerRadius, r.fill.CornerRadius = 3, 3
	r.Refresh()
	return r
}

type meterRenderer struct {
	m           *Meter
	track, fill *canvas.Rectangle
	text        *canvas.Text
}

const meterHeight = 6

func (r *meterRenderer) Destroy() {}

func (r *meterRenderer) Objects() []fyne.CanvasObject {
	return []fyne.CanvasObject{r.track, r.fill, r.text}
}

func (r *meterRenderer) MinSize() fyne.Size {
	t := r.text.MinSize()
	return fyne.NewSize(max(120, t.Width), t.Height+meterHeight+theme.Padding())
}

func (r *meterRenderer) Layout(size fyne.Size) {
	th := r.text.MinSize().Height
	r.text.Move(fyne.NewPos(0, 0))
	r.text.Resize(fyne.NewSize(size.Width, th))
	y := th + theme.Padding()
	r.track.Move(fyne.NewPos(0, y))
	r.track.Resize(fyne.NewSize(size.Width, meterHeight))
	r.fill.Move(fyne.NewPos(0, y))
	r.fill.Resize(fyne.NewSize(size.Width*float32(r.m.value), meterHeight))
}

func (r *meterRenderer) Refresh() {
	r.track.FillColor = themeColor(theme.ColorNameInputBackground)
	r.fill.FillColor = Draft.Color()
	r.text.Text = r.m.text
	r.text.Color = themeColor(theme.ColorNamePlaceHolder)
	r.text.TextSize = theme.CaptionTextSize()
	r.Layout(r.m.Size())
	r.track.Refresh()
	r.fill.Refresh()
	r.text.Refresh()
}
