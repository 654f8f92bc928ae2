package widgets

import (
	"strings"
	"testing"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/test"
	"fyne.io/fyne/v2/widget"
)

func newTestChat(t *testing.T) (*ChatView, fyne.Window) {
	t.Helper()
	test.NewTempApp(t)
	v := NewChatView()
	w := test.NewTempWindow(t, v)
	w.Resize(fyne.NewSize(600, 400))
	return v, w
}

func bodyText(v *ChatView, i int) string {
	var b strings.Builder
	for _, s := range v.bubbles[i].body.Segments {
		b.WriteString(s.Textual())
	}
	return b.String()
}

// Streaming grows the last message in place; the final update drops the
// cursor, shows the statistics and offers Regenerate.
func TestChatViewStreams(t *testing.T) {
	v, _ := newTestChat(t)
	v.SetMessages([]ChatMessage{{Role: "user", Text: "Quote Genesis 1:3."}, {Role: "assistant", Streaming: true}})
	if got := len(buttonsNamed(v, "Regenerate")); got != 0 {
		t.Errorf("%d Regenerate buttons while streaming", got)
	}
	text := ""
	for _, piece := range []string{"And God", " said,", " Let there be light"} {
		text += piece
		v.UpdateMessage(1, ChatMessage{Role: "assistant", Text: text, Streaming: true})
		if got := bodyText(v, 1); got != text+" ▍" {
			t.Fatalf("streaming body %q, want %q", got, text+" ▍")
		}
	}
	v.UpdateMessage(1, ChatMessage{Role: "assistant", Text: text, Stats: "7 tokens, 120.0 tok/s"})
	if got := bodyText(v, 1); got != text {
		t.Errorf("final body %q", got)
	}
	var regenerated []int
	v.OnRegenerate = func(i int) { regenerated = append(regenerated, i) }
	b := buttonsNamed(v, "Regenerate")
	if len(b) != 1 {
		t.Fatalf("%d Regenerate buttons after streaming, want 1", len(b))
	}
	test.Tap(b[0])
	if len(regenerated) != 1 || regenerated[0] != 1 {
		t.Errorf("regenerated %v", regenerated)
	}
	assertMarkup(t, "chat_done.xml", v)
}

func TestChatViewEdit(t *testing.T) {
	v, _ := newTestChat(t)
	var edited []int
	v.OnEdit = func(i int) { edited = append(edited, i) }
	v.SetMessages([]ChatMessage{
		{Role: "user", Text: "one"}, {Role: "assistant", Text: "two"},
		{Role: "user", Text: "three"}, {Role: "assistant", Text: "four"},
	})
	b := buttonsNamed(v, "Edit")
	if len(b) != 2 {
		t.Fatalf("%d Edit buttons, want one per user message", len(b))
	}
	test.Tap(b[1])
	if len(edited) != 1 || edited[0] != 2 {
		t.Errorf("edited %v, want [2]", edited)
	}
	if n := len(buttonsNamed(v, "Regenerate")); n != 1 {
		t.Errorf("%d Regenerate buttons, want 1 (last answer only)", n)
	}
}

// Code fences are rendered as monospaced code blocks.
func TestChatViewCodeBlock(t *testing.T) {
	v, _ := newTestChat(t)
	v.SetMessages([]ChatMessage{{Role: "assistant", Text: "Run:\n\n```\nmake run\n```\n"}})
	var code *widget.TextSegment
	for _, s := range v.bubbles[0].body.Segments {
		if ts, ok := s.(*widget.TextSegment); ok && ts.Style == widget.RichTextStyleCodeBlock {
			code = ts
		}
	}
	if code == nil || code.Text != "make run" || !code.Style.TextStyle.Monospace {
		t.Fatalf("no monospaced code block: %#v", v.bubbles[0].body.Segments)
	}
}

func TestChatViewEmptyAndClear(t *testing.T) {
	v, _ := newTestChat(t)
	assertMarkup(t, "chat_empty.xml", v)
	v.SetMessages([]ChatMessage{{Role: "user", Text: "hi"}})
	v.SetMessages(nil)
	if len(v.list.Objects) != 1 || v.list.Objects[0] != v.empty {
		t.Error("clearing the transcript does not show the empty note")
	}
	v.UpdateMessage(3, ChatMessage{Text: "ignored"}) // out of range: no panic
}
