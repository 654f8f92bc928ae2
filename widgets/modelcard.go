package widgets

import (
	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/layout"
	"fyne.io/fyne/v2/widget"
)

// ModelInfo is what a model card shows: facts from the GGUF header and, for
// a draft, whether it can draft for the target.
type ModelInfo struct {
	Title   string      // "Target model"
	File    string      // "factory-target-Q4_K_M.gguf", empty: no model chosen
	Rows    [][2]string // {"architecture", "qwen3"}, ...
	Verdict string      // a sentence; empty: none
	Bad     bool        // the verdict is a problem
}

// ModelCard shows a ModelInfo.
type ModelCard struct {
	widget.BaseWidget
	info    ModelInfo
	title   *widget.Label
	file    *widget.Label
	rows    *fyne.Container
	verdict *widget.Label
	content *fyne.Container
}

// NewModelCard is a card showing info.
func NewModelCard(info ModelInfo) *ModelCard {
	c := &ModelCard{
		title:   widget.NewLabelWithStyle("", fyne.TextAlignLeading, fyne.TextStyle{Bold: true}),
		file:    widget.NewLabel(""),
		rows:    container.New(layout.NewFormLayout()),
		verdict: widget.NewLabel(""),
	}
	c.file.Truncation = fyne.TextTruncateEllipsis
	c.verdict.Wrapping = fyne.TextWrapWord
	c.content = container.NewVBox(c.title, c.file, c.rows, c.verdict)
	c.ExtendBaseWidget(c)
	c.Set(info)
	return c
}

// Set shows info instead.
func (c *ModelCard) Set(info ModelInfo) {
	c.info = info
	c.title.SetText(info.Title)
	c.file.SetText(info.File)
	if info.File == "" {
		c.file.SetText("No model chosen")
	}
	c.rows.Objects = nil
	for _, r := range info.Rows {
		k := widget.NewLabelWithStyle(r[0], fyne.TextAlignLeading, fyne.TextStyle{Italic: true})
		v := widget.NewLabel(r[1])
		v.Wrapping = fyne.TextWrapWord
		c.rows.Objects = append(c.rows.Objects, k, v)
	}
	c.rows.Refresh()
	c.verdict.SetText(info.Verdict)
	c.verdict.Hidden = info.Verdict == ""
	c.verdict.Importance = widget.SuccessImportance
	if info.Bad {
		c.verdict.Importance = widget.DangerImportance
	}
	c.verdict.Refresh()
}

// Info is what the card shows.
func (c *ModelCard) Info() ModelInfo { return c.info }

func (c *ModelCard) CreateRenderer() fyne.WidgetRenderer {
	return widget.NewSimpleRenderer(c.content)
}
