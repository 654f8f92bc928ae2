package grammar

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// MaxGBNFBytes bounds a GBNF text; a request's grammar is a few kilobytes.
const MaxGBNFBytes = 1 << 20

// ParseGBNF reads a grammar in llama.cpp's GBNF: `name ::= ...` rules of
// "literals", [character classes] (with ^ to negate), `.` for any
// character, rule names, ( groups ), `|` choices and the repetitions * + ?
// {m} {m,} {m,n}; `#` comments. A rule ends at the end of its line, except
// inside parentheses and after `|`. Escapes: \n \r \t \\ \" \' \[ \] \-
// \^ \xHH \uHHHH \UHHHHHHHH.
func ParseGBNF(src string) (*Rules, error) {
	if len(src) > MaxGBNFBytes {
		return nil, fmt.Errorf("grammar: %d bytes of GBNF, over %d: %w", len(src), MaxGBNFBytes, ErrSyntax)
	}
	if !utf8.ValidString(src) {
		return nil, fmt.Errorf("grammar: GBNF is not UTF-8: %w", ErrSyntax)
	}
	p := &gbnfParser{src: src, rules: &Rules{}}
	if err := p.grammar(); err != nil {
		return nil, err
	}
	return p.rules, nil
}

// CompileGBNF parses src and compiles it from its rule "root".
func CompileGBNF(src string) (*Grammar, error) {
	r, err := ParseGBNF(src)
	if err != nil {
		return nil, err
	}
	return r.Compile("root")
}

type gbnfParser struct {
	src   string
	pos   int
	rules *Rules
	depth int
}

// maxNesting bounds parentheses, so a hostile grammar cannot exhaust the
// parser's stack.
const maxNesting = 256

func (p *gbnfParser) errorf(format string, args ...any) error {
	line := 1 + strings.Count(p.src[:p.pos], "\n")
	col := p.pos - strings.LastIndexByte(p.src[:p.pos], '\n')
	return fmt.Errorf("grammar: line %d column %d: %s: %w", line, col, fmt.Sprintf(format, args...), ErrSyntax)
}

// space skips blanks and comments; newlines too when newlines is set.
func (p *gbnfParser) space(newlines bool) {
	for p.pos < len(p.src) {
		switch c := p.src[p.pos]; {
		case c == ' ' || c == '\t' || c == '\r':
			p.pos++
		case c == '\n' && newlines:
			p.pos++
		case c == '#':
			for p.pos < len(p.src) && p.src[p.pos] != '\n' {
				p.pos++
			}
		default:
			return
		}
	}
}

func isNameByte(c byte) bool {
	return c == '-' || c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

func (p *gbnfParser) name() string {
	start := p.pos
	for p.pos < len(p.src) && isNameByte(p.src[p.pos]) {
		p.pos++
	}
	return p.src[start:p.pos]
}

func (p *gbnfParser) grammar() error {
	for {
		p.space(true)
		if p.pos >= len(p.src) {
			break
		}
		name := p.name()
		if name == "" {
			return p.errorf("expected a rule name, found %q", p.peekText())
		}
		p.space(false)
		if !strings.HasPrefix(p.src[p.pos:], "::=") {
			return p.errorf("expected ::= after %q", name)
		}
		p.pos += 3
		p.space(true)
		e, err := p.alternatives(false)
		if err != nil {
			return err
		}
		if err := p.rules.Define(name, e); err != nil {
			return p.errorf("%v", err)
		}
		p.space(false)
		if p.pos < len(p.src) && p.src[p.pos] != '\n' {
			return p.errorf("unexpected %q at the end of rule %q", p.peekText(), name)
		}
	}
	if !p.rules.Has("root") {
		return fmt.Errorf("grammar: no rule named root: %w", ErrSyntax)
	}
	return nil
}

func (p *gbnfParser) peekText() string {
	end := min(p.pos+10, len(p.src))
	return p.src[p.pos:end]
}

func (p *gbnfParser) alternatives(nested bool) (Expr, error) {
	var choices []Expr
	for {
		s, err := p.sequence(nested)
		if err != nil {
			return nil, err
		}
		choices = append(choices, s)
		p.space(nested)
		if p.pos < len(p.src) && p.src[p.pos] == '|' {
			p.pos++
			p.space(true)
			continue
		}
		break
	}
	if len(choices) == 1 {
		return choices[0], nil
	}
	return altExpr(choices), nil
}

func (p *gbnfParser) sequence(nested bool) (Expr, error) {
	var parts []Expr
	for {
		p.space(nested)
		if p.pos >= len(p.src) {
			break
		}
		c := p.src[p.pos]
		var e Expr
		var err error
		switch {
		case c == '"':
			e, err = p.literal()
		case c == '[':
			e, err = p.class()
		case c == '.':
			p.pos++
			e = classExpr{negated: true}
		case c == '(':
			if p.depth++; p.depth > maxNesting {
				return nil, p.errorf("parentheses nested over %d deep", maxNesting)
			}
			p.pos++
			p.space(true)
			e, err = p.alternatives(true)
			if err != nil {
				return nil, err
			}
			p.space(true)
			if p.pos >= len(p.src) || p.src[p.pos] != ')' {
				return nil, p.errorf("expected )")
			}
			p.pos++
			p.depth--
		case isNameByte(c):
			save := p.pos
			name := p.name()
			// A name followed by ::= starts the next rule.
			p.space(false)
			if strings.HasPrefix(p.src[p.pos:], "::=") {
				p.pos = save
				return Seq(parts...), p.endOfRule(parts)
			}
			p.pos = save + len(name)
			e = refExpr(name)
		default:
			return seqOf(parts), nil
		}
		if err != nil {
			return nil, err
		}
		if e, err = p.postfix(e); err != nil {
			return nil, err
		}
		parts = append(parts, e)
	}
	return seqOf(parts), nil
}

func seqOf(parts []Expr) Expr {
	if len(parts) == 1 {
		return parts[0]
	}
	return seqExpr(parts)
}

// endOfRule is reached when a sequence runs into the next rule's name,
// which is only right when a newline separated them.
func (p *gbnfParser) endOfRule([]Expr) error {
	i := p.pos - 1
	for i >= 0 && (p.src[i] == ' ' || p.src[i] == '\t' || p.src[i] == '\r') {
		i--
	}
	if i >= 0 && p.src[i] != '\n' {
		return p.errorf("a rule definition in the middle of a line")
	}
	return nil
}

func (p *gbnfParser) postfix(e Expr) (Expr, error) {
	for p.pos < len(p.src) {
		switch p.src[p.pos] {
		case '*':
			e = Star(e)
		case '+':
			e = Repeat(e, 1, -1)
		case '?':
			e = Opt(e)
		case '{':
			p.pos++
			lo, ok := p.number()
			if !ok {
				return nil, p.errorf("expected a number after {")
			}
			hi := lo
			if p.pos < len(p.src) && p.src[p.pos] == ',' {
				p.pos++
				if p.pos < len(p.src) && p.src[p.pos] == '}' {
					hi = -1
				} else if hi, ok = p.number(); !ok {
					return nil, p.errorf("expected a number or } after ,")
				}
			}
			if p.pos >= len(p.src) || p.src[p.pos] != '}' {
				return nil, p.errorf("expected }")
			}
			if lo > maxRepeat || hi > maxRepeat || (hi >= 0 && hi < lo) {
				return nil, p.errorf("repetition {%d,%d} out of range (at most %d)", lo, hi, maxRepeat)
			}
			e = Repeat(e, lo, hi)
		default:
			return e, nil
		}
		p.pos++
	}
	return e, nil
}

func (p *gbnfParser) number() (int, bool) {
	p.space(false)
	start := p.pos
	for p.pos < len(p.src) && p.src[p.pos] >= '0' && p.src[p.pos] <= '9' {
		p.pos++
	}
	if p.pos-start > 9 {
		return maxRepeat + 1, true // out of range: postfix says so
	}
	n, err := strconv.Atoi(p.src[start:p.pos])
	p.space(false)
	return n, err == nil
}

func (p *gbnfParser) literal() (Expr, error) {
	p.pos++ // "
	var sb strings.Builder
	for {
		if p.pos >= len(p.src) || p.src[p.pos] == '\n' {
			return nil, p.errorf("unterminated string")
		}
		if p.src[p.pos] == '"' {
			p.pos++
			return litExpr(sb.String()), nil
		}
		r, err := p.char()
		if err != nil {
			return nil, err
		}
		sb.WriteRune(r)
	}
}

// char reads one character of a literal or class, escapes decoded.
func (p *gbnfParser) char() (rune, error) {
	r, w := utf8.DecodeRuneInString(p.src[p.pos:])
	p.pos += w
	if r != '\\' {
		return r, nil
	}
	if p.pos >= len(p.src) {
		return 0, p.errorf("escape at the end of the grammar")
	}
	c := p.src[p.pos]
	p.pos++
	switch c {
	case 'n':
		return '\n', nil
	case 'r':
		return '\r', nil
	case 't':
		return '\t', nil
	case '\\', '"', '\'', '[', ']', '-', '^', '/':
		return rune(c), nil
	case 'x', 'u', 'U':
		n := map[byte]int{'x': 2, 'u': 4, 'U': 8}[c]
		if p.pos+n > len(p.src) {
			return 0, p.errorf("short \\%c escape", c)
		}
		v, err := strconv.ParseUint(p.src[p.pos:p.pos+n], 16, 32)
		if err != nil || v > utf8.MaxRune {
			return 0, p.errorf("bad \\%c escape %q", c, p.src[p.pos:p.pos+n])
		}
		p.pos += n
		return rune(v), nil
	}
	return 0, p.errorf("unknown escape \\%c", c)
}

func (p *gbnfParser) class() (Expr, error) {
	p.pos++ // [
	ce := classExpr{}
	if p.pos < len(p.src) && p.src[p.pos] == '^' {
		ce.negated = true
		p.pos++
	}
	for {
		if p.pos >= len(p.src) {
			return nil, p.errorf("unterminated character class")
		}
		if p.src[p.pos] == ']' {
			p.pos++
			return ce, nil
		}
		lo, err := p.char()
		if err != nil {
			return nil, err
		}
		hi := lo
		if p.pos+1 < len(p.src) && p.src[p.pos] == '-' && p.src[p.pos+1] != ']' {
			p.pos++
			if hi, err = p.char(); err != nil {
				return nil, err
			}
			if hi < lo {
				return nil, p.errorf("character range %q-%q runs backwards", lo, hi)
			}
		}
		ce.ranges = append(ce.ranges, RuneRange{lo, hi})
	}
}
