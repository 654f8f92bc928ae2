package widgets

import (
	"strings"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/canvas"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/layout"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"
)

// ChatMessage is one turn as the transcript shows it.
type ChatMessage struct {
	Role string // "user" or "assistant"
	// Text is Markdown whose line breaks are kept; fenced code shows as a
	// code block with a Copy button.
	Text      string
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
	// OnCopy is given the text of a message's or a code block's Copy
	// button (the message as written, the code without its fences).
	OnCopy func(text string)
	// OnSuggestion is called with a suggested prompt the user picked from
	// an empty transcript.
	OnSuggestion func(prompt string)

	msgs        []ChatMessage
	bubbles     []*bubble
	list        *fyne.Container
	scroll      *container.Scroll
	empty       *fyne.Container // the note and suggestions of an empty transcript
	suggestions *fyne.Container
}

// NewChatView is an empty transcript.
func NewChatView() *ChatView {
	v := &ChatView{list: container.NewVBox(), suggestions: container.NewHBox()}
	note := widget.NewLabel("No messages yet. Type below and press Ctrl+Enter.")
	note.Importance = widget.LowImportance
	note.Alignment = fyne.TextAlignCenter
	v.empty = container.NewVBox(note, container.NewCenter(v.suggestions))
	v.empty.Objects[1].Hide()
	v.scroll = container.NewVScroll(newMessageList(v.list))
	v.list.Add(v.empty)
	v.ExtendBaseWidget(v)
	return v
}

// SetSuggestions offers prompts as buttons while the transcript is empty
// (none: nil).
func (v *ChatView) SetSuggestions(prompts []string) {
	v.suggestions.Objects = nil
	if len(prompts) == 0 {
		v.empty.Objects[1].Hide()
	} else {
		v.empty.Objects[1].Show()
	}
	if len(prompts) > 0 {
		v.suggestions.Add(widget.NewLabel("Try:"))
	}
	for _, p := range prompts {
		v.suggestions.Add(widget.NewButton(p, func() {
			if v.OnSuggestion != nil {
				v.OnSuggestion(p)
			}
		}))
	}
	// The note and suggestions are laid out anew, and the column around
	// them (it refreshes no message; see messageList).
	v.empty.Refresh()
	v.scroll.Refresh()
}

// SetMessages replaces the transcript. Only the messages that changed are
// rendered again, and the list is laid out without refreshing the others:
// refreshing a message's rich text measures and shapes all its text again,
// which on a long conversation costs frames each time an answer starts.
func (v *ChatView) SetMessages(msgs []ChatMessage) {
	old := v.msgs
	v.msgs = append([]ChatMessage(nil), msgs...)
	for len(v.bubbles) < len(msgs) {
		v.bubbles = append(v.bubbles, v.newBubble(len(v.bubbles)))
	}
	v.bubbles = v.bubbles[:len(msgs)]
	objs := make([]fyne.CanvasObject, 0, max(len(msgs), 1))
	for i, m := range msgs {
		regen := v.canRegenerate(i)
		if i >= len(old) || old[i] != m || v.bubbles[i].regenShown != regen {
			v.bubbles[i].set(m, regen)
		}
		objs = append(objs, v.bubbles[i].box)
	}
	if len(msgs) == 0 {
		objs = append(objs, v.empty)
	}
	v.list.Objects = objs
	v.scroll.Refresh() // lays the list out (messageList), refreshes no message
	v.scroll.ScrollToBottom()
}

// UpdateMessage replaces message i, the only one re-rendered: the end of
// an answer (its cursor gone, its statistics and buttons shown) touches
// that message alone.
func (v *ChatView) UpdateMessage(i int, m ChatMessage) {
	if i < 0 || i >= len(v.msgs) {
		return
	}
	follow := v.atEnd()
	v.msgs[i] = m
	v.bubbles[i].set(m, v.canRegenerate(i))
	// The scroller takes the list's new height; its content, a
	// messageList, lays the messages out without refreshing them.
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

// messageList is the column of messages inside the scroller. The scroller
// refreshes its content whenever it is refreshed (for every streamed
// chunk), and a container's Refresh refreshes everything in it: the text
// of every message measured, wrapped and shaped again, more work per chunk
// the longer the conversation. A message refreshes what changes in it
// itself, so a messageList's Refresh only lays the column out again.
type messageList struct {
	widget.BaseWidget
	box *fyne.Container
}

func newMessageList(box *fyne.Container) *messageList {
	l := &messageList{box: box}
	l.ExtendBaseWidget(l)
	return l
}

func (l *messageList) CreateRenderer() fyne.WidgetRenderer { return messageListRenderer{l.box} }

type messageListRenderer struct{ box *fyne.Container }

func (r messageListRenderer) Layout(size fyne.Size) {
	if r.box.Size() == size {
		r.box.Layout.Layout(r.box.Objects, size) // Resize would do nothing
		return
	}
	r.box.Resize(size)
}

func (r messageListRenderer) MinSize() fyne.Size { return r.box.MinSize() }

func (r messageListRenderer) Refresh() {
	r.Layout(r.box.Size())
	canvas.Refresh(r.box) // a repaint: the column has no texture to free
}

func (r messageListRenderer) Objects() []fyne.CanvasObject { return []fyne.CanvasObject{r.box} }

func (messageListRenderer) Destroy() {}

// bubble is one message's widgets.
type bubble struct {
	who               *widget.Label
	edit, regen, copy *widget.Button
	body              *fyne.Container // one block widget per chatBlock
	blocks            []blockView
	// stats is the answer's statistics, wrapped rather than one line: a
	// line wider than the transcript would widen the window (a resize of
	// the OS window, the slowest frame there is, at the end of each answer).
	stats      *widget.RichText
	statsText  string
	regenShown bool
	role       string
	bg         *canvas.Rectangle
	head       *fyne.Container // who and the buttons
	box        *fyne.Container
	raw, text  string // the message as written; as shown (with the cursor)
	onCopy     func(string)
}

func (v *ChatView) newBubble(i int) *bubble {
	b := &bubble{
		who:  widget.NewLabelWithStyle("", fyne.TextAlignLeading, fyne.TextStyle{Bold: true}),
		body: container.NewVBox(),
		stats: widget.NewRichText(&widget.TextSegment{Style: widget.RichTextStyle{
			ColorName: theme.ColorNamePlaceHolder, SizeName: theme.SizeNameCaptionText}}),
		bg: canvas.NewRectangle(nil),
	}
	b.onCopy = func(s string) {
		if v.OnCopy != nil {
			v.OnCopy(s)
		}
	}
	b.copy = widget.NewButtonWithIcon("Copy", theme.ContentCopyIcon(), func() { b.onCopy(b.raw) })
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
	b.stats.Wrapping = fyne.TextWrapWord
	b.stats.Hide()
	b.edit.Importance, b.regen.Importance, b.copy.Importance = widget.LowImportance, widget.LowImportance, widget.LowImportance
	b.bg.CornerRadius = theme.InputRadiusSize()
	b.copy.Hide()
	b.edit.Hide()
	b.regen.Hide()
	b.head = container.NewHBox(b.who, layout.NewSpacer(), b.copy, b.edit, b.regen)
	b.box = container.NewStack(b.bg, container.NewPadded(container.NewVBox(b.head, b.body, b.stats)))
	return b
}

// set shows m, touching only what changed: the messages are not refreshed
// as a whole (see messageList).
func (b *bubble) set(m ChatMessage, canRegenerate bool) {
	user := m.Role == "user"
	if m.Role != b.role {
		b.role = m.Role
		b.who.SetText("Assistant")
		b.bg.FillColor = themeColor(theme.ColorNameInputBackground)
		if user {
			b.who.SetText("You")
			b.bg.FillColor = withAlpha(themeColor(theme.ColorNamePrimary), 0x26)
		}
		b.bg.Refresh()
	}
	b.raw = m.Text
	buttons := showIf(b.edit, user)
	buttons = showIf(b.regen, canRegenerate) || buttons
	buttons = showIf(b.copy, !m.Streaming && m.Text != "") || buttons
	if buttons {
		b.head.Refresh() // its layout: the buttons shown moved
	}
	b.regenShown = canRegenerate
	text := m.Text
	if m.Streaming {
		text += " ▍"
	}
	if text != b.text {
		b.text = text
		b.showBlocks(splitBlocks(text))
	}
	if m.Stats != b.statsText {
		b.statsText = m.Stats
		b.stats.Segments[0].(*widget.TextSegment).Text = m.Stats
		b.stats.Refresh()
		showIf(b.stats, m.Stats != "")
	}
}

// showIf shows or hides o and reports whether that changed it.
func showIf(o fyne.CanvasObject, show bool) bool {
	if o.Visible() == show {
		return false
	}
	if show {
		o.Show()
	} else {
		o.Hide()
	}
	return true
}

// blockView is the widget of one of a message's blocks: a code block, or
// rich text for prose with the text it shows.
type blockView struct {
	code  *codeBlock
	prose *widget.RichText
	text  string
}

func (b blockView) object() fyne.CanvasObject {
	if b.code != nil {
		return b.code
	}
	return b.prose
}

// showBlocks shows the message's blocks, reusing the widgets of blocks
// that keep their kind: while an answer streams only its last block
// changes, and only that one is parsed again.
func (b *bubble) showBlocks(blocks []chatBlock) {
	for i, bl := range blocks {
		if i < len(b.blocks) {
			v := &b.blocks[i]
			switch {
			case bl.code && v.code != nil:
				v.code.set(bl.lang, bl.text)
				continue
			case !bl.code && v.prose != nil:
				if v.text != bl.text {
					v.text = bl.text
					v.prose.Segments = proseSegments(bl.text)
					v.prose.Refresh()
				}
				continue
			}
			b.blocks = b.blocks[:i]
		}
		if bl.code {
			c := newCodeBlock(b.onCopy)
			c.set(bl.lang, bl.text)
			b.blocks = append(b.blocks, blockView{code: c})
		} else {
			r := widget.NewRichText(proseSegments(bl.text)...)
			r.Wrapping = fyne.TextWrapWord
			b.blocks = append(b.blocks, blockView{prose: r, text: bl.text})
		}
	}
	b.blocks = b.blocks[:len(blocks)]
	same := len(b.body.Objects) == len(b.blocks)
	for i, v := range b.blocks {
		same = same && b.body.Objects[i] == v.object()
	}
	if same {
		return // the block that changed refreshed itself
	}
	b.body.Objects = b.body.Objects[:0]
	for _, v := range b.blocks {
		b.body.Objects = append(b.body.Objects, v.object())
	}
	b.body.Layout.Layout(b.body.Objects, b.body.Size())
	canvas.Refresh(b.body)
}

// segmentsText is the text of rich text segments, lists' items included.
func segmentsText(segs []widget.RichTextSegment) string {
	var s strings.Builder
	for _, seg := range segs {
		switch t := seg.(type) {
		case *widget.ListSegment:
			s.WriteString(segmentsText(t.Items))
		case *widget.ParagraphSegment:
			s.WriteString(segmentsText(t.Texts))
		default:
			s.WriteString(seg.Textual())
		}
	}
	return s.String()
}

// shownText is the message as the blocks show it, code fenced again (for
// tests).
func (b *bubble) shownText() string {
	var parts []string
	for _, v := range b.blocks {
		if v.code != nil {
			parts = append(parts, "```"+v.code.lang+"\n"+v.code.code+"\n```")
		} else {
			parts = append(parts, segmentsText(v.prose.Segments))
		}
	}
	return strings.Join(parts, "\n")
}
