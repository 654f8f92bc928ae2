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
}

type notice struct {
	kind         widgets.NoticeKind
	text, detail string
}

func newNotices() *notices {
	return &notices{box: container.NewVBox()}
}

// Set adds a notice: text, with detail behind its Details button.
func (q *notices) Set(kind widgets.NoticeKind, text, detail string) {
	same := func(n notice) bool { return n.text == text }
	if slices.ContainsFunc(q.shown, func(w *widgets.Notice) bool { return w.Text() == text }) || slices.ContainsFunc(q.waiting, same) {
		return
	}
	n := notice{kind, text, detail}
	if len(q.shown) >= maxShownNotices {
		q.waiting = append(q.waiting, n)
		return
	}
	q.show(n)
}

func (q *notices) show(n notice) {
	w := widgets.NewNotice()
	w.Set(n.kind, n.text, n.detail)
	w.OnDismiss(func() { q.close(w) })
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
}

// Hide removes every notice, shown or waiting: what they said is over (a
// new load, a new message).
func (q *notices) Hide() {
	q.shown, q.waiting = nil, nil
	q.box.RemoveAll()
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
