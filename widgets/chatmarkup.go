package widgets

import (
	"strings"

	"fyne.io/fyne/v2/widget"
)

// chatBlock is a run of a message: prose (Markdown) or a fenced code block.
type chatBlock struct {
	code bool
	lang string // the fence's language, "" when none was given
	text string // prose as written; code without its fences
}

// splitBlocks cuts a message into prose and fenced code blocks (``` or
// ~~~, up to three spaces indented, closed by a fence of the same kind at
// least as long). A fence not closed yet (an answer still streaming) runs
// to the end of the message.
func splitBlocks(text string) []chatBlock {
	var out []chatBlock
	var prose, code []string
	var fence, lang string
	flushProse := func() {
		if p := strings.Trim(strings.Join(prose, "\n"), "\n"); p != "" {
			out = append(out, chatBlock{text: p})
		}
		prose = prose[:0]
	}
	for _, line := range strings.Split(text, "\n") {
		trimmed := strings.TrimLeft(line, " ")
		indent := len(line) - len(trimmed)
		if fence == "" {
			if f := fenceOf(trimmed); f != "" && indent <= 3 && !(f[0] == '`' && strings.Contains(trimmed[len(f):], "`")) {
				flushProse()
				fence, code = f, code[:0]
				lang, _, _ = strings.Cut(strings.TrimSpace(trimmed[len(f):]), " ")
				continue
			}
			prose = append(prose, line)
			continue
		}
		if f := fenceOf(trimmed); indent <= 3 && f != "" && f[0] == fence[0] && len(f) >= len(fence) && strings.TrimSpace(trimmed[len(f):]) == "" {
			out = append(out, chatBlock{code: true, lang: lang, text: strings.Join(code, "\n")})
			fence = ""
			continue
		}
		code = append(code, line)
	}
	if fence != "" {
		out = append(out, chatBlock{code: true, lang: lang, text: strings.Join(code, "\n")})
	} else {
		flushProse()
	}
	return out
}

// fenceOf is the run of three or more backticks or tildes line starts
// with, or "".
func fenceOf(line string) string {
	if len(line) < 3 || line[0] != '`' && line[0] != '~' {
		return ""
	}
	n := 0
	for n < len(line) && line[n] == line[0] {
		n++
	}
	if n < 3 {
		return ""
	}
	return line[:n]
}

// lineBreak stands for a line break inside a paragraph while Markdown is
// parsed: Markdown joins a paragraph's lines with spaces, but a model's
// answer (a poem, an address, a fortune and its author) means its line
// breaks. U+2028 is a character Markdown has no use for, so it passes the
// parser as text and becomes "\n" in the segments.
const lineBreak = "\u2028"

// proseSegments is Markdown as rich text, with the line breaks inside
// paragraphs kept.
func proseSegments(md string) []widget.RichTextSegment {
	lines := strings.Split(strings.ReplaceAll(md, "\t", "    "), "\n")
	var b strings.Builder
	for i, line := range lines {
		b.WriteString(line)
		if i == len(lines)-1 {
			break
		}
		if keepsParagraph(line, lines[i+1]) {
			b.WriteString(lineBreak)
		} else {
			b.WriteString("\n")
		}
	}
	r := widget.NewRichTextFromMarkdown(b.String())
	for _, s := range r.Segments {
		replaceLineBreaks(s)
	}
	return r.Segments
}

// keepsParagraph reports whether next continues the paragraph line is in,
// so the break between them is a line break: both hold text, line is not
// a heading or a rule, and next does not start a block of its own (a
// heading, a list item, a quote, a rule, a fence).
func keepsParagraph(line, next string) bool {
	if strings.TrimSpace(line) == "" || strings.TrimSpace(next) == "" {
		return false
	}
	l := strings.TrimLeft(line, " ")
	if strings.HasPrefix(l, "#") || isRule(l) {
		return false
	}
	n := strings.TrimLeft(next, " ")
	switch {
	case strings.HasPrefix(n, "#"), strings.HasPrefix(n, ">"), fenceOf(n) != "", isRule(n):
		return false
	case strings.HasPrefix(n, "- "), strings.HasPrefix(n, "* "), strings.HasPrefix(n, "+ "):
		return false
	}
	digits := len(n) - len(strings.TrimLeft(n, "0123456789"))
	if digits > 0 && digits < 10 && len(n) > digits+1 && (n[digits] == '.' || n[digits] == ')') && n[digits+1] == ' ' {
		return false
	}
	return true
}

// isRule reports a thematic break: three or more of -, * or _ alone.
func isRule(l string) bool {
	s := strings.ReplaceAll(strings.TrimSpace(l), " ", "")
	return len(s) >= 3 && strings.Count(s, s[:1]) == len(s) && strings.ContainsAny(s[:1], "-*_")
}

func replaceLineBreaks(s widget.RichTextSegment) {
	switch t := s.(type) {
	case *widget.TextSegment:
		t.Text = strings.ReplaceAll(t.Text, lineBreak, "\n")
	case *widget.HyperlinkSegment:
		t.Text = strings.ReplaceAll(t.Text, lineBreak, " ")
	case *widget.ParagraphSegment:
		for _, c := range t.Texts {
			replaceLineBreaks(c)
		}
	case *widget.ListSegment:
		for _, c := range t.Items {
			replaceLineBreaks(c)
		}
	}
}
