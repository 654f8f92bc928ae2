//go:build !headless

package app

import (
	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/canvas"
	"fyne.io/fyne/v2/widget"
)

// page is one tab's content. Fyne's AppTabs refreshes the content of
// every tab whenever the selection changes (its theme pass), so showing
// the chat after a load refreshed the Models and Find pages too, widget
// by widget, in the frame that first shows the chat. A hidden page skips
// such a refresh and makes up for it when it is shown again; its widgets
// still refresh themselves when the app changes them.
type page struct {
	widget.BaseWidget
	content fyne.CanvasObject
	stale   bool // a refresh was skipped while hidden
}

func newPage(content fyne.CanvasObject) *page {
	p := &page{content: content}
	p.ExtendBaseWidget(p)
	return p
}

func (p *page) CreateRenderer() fyne.WidgetRenderer { return widget.NewSimpleRenderer(p.content) }

// Refresh refreshes the content if the page is shown.
func (p *page) Refresh() {
	if !p.Visible() {
		p.stale = true
		return
	}
	p.stale = false
	p.BaseWidget.Refresh()
}

// Show shows the page, refreshed only if a refresh was skipped meanwhile.
func (p *page) Show() {
	if p.Visible() {
		return
	}
	p.Hidden = false
	if p.stale {
		p.Refresh()
		return
	}
	canvas.Refresh(p)
}
