package widgets

import (
	"strings"

	"github.com/alecthomas/chroma/v2"
	"github.com/alecthomas/chroma/v2/lexers"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/canvas"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/layout"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"
)

// maxHighlighted bounds the code coloured in one block: past it the code
// shows plain, so a runaway answer costs no more per frame than a page.
const maxHighlighted = 64 << 10

// codeBlock is a fenced code block of a chat message: monospaced on its own
// background, coloured by its language when chroma knows it, with its
// language and a Copy button above it. Long lines break rather than scroll
// sideways: a sideways scroller inside the transcript would take the
// vertical wheel from it.
type codeBlock struct {
	widget.BaseWidget
	lang, code string
	onCopy     func(string)

	bg      *canvas.Rectangle
	label   *canvas.Text
	copyBtn *widget.Button
	text    *widget.RichText
	content fyne.CanvasObject
}

func newCodeBlock(onCopy func(string)) *codeBlock {
	b := &codeBlock{onCopy: onCopy, bg: canvas.NewRectangle(nil), label: canvas.NewText("", nil), text: widget.NewRichText()}
	b.bg.CornerRadius = theme.InputRadiusSize()
	b.bg.StrokeWidth = 1
	b.text.Wrapping = fyne.TextWrapBreak
	b.copyBtn = widget.NewButtonWithIcon("Copy", theme.ContentCopyIcon(), func() {
		if b.onCopy != nil {
			b.onCopy(b.code)
			b.copyBtn.SetIcon(theme.ConfirmIcon())
		}
	})
	b.copyBtn.Importance = widget.LowImportance
	head := container.NewHBox(container.NewCenter(b.label), layout.NewSpacer(), b.copyBtn)
	b.content = container.NewStack(b.bg, container.NewPadded(container.NewBorder(head, nil, nil, nil, b.text)))
	b.ExtendBaseWidget(b)
	return b
}

// set shows code in language lang ("" when the fence named none).
func (b *codeBlock) set(lang, code string) {
	if lang == b.lang && code == b.code && b.text.Segments != nil {
		return
	}
	b.lang, b.code = lang, code
	b.label.Text = lang
	b.label.Hidden = lang == ""
	b.text.Segments = highlight(lang, code)
	b.copyBtn.SetIcon(theme.ContentCopyIcon())
	b.Refresh()
}

func (b *codeBlock) Refresh() {
	b.bg.FillColor = themeColor(theme.ColorNameBackground)
	b.bg.StrokeColor = themeColor(theme.ColorNameSeparator)
	b.label.Color = themeColor(theme.ColorNamePlaceHolder)
	b.label.TextSize = theme.CaptionTextSize()
	b.label.TextStyle.Monospace = true
	b.bg.Refresh()
	b.label.Refresh()
	b.text.Refresh()
}

func (b *codeBlock) CreateRenderer() fyne.WidgetRenderer {
	b.Refresh()
	return widget.NewSimpleRenderer(b.content)
}

// highlight is code as monospaced rich text, its tokens coloured with the
// theme's colours by kind when lang names a language chroma knows. Theme
// colour names (not a chroma style's colours) keep it readable in the
// light and the dark theme alike.
func highlight(lang, code string) []widget.RichTextSegment {
	plain := func() []widget.RichTextSegment {
		return codeLines([]styledRun{{code, ""}})
	}
	if lang == "" || len(code) > maxHighlighted {
		return plain()
	}
	lexer := lexers.Get(lang)
	if lexer == nil {
		return plain()
	}
	it, err := chroma.Coalesce(lexer).Tokenise(nil, code)
	if err != nil {
		return plain()
	}
	var runs []styledRun
	for tok := it(); tok != chroma.EOF; tok = it() {
		c := tokenColor(tok.Type)
		if n := len(runs); n > 0 && runs[n-1].color == c {
			runs[n-1].text += tok.Value
			continue
		}
		runs = append(runs, styledRun{tok.Value, c})
	}
	// chroma ends its tokens with a newline the code did not have.
	if n := len(runs); n > 0 && !strings.HasSuffix(code, "\n") {
		runs[n-1].text = strings.TrimSuffix(runs[n-1].text, "\n")
	}
	return codeLines(runs)
}

// styledRun is text of one colour ("": the foreground).
type styledRun struct {
	text  string
	color fyne.ThemeColorName
}

// codeLines turns coloured runs into segments, one row per line of code:
// each line's last segment ends the row, and an empty line holds a space
// so it keeps its height.
func codeLines(runs []styledRun) []widget.RichTextSegment {
	var segs []widget.RichTextSegment
	lineEmpty := true
	add := func(text string, c fyne.ThemeColorName, endsLine bool) {
		if text == "" && !endsLine {
			return
		}
		if endsLine && lineEmpty && text == "" {
			text = " "
		}
		st := widget.RichTextStyle{Inline: !endsLine, ColorName: c, SizeName: theme.SizeNameText,
			TextStyle: fyne.TextStyle{Monospace: true}}
		if c == "" {
			st.ColorName = theme.ColorNameForeground
		}
		segs = append(segs, &widget.TextSegment{Text: text, Style: st})
		lineEmpty = endsLine
	}
	for _, r := range runs {
		lines := strings.Split(r.text, "\n")
		for i, l := range lines {
			add(l, r.color, i < len(lines)-1)
		}
	}
	switch {
	case len(segs) == 0:
		add("", "", true)
	case !lineEmpty: // the last line has no newline: its last run ends it
		segs[len(segs)-1].(*widget.TextSegment).Style.Inline = false
	}
	return segs
}

// tokenColor is the theme colour of a kind of token.
func tokenColor(t chroma.TokenType) fyne.ThemeColorName {
	switch {
	case t.InCategory(chroma.Comment):
		return theme.ColorNamePlaceHolder
	case t.InCategory(chroma.Keyword), t.InSubCategory(chroma.NameBuiltin), t == chroma.NameTag:
		return theme.ColorNamePrimary
	case t.InSubCategory(chroma.LiteralString):
		return theme.ColorNameSuccess
	case t.InSubCategory(chroma.LiteralNumber), t == chroma.NameConstant:
		return theme.ColorNameWarning
	case t == chroma.Error, t == chroma.GenericDeleted, t == chroma.GenericError:
		return theme.ColorNameError
	}
	return ""
}
