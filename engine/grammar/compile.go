package grammar

import (
	"fmt"
	"strings"
)

// Grammar is a compiled grammar: rules whose alternatives are sequences of
// elements, each a set of bytes or a reference to a rule. It is immutable
// and safe for concurrent use.
type Grammar struct {
	elems []elem    // every alternative's elements, each run closed by an end element
	alts  [][]int32 // rule -> the positions (indexes into elems) where its alternatives start
	terms []byteSet
	names []string // rule -> name, for errors
	root  int32
}

type elemKind uint8

const (
	endElem  elemKind = iota // the end of an alternative
	termElem                 // one byte out of terms[arg]
	refElem                  // rule arg
)

type elem struct {
	kind elemKind
	arg  int32
}

// byteSet is a set of byte values, one bit each.
type byteSet [4]uint64

func (s *byteSet) has(b byte) bool { return s[b>>6]&(1<<(b&63)) != 0 }
func (s *byteSet) add(lo, hi byte) {
	for b := int(lo); b <= int(hi); b++ {
		s[b>>6] |= 1 << (b & 63)
	}
}
func (s *byteSet) empty() bool { return s[0]|s[1]|s[2]|s[3] == 0 }

// Limits on what one grammar may compile to: a repetition count and the
// elements in all; past them a grammar (a client's, say) is refused
// rather than allowed to take the memory.
const (
	maxRepeat = 10_000
	maxElems  = 1 << 20
)

// Compile checks the rules and compiles them with root as the start rule.
// Undefined and left-recursive rules are errors (ErrInvalid); so is a root
// that no text satisfies (ErrEmpty). Alternatives that can never complete
// are dropped, so every state a Matcher reaches can still be completed.
func (r *Rules) Compile(root string) (*Grammar, error) {
	c := &compiler{r: r, index: map[string]int32{}, termIdx: map[byteSet]int32{}, classes: map[string]elem{}}
	if !r.Has(root) {
		return nil, fmt.Errorf("grammar: no rule %q: %w", root, ErrInvalid)
	}
	for _, name := range r.order {
		c.index[name] = c.newRule(name)
	}
	for _, name := range r.order {
		c.setAlts(c.index[name], c.lowerAlts(r.defs[name], name))
		if c.err != nil {
			return nil, c.err
		}
	}
	g := &Grammar{elems: c.elems, alts: c.alts, terms: c.terms, names: c.names, root: c.index[root]}
	if err := g.check(); err != nil {
		return nil, err
	}
	return g, nil
}

type compiler struct {
	r       *Rules
	index   map[string]int32
	elems   []elem
	alts    [][]int32
	names   []string
	terms   []byteSet
	termIdx map[byteSet]int32
	classes map[string]elem
	err     error
}

func (c *compiler) fail(format string, args ...any) {
	if c.err == nil {
		c.err = fmt.Errorf("grammar: "+format, args...)
	}
}

func (c *compiler) newRule(name string) int32 {
	c.names = append(c.names, name)
	c.alts = append(c.alts, nil)
	return int32(len(c.names) - 1)
}

func (c *compiler) setAlts(rule int32, alts [][]elem) {
	for _, a := range alts {
		if len(c.elems)+len(a)+1 > maxElems {
			c.fail("over %d elements: %w", maxElems, ErrInvalid)
			return
		}
		c.alts[rule] = append(c.alts[rule], int32(len(c.elems)))
		c.elems = append(c.elems, a...)
		c.elems = append(c.elems, elem{kind: endElem})
	}
}

func (c *compiler) term(s byteSet) elem {
	i, ok := c.termIdx[s]
	if !ok {
		i = int32(len(c.terms))
		c.terms = append(c.terms, s)
		c.termIdx[s] = i
	}
	return elem{kind: termElem, arg: i}
}

// synth makes a rule for a nested expression, named after the rule it is in.
func (c *compiler) synth(owner string, alts [][]elem) elem {
	r := c.newRule(owner)
	c.setAlts(r, alts)
	return elem{kind: refElem, arg: r}
}

func (c *compiler) lowerAlts(e Expr, owner string) [][]elem {
	if a, ok := e.(altExpr); ok {
		out := make([][]elem, 0, len(a))
		for _, choice := range a {
			out = append(out, c.lowerSeq(choice, owner, nil))
		}
		return out
	}
	return [][]elem{c.lowerSeq(e, owner, nil)}
}

func (c *compiler) lowerSeq(e Expr, owner string, out []elem) []elem {
	if c.err != nil {
		return out
	}
	switch e := e.(type) {
	case seqExpr:
		for _, p := range e {
			out = c.lowerSeq(p, owner, out)
		}
	case litExpr:
		for i := 0; i < len(e); i++ {
			var s byteSet
			s.add(e[i], e[i])
			out = append(out, c.term(s))
		}
	case refExpr:
		i, ok := c.index[string(e)]
		if !ok {
			c.fail("rule %q refers to %q, which is not defined: %w", owner, string(e), ErrInvalid)
			return out
		}
		out = append(out, elem{kind: refElem, arg: i})
	case classExpr:
		out = append(out, c.class(e, owner))
	case altExpr:
		out = append(out, c.synth(owner, c.lowerAlts(e, owner)))
	case repExpr:
		out = c.repeat(e, owner, out)
	case nil:
		c.fail("rule %q holds a nil expression: %w", owner, ErrInvalid)
	default:
		c.fail("rule %q: unknown expression %T: %w", owner, e, ErrInvalid)
	}
	return out
}

func (c *compiler) repeat(e repExpr, owner string, out []elem) []elem {
	if e.min < 0 || (e.max >= 0 && e.max < e.min) || e.min > maxRepeat || e.max > maxRepeat {
		c.fail("rule %q: repetition {%d,%d} is out of range (at most %d): %w", owner, e.min, e.max, maxRepeat, ErrInvalid)
		return out
	}
	body := c.lowerSeq(e.e, owner, nil)
	var one elem
	if len(body) == 1 {
		one = body[0]
	} else {
		one = c.synth(owner, [][]elem{body})
	}
	for range e.min {
		out = append(out, one)
	}
	switch {
	case e.max < 0:
		star := c.newRule(owner)
		c.setAlts(star, [][]elem{{one, {kind: refElem, arg: star}}, {}})
		out = append(out, elem{kind: refElem, arg: star})
	case e.max > e.min:
		// x{0,n} as x (x (x ...)?)?)?: one nested rule per optional copy,
		// so the parse keeps one stack per copy count, not one per subset.
		var inner []elem
		for range e.max - e.min {
			r := c.newRule(owner)
			c.setAlts(r, [][]elem{append([]elem{one}, inner...), {}})
			inner = []elem{{kind: refElem, arg: r}}
		}
		out = append(out, inner...)
	}
	return out
}

// class lowers a character class to UTF-8: one byte set for its one-byte
// characters and a sequence of byte sets per block of longer ones.
func (c *compiler) class(e classExpr, owner string) elem {
	rs := validRanges(e.ranges, e.negated)
	var key strings.Builder
	for _, r := range rs {
		fmt.Fprintf(&key, "%x-%x,", r.Lo, r.Hi)
	}
	if el, ok := c.classes[key.String()]; ok {
		return el
	}
	var seqs [][]byteRange
	for _, r := range rs {
		seqs = utf8Sequences(seqs, r.Lo, r.Hi)
	}
	var single byteSet
	var alts [][]elem
	for _, s := range seqs {
		if len(s) == 1 {
			single.add(s[0].lo, s[0].hi)
			continue
		}
		a := make([]elem, len(s))
		for i, br := range s {
			var bs byteSet
			bs.add(br.lo, br.hi)
			a[i] = c.term(bs)
		}
		alts = append(alts, a)
	}
	var el elem
	if len(alts) == 0 {
		el = c.term(single) // possibly empty: then it never matches
	} else {
		if !single.empty() {
			alts = append([][]elem{{c.term(single)}}, alts...)
		}
		el = c.synth(owner, alts)
	}
	c.classes[key.String()] = el
	return el
}

// check drops the alternatives that can never complete, refuses a root
// that cannot, and refuses left recursion (the matcher's expansion of it
// would not end).
func (g *Grammar) check() error {
	productive := make([]bool, len(g.alts))
	altOK := func(start int32) bool {
		for p := start; ; p++ {
			switch e := g.elems[p]; e.kind {
			case endElem:
				return true
			case termElem:
				if g.terms[e.arg].empty() {
					return false
				}
			case refElem:
				if !productive[e.arg] {
					return false
				}
			}
		}
	}
	for changed := true; changed; {
		changed = false
		for r, alts := range g.alts {
			if productive[r] {
				continue
			}
			for _, a := range alts {
				if altOK(a) {
					productive[r], changed = true, true
					break
				}
			}
		}
	}
	if !productive[g.root] {
		return fmt.Errorf("grammar: rule %q: %w", g.names[g.root], ErrEmpty)
	}
	for r, alts := range g.alts {
		kept := alts[:0]
		for _, a := range alts {
			if altOK(a) {
				kept = append(kept, a)
			}
		}
		g.alts[r] = kept
	}

	nullable := make([]bool, len(g.alts))
	for changed := true; changed; {
		changed = false
		for r, alts := range g.alts {
			if nullable[r] {
				continue
			}
		alt:
			for _, a := range alts {
				for p := a; ; p++ {
					e := g.elems[p]
					if e.kind == termElem || (e.kind == refElem && !nullable[e.arg]) {
						continue alt
					}
					if e.kind == endElem {
						break
					}
				}
				nullable[r], changed = true, true
				break
			}
		}
	}
	// Left recursion: a rule that can begin with itself, through rules
	// that may match nothing before it.
	const (
		unseen = iota
		open
		closed
	)
	mark := make([]uint8, len(g.alts))
	var visit func(r int32) error
	visit = func(r int32) error {
		switch mark[r] {
		case open:
			return fmt.Errorf("grammar: rule %q is left-recursive (it can begin with itself, or repeats something that can be empty): %w", g.names[r], ErrInvalid)
		case closed:
			return nil
		}
		mark[r] = open
		for _, a := range g.alts[r] {
			for p := a; g.elems[p].kind == refElem; p++ {
				if err := visit(g.elems[p].arg); err != nil {
					return err
				}
				if !nullable[g.elems[p].arg] {
					break
				}
			}
		}
		mark[r] = closed
		return nil
	}
	for r := range g.alts {
		if err := visit(int32(r)); err != nil {
			return err
		}
	}
	return nil
}
