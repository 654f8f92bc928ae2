//go:build !headless

package app

import (
	"fmt"
	"testing"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/test"
	"fyne.io/fyne/v2/widget"

	"github.com/tandem-run/tandem/widgets"
)

// Notices stand together up to three, the rest wait for one to be
// closed; none replaces another and none is added twice.
func TestNoticesQueue(t *testing.T) {
	test.NewTempApp(t)
	q := newNotices()
	for i := range 5 {
		q.Set(widgets.NoticeWarning, fmt.Sprintf("note %d", i), "")
	}
	q.Set(widgets.NoticeWarning, "note 1", "") // shown already
	q.Set(widgets.NoticeWarning, "note 4", "") // waiting already
	if q.Text() != "note 0\nnote 1\nnote 2" || len(q.box.Objects) != 3 || len(q.waiting) != 2 {
		t.Fatalf("shown %q, %d waiting", q.Text(), len(q.waiting))
	}
	closeNotice(t, q.shown[1]) // the user closes "note 1"
	if q.Text() != "note 0\nnote 2\nnote 3" {
		t.Errorf("after closing one: %q", q.Text())
	}
	q.Hide()
	if q.Visible() || len(q.box.Objects) != 0 || len(q.waiting) != 0 {
		t.Errorf("after Hide: %q, %d waiting", q.Text(), len(q.waiting))
	}
	q.Set(widgets.NoticeError, "again", "")
	if !q.Visible() || q.Text() != "again" {
		t.Errorf("after Hide and Set: %q", q.Text())
	}
}

// closeNotice taps a notice's close button, as the user does.
func closeNotice(t *testing.T, n *widgets.Notice) {
	t.Helper()
	test.NewTempWindow(t, n)
	for _, o := range test.LaidOutObjects(n) {
		if b, ok := o.(*widget.Button); ok && b.Text == "" && b.Icon != nil {
			test.Tap(b)
			return
		}
	}
	t.Fatal("the notice has no close button")
}

// Closing the last notice gives its band back to the page at once (it
// stayed empty until the page was switched: issue 26, item 2).
func TestClosedNoticeLeavesNoBand(t *testing.T) {
	h := newHarness(t, nil, nil)
	m := h.m
	m.openChat()
	c := m.chat
	body := c.content.(*fyne.Container).Objects[0] // the page under its notices
	top := body.Position().Y
	c.notice.Set(widgets.NoticeInfo, "Editing a message: Ctrl+Enter resends it, Esc cancels.", "")
	if body.Position().Y <= top {
		t.Fatalf("the page did not make room for the notice: %v, then %v", top, body.Position().Y)
	}
	c.notice.Hide() // Esc while editing
	if got := body.Position().Y; got != top {
		t.Errorf("after the notice went, the page starts at %v, want %v", got, top)
	}
	c.notice.Set(widgets.NoticeInfo, "Exported to /tmp/x.md.", "")
	closeNotice(t, c.notice.shown[0])
	if got := body.Position().Y; got != top {
		t.Errorf("after closing the notice, the page starts at %v, want %v", got, top)
	}
}
