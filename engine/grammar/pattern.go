package grammar

import (
	"fmt"
	"regexp/syntax"
	"unicode"
)

// patternExpr is the grammar of the JSON string bodies (between the
// quotes) whose decoded text matches a schema's pattern. Patterns search:
// without ^ or $ the text may go on before or after the match. Each
// character is written raw, or escaped where JSON requires.
func patternExpr(pattern string) (Expr, error) {
	re, err := syntax.Parse(pattern, syntax.Perl)
	if err != nil {
		return nil, err
	}
	re = re.Simplify()
	var subs []*syntax.Regexp
	if re.Op == syntax.OpConcat {
		subs = re.Sub
	} else {
		subs = []*syntax.Regexp{re}
	}
	anyText := Star(jsonChars([]RuneRange{{0, unicode.MaxRune}}))
	var parts []Expr
	if len(subs) > 0 && (subs[0].Op == syntax.OpBeginText || subs[0].Op == syntax.OpBeginLine) {
		subs = subs[1:]
	} else {
		parts = append(parts, anyText)
	}
	end := anyText
	if n := len(subs); n > 0 && (subs[n-1].Op == syntax.OpEndText || subs[n-1].Op == syntax.OpEndLine) {
		subs, end = subs[:n-1], nil
	}
	for _, s := range subs {
		e, err := regexExpr(s)
		if err != nil {
			return nil, err
		}
		parts = append(parts, e)
	}
	if end != nil {
		parts = append(parts, end)
	}
	return Seq(parts...), nil
}

func regexExpr(re *syntax.Regexp) (Expr, error) {
	switch re.Op {
	case syntax.OpEmptyMatch:
		return Seq(), nil
	case syntax.OpNoMatch:
		return nothing(), nil
	case syntax.OpLiteral:
		parts := make([]Expr, len(re.Rune))
		for i, r := range re.Rune {
			rs := []RuneRange{{r, r}}
			if re.Flags&syntax.FoldCase != 0 {
				for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
					rs = append(rs, RuneRange{f, f})
				}
			}
			parts[i] = jsonChars(rs)
		}
		return Seq(parts...), nil
	case syntax.OpCharClass:
		rs := make([]RuneRange, 0, len(re.Rune)/2)
		for i := 0; i+1 < len(re.Rune); i += 2 {
			rs = append(rs, RuneRange{re.Rune[i], re.Rune[i+1]})
		}
		return jsonChars(rs), nil
	case syntax.OpAnyCharNotNL:
		return jsonChars([]RuneRange{{0, '\n' - 1}, {'\n' + 1, unicode.MaxRune}}), nil
	case syntax.OpAnyChar:
		return jsonChars([]RuneRange{{0, unicode.MaxRune}}), nil
	case syntax.OpCapture:
		return regexExpr(re.Sub[0])
	case syntax.OpConcat, syntax.OpAlternate:
		parts := make([]Expr, len(re.Sub))
		for i, s := range re.Sub {
			e, err := regexExpr(s)
			if err != nil {
				return nil, err
			}
			parts[i] = e
		}
		if re.Op == syntax.OpConcat {
			return seqExpr(parts), nil
		}
		return altExpr(parts), nil
	case syntax.OpStar, syntax.OpPlus, syntax.OpQuest, syntax.OpRepeat:
		e, err := regexExpr(re.Sub[0])
		if err != nil {
			return nil, err
		}
		switch re.Op {
		case syntax.OpStar:
			return Star(e), nil
		case syntax.OpPlus:
			return Repeat(e, 1, -1), nil
		case syntax.OpQuest:
			return Opt(e), nil
		}
		if re.Min > maxRepeat || re.Max > maxRepeat {
			return nil, fmt.Errorf("repetition {%d,%d} over %d", re.Min, re.Max, maxRepeat)
		}
		return Repeat(e, re.Min, re.Max), nil
	}
	return nil, fmt.Errorf("%s is not supported inside a pattern", re.Op)
}

// jsonChars matches one character out of rs as JSON writes it in a
// string: raw, or as its short escape (\" \\ \n ...), or \u00XX for other
// control characters.
func jsonChars(rs []RuneRange) Expr {
	rs = validRanges(rs, false)
	var raw []RuneRange
	var escapes []Expr
	short := map[rune]string{'"': `\"`, '\\': `\\`, '\b': `\b`, '\f': `\f`, '\n': `\n`, '\r': `\r`, '\t': `\t`}
	for _, r := range rs {
		lo := r.Lo
		for c := r.Lo; c <= r.Hi && c < 0x80; c++ {
			if c >= 0x20 && c != '"' && c != '\\' {
				continue
			}
			if lo < c {
				raw = append(raw, RuneRange{lo, c - 1})
			}
			lo = c + 1
			if s, ok := short[c]; ok {
				escapes = append(escapes, Lit(s))
			} else {
				escapes = append(escapes, Lit(fmt.Sprintf(`\u%04x`, c)))
			}
		}
		if lo <= r.Hi {
			raw = append(raw, RuneRange{lo, r.Hi})
		}
	}
	var alts []Expr
	if len(raw) > 0 {
		alts = append(alts, Class(false, raw...))
	}
	return Alt(append(alts, escapes...)...)
}
