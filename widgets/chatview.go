package widgets

import (
	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/canvas"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/layout"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"
)

// ChatMessage is one turn as the transcript shows it.
type ChatMessage struct {
	Role      string // "user" or "assistant"
	Text      string // Markdown; fenced code is shown monospaced
	Stats     string // one line under an assistant message
	Streaming bool   // still being generated
}

// ChatView is a scrolling chat transcript. Updating one message while it
// streams re-renders that message only; the view follows the end while the
// user has not scrolled away from it.
type ChatView struct {
	widget.BaseWidget
	// OnEdit is called for a user message's Edit button (edit and resend).
	OnEdit func(i int)
	// OnRegenerate is called for the last assistant message's Regenerate
	// button.
	OnRegenerate func(i int)

	msgs    []ChatMessage
	bubbles []*bubble
	list    *fyne.Container
	scroll  *container.Scroll
	empty   *widget.Label
}

// NewChatView is an empty transcript.
func NewChatView() *ChatView {
	v := &ChatView{list: container.NewVBox(), empty: widget.NewLabel("No messages yet. Type below and press Ctrl+Enter.")}
	v.empty.Importance = widget.LowImportance
	v.empty.Alignment = fyne.TextAlignCenter
	v.scroll = container.NewVScroll(v.list)
	v.list.Add(v.empty)
	v.ExtendBaseWidget(v)
	return v
}

// SetMessages replaces the transcript.
func (v *ChatView) SetMessages(msgs []ChatMessage) {
	v.msgs = append(v.msgs[:0], msgs...)
	for len(v.bubbles) < len(msgs) {
		v.bubbles = append(v.bubbles, v.newBubble(len(v.bubbles)))
	}
	v.bubbles = v.bubbles[:len(msgs)]
	v.list.Objects = v.list.Objects[:0]
	for i, m := range msgs {
		v.bubbles[i].set(m, v.canRegenerate(i))
		v.list.Objects = append(v.list.Objects, v.bubbles[i].box)
	}
	if len(msgs) == 0 {
		v.list.Objects = append(v.list.Objects, v.empty)
	}
	v.list.Refresh()
	v.scroll.ScrollToBottom()
}

// UpdateMessage replaces message i, the only one re-rendered.
func (v *ChatView) UpdateMessage(i int, m ChatMessage) {
	if i < 0 || i >= len(v.msgs) {
		return
	}
	follow := v.atEnd()
	v.msgs[i] = m
	v.bubbles[i].set(m, v.canRegenerate(i))
	// Only the scroller is refreshed: it lays the list out again when the
	// message grew, without refreshing every other message.
	v.scroll.Refresh()
	if follow {
		v.scroll.ScrollToBottom()
	}
}

// Messages is the transcript shown.
func (v *ChatView) Messages() []ChatMessage { return append([]ChatMessage(nil), v.msgs...) }

// atEnd reports whether the view shows the end of the transcript.
func (v *ChatView) atEnd() bool {
	return v.scroll.Offset.Y+v.scroll.Size().Height >= v.list.MinSize().Height-2*theme.Padding()-1
}

func (v *ChatView) canRegenerate(i int) bool {
	return i == len(v.msgs)-1 && v.msgs[i].Role == "assistant" && !v.msgs[i].Streaming
}

func (v *ChatView) CreateRenderer() fyne.WidgetRenderer {
	return widget.NewSimpleRenderer(v.scroll)
}

// bubble is one message's widgets.
type bubble struct {
	who         *widget.Label
	edit, regen *widget.Button
	body        *widget.RichText
	stats       *canvas.Text
	bg          *canvas.Rectangle
	box         *fyne.Container
	text        string
}

func (v *ChatView) newBubble(i int) *bubble {
	b := &bubble{
		who:   widget.NewLabelWithStyle("", fyne.TextAlignLeading, fyne.TextStyle{Bold: true}),
		body:  widget.NewRichText(),
		stats: canvas.NewText("", nil),
		bg:    canvas.NewRectangle(nil),
	}
	b.body.Wrapping = fyne.TextWrapWord
	b.edit = widget.NewButtonWithIcon("Edit", theme.DocumentCreateIcon(), func() {
		if v.OnEdit != nil {
			v.OnEdit(i)
		}
	})
	b.regen = widget.NewButtonWithIcon("Regenerate", theme.ViewRefreshIcon(), func() {
		if v.OnRegenerate != nil {
			v.OnRegenerate(i)
		}
	})
	b.edit.Importance, b.regen.Importance = widget.LowImportance, widget.LowImportance
	b.bg.CornerRadius = theme.InputRadiusSize()
	head := container.NewHBox(b.who, layout.NewSpacer(), b.edit, b.regen)
	b.box = container.NewStack(b.bg, container.NewPadded(container.NewVBox(head, b.body, b.stats)))
	return b
}

func (b *bubble) set(m ChatMessage, canRegenerate bool) {
	user := m.Role == "user"
	b.who.SetText("Assistant")
	b.bg.FillColor = themeColor(theme.ColorNameInputBackground)
	if user {
		b.who.SetText("You")
		b.bg.FillColor = withAlpha(themeColor(theme.ColorNamePrimary), 0x26)
	}
	b.bg.Refresh()
	b.edit.Hidden = !user
	b.regen.Hidden = !canRegenerate
	text := m.Text
	if m.Streaming {
		text += " ▍"
	}
	if text != b.text {
		b.text = text
		b.body.ParseMarkdown(text)
	}
	b.stats.Text = m.Stats
	b.stats.Hidden = m.Stats == ""
	b.stats.Color = themeColor(theme.ColorNamePlaceHolder)
	b.stats.TextSize = theme.CaptionTextSize()
	b.stats.Refresh()
	b.edit.Refresh()
	b.regen.Refresh()
}
