//go:build !headless

package app

import (
	"slices"
	"strings"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"

	"github.com/tandem-run/tandem/widgets"
)

// maxShownNotices is how many notices stand above a page at once; more
// wait their turn.
const maxShownNotices = 3

// notices stands notes above a page, each with its own close button. A
// notice never replaces another (a settings file set aside at start must
// still be seen when the demo pair's note follows): up to maxShownNotices
// show at once, oldest first, and later ones wait until one is closed. A
// notice already shown or waiting is not added twice. Like the window, it
// belongs to the main goroutine.
type notices struct {
	box     *fyne.Container // the shown notices, for the page's layout
	shown   []*widgets.Notice
	waiting []notice
	// page is the container box sits in, laid out again when notices come
	// and go: nothing lays out a box's parent when the box shrinks, so a
	// closed notice left its band empty until the page was switched.
	page *fyne.Container
}

type notice struct {
	kind         widgets.NoticeKind
	text, detail string
	action       string // the label of a button that runs do and closes the notice; "": none
	do           func()
	closed       func() // called when the user closes the notice; nil: nothing
}

func newNotices() *notices {
	q := &notices{box: container.NewVBox()}
	q.box.Hide() // no band while there is nothing to say
	return q
}

// in says which container the notices' box is laid out by.
func (q *notices) in(page *fyne.Container) { q.page = page }

// Set adds a notice: text, with detail behind its Details button.
func (q *notices) Set(kind widgets.NoticeKind, text, detail string) {
	q.add(notice{kind: kind, text: text, detail: detail})
}

// SetAction adds a notice with a button labelled action that runs do and
// closes it; closed runs when the user closes it instead.
func (q *notices) SetAction(kind widgets.NoticeKind, text, action string, do, closed func()) {
	q.add(notice{kind: kind, text: text, action: action, do: do, closed: closed})
}

func (q *notices) add(n notice) {
	same := func(o notice) bool { return o.text == n.text }
	if slices.ContainsFunc(q.shown, func(w *widgets.Notice) bool { return w.Text() == n.text }) || slices.ContainsFunc(q.waiting, same) {
		return
	}
	if len(q.shown) >= maxShownNotices {
		q.waiting = append(q.waiting, n)
		return
	}
	q.show(n)
	q.laidOut()
}

func (q *notices) show(n notice) {
	w := widgets.NewNotice()
	w.Set(n.kind, n.text, n.detail)
	if n.action != "" {
		w.SetAction(n.action, func() {
			q.close(w)
			n.do()
		})
	}
	w.OnDismiss(func() {
		q.close(w)
		if n.closed != nil {
			n.closed()
		}
	})
	q.shown = append(q.shown, w)
	q.box.Add(w)
}

// close removes a shown notice and lets the next waiting one in.
func (q *notices) close(w *widgets.Notice) {
	q.shown = slices.DeleteFunc(q.shown, func(x *widgets.Notice) bool { return x == w })
	q.box.Remove(w)
	if len(q.waiting) > 0 {
		n := q.waiting[0]
		q.waiting = q.waiting[1:]
		q.show(n)
	}
	q.laidOut()
}

// Drop removes the notice that says text, shown or waiting, as the code
// that set it no longer holds it true; its closed is not called.
func (q *notices) Drop(text string) {
	q.waiting = slices.DeleteFunc(q.waiting, func(n notice) bool { return n.text == text })
	for _, w := range q.shown {
		if w.Text() == text {
			q.close(w)
			return
		}
	}
}

// Hide removes every notice, shown or waiting: what they said is over (a
// new load, a new message).
func (q *notices) Hide() {
	if len(q.shown) == 0 && len(q.waiting) == 0 {
		return // nothing to lay out again: a full page refresh costs frames
	}
	q.shown, q.waiting = nil, nil
	q.box.RemoveAll()
	q.laidOut()
}

// laidOut shows the box only while it holds a notice and lays the page
// out again for its new height.
func (q *notices) laidOut() {
	q.box.Hidden = len(q.shown) == 0
	q.box.Refresh()
	// Laid out, not refreshed: a container's Refresh refreshes everything
	// inside it, which on the Models page costs frames (the box's own
	// refresh already asks for the repaint).
	if q.page != nil && q.page.Layout != nil {
		q.page.Layout.Layout(q.page.Objects, q.page.Size())
	}
}

// Visible reports whether any notice shows.
func (q *notices) Visible() bool { return len(q.shown) > 0 }

// Text is what the shown notices say, one a line.
func (q *notices) Text() string {
	var lines []string
	for _, w := range q.shown {
		lines = append(lines, w.Text())
	}
	return strings.Join(lines, "\n")
}
