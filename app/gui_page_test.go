//go:build !headless

package app

import (
	"testing"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/test"
	"fyne.io/fyne/v2/widget"
)

// refreshCounter is a label that counts the refreshes that reach it.
type refreshCounter struct {
	widget.Label
	n int
}

func newRefreshCounter() *refreshCounter {
	c := &refreshCounter{}
	c.Text = "page"
	c.ExtendBaseWidget(c)
	return c
}

func (c *refreshCounter) Refresh() {
	c.n++
	c.Label.Refresh()
}

// Switching tabs refreshes the shown page only: the hidden one catches up
// when it is shown again.
func TestHiddenPageSkipsTabRefresh(t *testing.T) {
	test.NewTempApp(t)
	first, second := newRefreshCounter(), newRefreshCounter()
	tabs := container.NewAppTabs(container.NewTabItem("One", newPage(first)), container.NewTabItem("Two", newPage(second)))
	w := test.NewTempWindow(t, tabs)
	w.Resize(fyne.NewSize(400, 300))

	first.n, second.n = 0, 0
	tabs.SelectIndex(1)
	if first.n != 0 {
		t.Errorf("the page hidden by the switch was refreshed %d times", first.n)
	}
	if second.n == 0 {
		t.Error("the page shown was not refreshed")
	}

	first.n = 0
	tabs.SelectIndex(0)
	if first.n == 0 {
		t.Error("a page shown again after a skipped refresh was not refreshed")
	}
}
