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

// Notice is a one-line message above the content (a note, a warning, an
// error) with its full detail one click away and a close button.
type Notice struct {
	widget.BaseWidget
	kind      NoticeKind
	text      *widget.Label
	detail    *widget.Label
	details   *widget.Button
	action    *widget.Button
	icon      *widget.Icon
	content   *fyne.Container
	onDismiss func()
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
	n.content = container.NewVBox(
		container.NewBorder(nil, nil, n.icon, container.NewHBox(n.action, n.details, closeBtn), n.text),
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

// OnDismiss is called when the user closes the notice.
func (n *Notice) OnDismiss(f func()) { n.onDismiss = f }

func (n *Notice) CreateRenderer() fyne.WidgetRenderer {
	return widget.NewSimpleRenderer(n.content)
}
