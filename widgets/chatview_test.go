package widgets

import (
	"strings"
	"testing"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/canvas"
	"fyne.io/fyne/v2/test"
	"fyne.io/fyne/v2/theme"
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

func bodyText(v *ChatView, i int) string { return v.bubbles[i].shownText() }

// drawnTexts is every canvas text drawn inside o, joined.
func drawnTexts(o fyne.CanvasObject) string {
	var b strings.Builder
	for _, c := range test.LaidOutObjects(o) {
		if t, ok := c.(*canvas.Text); ok && t.Visible() {
			b.WriteString(t.Text)
		}
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
	// What is drawn, not only the segments: the streamed text reached the
	// rich text's renderer (a widget wrapping another once kept its first
	// rendering, the cursor alone).
	if drawn := drawnTexts(v); !strings.Contains(drawn, text) || strings.Contains(drawn, "▍") {
		t.Errorf("drawn %q", drawn)
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

// Fenced code shows as a code block: monospaced, coloured by its
// language, with a Copy button that copies the code alone; every message
// has a Copy button for its text as written.
func TestChatViewCodeBlock(t *testing.T) {
	v, _ := newTestChat(t)
	var copied []string
	v.OnCopy = func(s string) { copied = append(copied, s) }
	msg := "Run:\n\n```go\nfunc main() {\n\t// hello\n\tprintln(\"hi\", 42)\n}\n```\n\nThen check it."
	v.SetMessages([]ChatMessage{{Role: "assistant", Text: msg}})
	blocks := v.bubbles[0].blocks
	if len(blocks) != 3 {
		t.Fatalf("%d blocks, want prose, code, prose", len(blocks))
	}
	code := blocks[1].code
	if code == nil || code.lang != "go" || code.code != "func main() {\n\t// hello\n\tprintln(\"hi\", 42)\n}" {
		t.Fatalf("code block %#v", code)
	}
	colours := map[string]fyne.ThemeColorName{}
	var rows []string
	row := ""
	for _, s := range code.text.Segments {
		ts := s.(*widget.TextSegment)
		if !ts.Style.TextStyle.Monospace {
			t.Errorf("segment %q is not monospaced", ts.Text)
		}
		colours[strings.TrimSpace(ts.Text)] = ts.Style.ColorName
		if row += ts.Text; !ts.Style.Inline {
			rows, row = append(rows, row), ""
		}
	}
	if len(rows) != 4 || rows[0] != "func main() {" || rows[3] != "}" {
		t.Errorf("code rows %q, want the 4 lines", rows)
	}
	for tok, want := range map[string]fyne.ThemeColorName{"func": theme.ColorNamePrimary, "// hello": theme.ColorNamePlaceHolder, `"hi"`: theme.ColorNameSuccess, "42": theme.ColorNameWarning} {
		if colours[tok] != want {
			t.Errorf("%s coloured %q, want %q (%v)", tok, colours[tok], want, colours)
		}
	}
	b := buttonsNamed(v, "Copy")
	if len(b) != 2 {
		t.Fatalf("%d Copy buttons, want one for the message and one for the code", len(b))
	}
	for _, btn := range b {
		test.Tap(btn)
	}
	if len(copied) != 2 || copied[0] != msg || copied[1] != code.code {
		t.Errorf("copied %q", copied)
	}
	assertMarkup(t, "chat_code.xml", v)
}

// A code block still streaming (its fence not closed yet) shows as code,
// and a message's line breaks are kept (Markdown would join the lines of
// a paragraph into one).
func TestChatViewLineBreaksAndOpenFence(t *testing.T) {
	v, _ := newTestChat(t)
	fortune := "The most important thing in a relationship between a man and a woman\nis that one of them be good at taking orders.\n\t\t-- Linda Festa"
	v.SetMessages([]ChatMessage{{Role: "assistant", Text: fortune}, {Role: "assistant", Text: "Here:\n```sh\nmake run", Streaming: true}})
	want := "The most important thing in a relationship between a man and a woman\nis that one of them be good at taking orders.\n        -- Linda Festa"
	if got := bodyText(v, 0); got != want {
		t.Errorf("fortune shown as %q, want %q", got, want)
	}
	if got := bodyText(v, 1); got != "Here:\n```sh\nmake run ▍\n```" {
		t.Errorf("streaming code shown as %q", got)
	}
	// Lists and headings still work; a list item's own lines stay apart.
	for md, want := range map[string]string{
		"# Title\nText":        "TitleText",
		"Steps:\n- one\n- two": "Steps:onetwo",
		"a\nb\n\nc":            "a\nbc",
		"**bold**\nplain":      "bold\nplain",
		"1. first\n2. second":  "firstsecond",
		"x\n---\ny":            "xy",
	} {
		v.SetMessages([]ChatMessage{{Role: "assistant", Text: md}})
		if got := bodyText(v, 0); got != want {
			t.Errorf("%q shown as %q, want %q", md, got, want)
		}
	}
}

// An empty transcript offers the suggested prompts.
func TestChatViewSuggestions(t *testing.T) {
	v, _ := newTestChat(t)
	var picked []string
	v.OnSuggestion = func(p string) { picked = append(picked, p) }
	v.SetSuggestions([]string{"Quote Genesis 1:3.", "Tell me a fortune."})
	b := buttonsNamed(v, "Tell me a fortune.")
	if len(b) != 1 {
		t.Fatal("no suggestion button")
	}
	test.Tap(b[0])
	if len(picked) != 1 || picked[0] != "Tell me a fortune." {
		t.Errorf("picked %q", picked)
	}
	v.SetMessages([]ChatMessage{{Role: "user", Text: "hi"}})
	if len(buttonsNamed(v, "Tell me a fortune.")) != 0 {
		t.Error("suggestions shown over a transcript")
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

// A statistics line longer than the transcript is wide wraps: it does not
// widen the transcript (and the window, which a resize makes the slowest
// frame there is). Setting the transcript again with one more message
// renders the new one and keeps the widgets of those before it.
func TestChatViewLongStatsWrapAndSetKeepsEarlier(t *testing.T) {
	v, _ := newTestChat(t)
	msgs := []ChatMessage{{Role: "user", Text: "Quote Genesis 1:3."}, {Role: "assistant", Text: "And God said, Let there be light"}}
	v.SetMessages(msgs)
	narrow := v.MinSize().Width
	msgs[1].Stats = strings.Repeat("12345 tokens, 713.9 tok/s · ", 20) + "drafting off: drafting costs more than it saves on this pair"
	v.UpdateMessage(1, msgs[1])
	if w := v.MinSize().Width; w > narrow {
		t.Errorf("a long statistics line widened the transcript from %v to %v", narrow, w)
	}
	if drawn := drawnTexts(v); !strings.Contains(drawn, "drafting off") {
		t.Errorf("the statistics are not drawn: %q", drawn)
	}
	prose := v.bubbles[1].blocks[0].prose
	segs := prose.Segments
	v.SetMessages(append(msgs, ChatMessage{Role: "user", Text: "And verse 4?"}))
	if v.bubbles[1].blocks[0].prose != prose || &prose.Segments[0] != &segs[0] {
		t.Error("setting the transcript again rendered an unchanged message anew")
	}
	if got := bodyText(v, 2); got != "And verse 4?" {
		t.Errorf("the new message shows %q", got)
	}
	if n := len(buttonsNamed(v, "Regenerate")); n != 0 {
		t.Errorf("%d Regenerate buttons after a user message, want 0", n)
	}
}

// A streamed chunk and the end of an answer refresh that answer alone: the
// messages before it are not measured, wrapped and drawn again (the
// scroller refreshes its content on every update, and a container's
// refresh refreshes all it holds). The probe is an earlier message's text
// changed behind its widget's back: it shows only if something refreshed
// that message.
func TestChatViewUpdateRefreshesOneMessage(t *testing.T) {
	v, _ := newTestChat(t)
	v.SetMessages([]ChatMessage{{Role: "user", Text: "Quote Genesis 1:3."}, {Role: "assistant", Text: "And God said"},
		{Role: "user", Text: "And verse 4?"}, {Role: "assistant", Streaming: true}})
	if drawn := renderedTexts(v); !strings.Contains(drawn, "And God said") {
		t.Fatalf("drawn %q", drawn)
	}
	probe := firstText(v.bubbles[1].blocks[0].prose.Segments)
	if probe == nil {
		t.Fatal("no text segment in the first answer")
	}
	probe.Text = "probe"
	text := ""
	for _, piece := range []string{"And God saw", " the light,", " that it was good"} {
		text += piece
		v.UpdateMessage(3, ChatMessage{Role: "assistant", Text: text, Streaming: true})
	}
	v.UpdateMessage(3, ChatMessage{Role: "assistant", Text: text, Stats: "9 tokens, 99.0 tok/s"})
	drawn := renderedTexts(v)
	if strings.Contains(drawn, "probe") {
		t.Error("updating the last answer refreshed the first one")
	}
	if !strings.Contains(drawn, text) || !strings.Contains(drawn, "9 tokens") || len(buttonsNamed(v, "Regenerate")) != 1 {
		t.Errorf("the last answer is not drawn whole: %q", drawn)
	}
}

// renderedTexts is the text of the canvas texts inside o as its widgets'
// renderers hold them now (drawnTexts makes the renderers anew).
func renderedTexts(o fyne.CanvasObject) string {
	var b strings.Builder
	var walk func(o fyne.CanvasObject)
	walk = func(o fyne.CanvasObject) {
		if !o.Visible() {
			return
		}
		switch c := o.(type) {
		case *canvas.Text:
			b.WriteString(c.Text)
		case fyne.Widget:
			for _, ch := range test.WidgetRenderer(c).Objects() {
				walk(ch)
			}
		case *fyne.Container:
			for _, ch := range c.Objects {
				walk(ch)
			}
		}
	}
	walk(o)
	return b.String()
}

// firstText is the first text segment in segs, lists' and paragraphs'
// items included.
func firstText(segs []widget.RichTextSegment) *widget.TextSegment {
	for _, s := range segs {
		switch t := s.(type) {
		case *widget.TextSegment:
			return t
		case *widget.ParagraphSegment:
			if r := firstText(t.Texts); r != nil {
				return r
			}
		case *widget.ListSegment:
			if r := firstText(t.Items); r != nil {
				return r
			}
		}
	}
	return nil
}
