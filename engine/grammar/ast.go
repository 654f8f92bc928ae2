package grammar

import (
	"errors"
	"fmt"
	"slices"
	"unicode/utf8"
)

// Errors callers can test for; messages add the detail.
var (
	// ErrSyntax marks a GBNF text that does not parse.
	ErrSyntax = errors.New("grammar syntax error")
	// ErrInvalid marks rules that cannot be compiled (an undefined or
	// left-recursive rule, a repetition too large).
	ErrInvalid = errors.New("invalid grammar")
	// ErrEmpty marks a grammar, or a schema, that no text satisfies.
	ErrEmpty = errors.New("the grammar allows nothing")
	// ErrUnsupported marks a JSON schema keyword the grammar cannot express.
	ErrUnsupported = errors.New("unsupported schema keyword")
	// ErrSchema marks a JSON schema that is not valid.
	ErrSchema = errors.New("invalid JSON schema")
	// ErrTooComplex marks a grammar whose parse states grow past the
	// matcher's limits (an ambiguous grammar can make exponentially many).
	ErrTooComplex = errors.New("grammar too complex")
	// ErrRejected marks a token the grammar does not allow at that point.
	ErrRejected = errors.New("token not allowed by the grammar")
)

// Expr is a grammar expression: a literal, a character class, a rule
// reference, or a sequence, choice or repetition of expressions.
type Expr interface{ isExpr() }

type (
	seqExpr []Expr
	altExpr []Expr
	litExpr string // UTF-8 bytes, matched exactly
	refExpr string
	repExpr struct {
		e        Expr
		min, max int // max < 0: unbounded
	}
	classExpr struct {
		ranges  []RuneRange
		negated bool
	}
)

func (seqExpr) isExpr()   {}
func (altExpr) isExpr()   {}
func (litExpr) isExpr()   {}
func (refExpr) isExpr()   {}
func (repExpr) isExpr()   {}
func (classExpr) isExpr() {}

// RuneRange is a closed range of code points.
type RuneRange struct{ Lo, Hi rune }

// Seq matches its parts one after another; no parts match the empty text.
func Seq(parts ...Expr) Expr {
	if len(parts) == 1 {
		return parts[0]
	}
	return seqExpr(parts)
}

// Alt matches any one of its choices; no choices match nothing at all.
func Alt(choices ...Expr) Expr {
	if len(choices) == 1 {
		return choices[0]
	}
	return altExpr(choices)
}

// Lit matches s exactly.
func Lit(s string) Expr { return litExpr(s) }

// Ref matches the rule named name.
func Ref(name string) Expr { return refExpr(name) }

// Class matches one character in (or, negated, not in) the ranges.
func Class(negated bool, ranges ...RuneRange) Expr {
	return classExpr{ranges: slices.Clone(ranges), negated: negated}
}

// Repeat matches e at least min and at most max times (max < 0: no bound).
func Repeat(e Expr, min, max int) Expr { return repExpr{e: e, min: min, max: max} }

// Opt matches e or nothing.
func Opt(e Expr) Expr { return Repeat(e, 0, 1) }

// Star matches e any number of times.
func Star(e Expr) Expr { return Repeat(e, 0, -1) }

// Rules is a set of named rules being built; Compile turns it into a
// Grammar. The zero value is empty and ready to use.
type Rules struct {
	defs  map[string]Expr
	order []string
	fresh int // counter for Fresh names
}

// Define adds a rule; defining a name twice is an error.
func (r *Rules) Define(name string, e Expr) error {
	if name == "" {
		return fmt.Errorf("grammar: a rule with no name: %w", ErrInvalid)
	}
	if r.defs == nil {
		r.defs = map[string]Expr{}
	}
	if _, dup := r.defs[name]; dup {
		return fmt.Errorf("grammar: rule %q defined twice: %w", name, ErrInvalid)
	}
	r.defs[name] = e
	r.order = append(r.order, name)
	return nil
}

// Has reports whether name is defined.
func (r *Rules) Has(name string) bool {
	_, ok := r.defs[name]
	return ok
}

// Fresh returns a rule name starting with prefix that is not defined yet.
func (r *Rules) Fresh(prefix string) string {
	for {
		r.fresh++
		name := fmt.Sprintf("%s-%d", prefix, r.fresh)
		if !r.Has(name) {
			return name
		}
	}
}

// validRanges normalizes character ranges: sorted, merged, within Unicode,
// surrogates removed (UTF-8 cannot hold them).
func validRanges(in []RuneRange, negated bool) []RuneRange {
	rs := make([]RuneRange, 0, len(in))
	for _, r := range in {
		lo, hi := max(r.Lo, 0), min(r.Hi, utf8.MaxRune)
		if lo <= hi {
			rs = append(rs, RuneRange{lo, hi})
		}
	}
	slices.SortFunc(rs, func(a, b RuneRange) int { return int(a.Lo - b.Lo) })
	merged := rs[:0]
	for _, r := range rs {
		if n := len(merged); n > 0 && r.Lo <= merged[n-1].Hi+1 {
			merged[n-1].Hi = max(merged[n-1].Hi, r.Hi)
			continue
		}
		merged = append(merged, r)
	}
	if negated {
		var inv []RuneRange
		next := rune(0)
		for _, r := range merged {
			if r.Lo > next {
				inv = append(inv, RuneRange{next, r.Lo - 1})
			}
			next = r.Hi + 1
		}
		if next <= utf8.MaxRune {
			inv = append(inv, RuneRange{next, utf8.MaxRune})
		}
		merged = inv
	}
	const surLo, surHi = 0xD800, 0xDFFF
	out := make([]RuneRange, 0, len(merged)+1)
	for _, r := range merged {
		if r.Hi < surLo || r.Lo > surHi {
			out = append(out, r)
			continue
		}
		if r.Lo < surLo {
			out = append(out, RuneRange{r.Lo, surLo - 1})
		}
		if r.Hi > surHi {
			out = append(out, RuneRange{surHi + 1, r.Hi})
		}
	}
	return out
}
