package widgets

import (
	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"
)

// NoticeKind says how a notice looks.
type NoticeKind int

const (
	NoticeInfo NoticeKind = iota
	NoticeWarning
	NoticeError
)

// Notice is a message above the content (a note, a warning, an error)
// with its full detail one click away and a close button; a compact one
// keeps to one line until unfolded.
type Notice struct {
	widget.BaseWidget
	kind      NoticeKind
	text      *widget.Label
	detail    *widget.Label
	details   *widget.Button
	action    *widget.Button
	more      *widget.Button // in a compact notice: the whole text or one line
	icon      *widget.Icon
	content   *fyne.Container
	onDismiss func()
	onFold    func()
}

// NewNotice is a hidden notice; Set fills and shows it.
func NewNotice() *Notice {
	n := &Notice{text: widget.NewLabel(""), detail: widget.NewLabel(""), icon: widget.NewIcon(nil)}
	n.text.Wrapping = fyne.TextWrapWord
	n.detail.Wrapping = fyne.TextWrapWord
	n.detail.TextStyle.Monospace = true
	n.detail.Selectable = true
	n.detail.Hide()
	n.details = widget.NewButton("Details", func() {
		if n.detail.Visible() {
			n.detail.Hide()
			n.details.SetText("Details")
		} else {
			n.detail.Show()
			n.details.SetText("Hide details")
		}
	})
	n.details.Importance = widget.LowImportance
	closeBtn := widget.NewButtonWithIcon("", theme.CancelIcon(), func() {
		n.Hide()
		if n.onDismiss != nil {
			n.onDismiss()
		}
	})
	closeBtn.Importance = widget.LowImportance
	n.action = widget.NewButton("", nil)
	n.action.Hide()
	n.more = widget.NewButton("More", func() {
		n.fold(n.text.Wrapping == fyne.TextWrapWord)
		if n.onFold != nil {
			n.onFold()
		}
	})
	n.more.Importance = widget.LowImportance
	n.more.Hide()
	n.content = container.NewVBox(
		container.NewBorder(nil, nil, n.icon, container.NewHBox(n.action, n.more, n.details, closeBtn), n.text),
		n.detail)
	n.ExtendBaseWidget(n)
	n.Hide()
	return n
}

// Set shows text, with detail behind the Details button (none when
// detail is empty or says nothing more than text).
func (n *Notice) Set(kind NoticeKind, text, detail string) {
	n.kind = kind
	n.text.SetText(text)
	n.detail.SetText(detail)
	n.detail.Hide()
	n.details.SetText("Details")
	n.details.Hidden = detail == "" || detail == text
	switch kind {
	case NoticeError:
		n.icon.SetResource(theme.NewErrorThemedResource(theme.ErrorIcon()))
		n.text.Importance = widget.DangerImportance
	case NoticeWarning:
		n.icon.SetResource(theme.NewWarningThemedResource(theme.WarningIcon()))
		n.text.Importance = widget.WarningImportance
	default:
		n.icon.SetResource(theme.InfoIcon())
		n.text.Importance = widget.MediumImportance
	}
	n.text.Refresh()
	n.Show()
	n.Refresh()
}

// SetCompact keeps the notice to one line, cut with an ellipsis, with a
// More button that unfolds the whole text: notes that stay above a page
// (a first start's) then leave its controls in view on a small screen.
func (n *Notice) SetCompact(on bool) {
	n.more.Hidden = !on
	n.fold(on)
}

// fold shows the text on one line (on) or all of it.
func (n *Notice) fold(on bool) {
	if on {
		n.text.Wrapping, n.text.Truncation = fyne.TextWrapOff, fyne.TextTruncateEllipsis
		n.more.SetText("More")
	} else {
		n.text.Wrapping, n.text.Truncation = fyne.TextWrapWord, fyne.TextTruncateOff
		n.more.SetText("Less")
	}
	n.text.Refresh()
	n.Refresh()
}

// Folded reports whether a compact notice shows one line only.
func (n *Notice) Folded() bool { return n.more.Visible() && n.text.Wrapping == fyne.TextWrapOff }

// SetAction shows a button labelled label that calls do ("": none).
func (n *Notice) SetAction(label string, do func()) {
	n.action.SetText(label)
	n.action.OnTapped = do
	n.action.Hidden = label == ""
	n.action.Refresh()
}

// Text is the notice's message.
func (n *Notice) Text() string { return n.text.Text }

// Kind is the notice's kind.
func (n *Notice) Kind() NoticeKind { return n.kind }

// OnFold is called when the user folds or unfolds a compact notice (its
// height changed).
func (n *Notice) OnFold(f func()) { n.onFold = f }

// OnDismiss is called when the user closes the notice.
func (n *Notice) OnDismiss(f func()) { n.onDismiss = f }

func (n *Notice) CreateRenderer() fyne.WidgetRenderer {
	return widget.NewSimpleRenderer(n.content)
}
