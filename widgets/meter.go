package widgets

import (
	"strings"

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
	// full, width and size are the caption, the width and the text size
	// text was elided for.
	full        string
	width, size float32
}

const meterHeight = 6

func (r *meterRenderer) Destroy() {}

func (r *meterRenderer) Objects() []fyne.CanvasObject {
	return []fyne.CanvasObject{r.track, r.fill, r.text}
}

// MinSize is not as wide as the caption: a caption wider than the window
// would widen it (the chat's meter at the end of an answer, a window
// resize and the slowest frame there is); Layout elides it instead.
func (r *meterRenderer) MinSize() fyne.Size {
	t := r.text.MinSize()
	return fyne.NewSize(120, t.Height+meterHeight+theme.Padding())
}

func (r *meterRenderer) Layout(size fyne.Size) {
	if r.m.text != r.full || size.Width != r.width || r.text.TextSize != r.size {
		r.full, r.width, r.size = r.m.text, size.Width, r.text.TextSize
		r.text.Text = elide(r.m.text, size.Width, r.text.TextSize, r.text.TextStyle)
	}
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
	r.text.Color = themeColor(theme.ColorNamePlaceHolder)
	r.text.TextSize = theme.CaptionTextSize()
	r.Layout(r.m.Size())
	r.track.Refresh()
	r.fill.Refresh()
	r.text.Refresh()
}

// elide is text cut with an ellipsis to fit width (all of it when it
// fits). Each measurement of a new string shapes it, and the meter's
// caption changes with every streamed chunk, so the cut is guessed from
// the widths' ratio and corrected, a few measurements rather than a search.
func elide(text string, width, size float32, style fyne.TextStyle) string {
	full := fyne.MeasureText(text, size, style).Width
	if full <= width {
		return text
	}
	runes := []rune(text)
	n := int(float32(len(runes)) * width / full)
	for n > 0 {
		s := strings.TrimRight(string(runes[:n]), " ·,") + "…"
		w := fyne.MeasureText(s, size, style).Width
		if w <= width {
			return s
		}
		n -= 1 + int(float32(n)*(w-width)/w)
	}
	return "…"
}
