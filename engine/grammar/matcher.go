package grammar

import "fmt"

// Matcher follows one sequence's output through a Constraint. It is not
// safe for concurrent use; each sequence has its own (Fork copies one).
type Matcher struct {
	c       *Constraint
	history []int32 // state before each accepted token, for Rollback
	cur     int32
	ended   bool // an end-of-generation token was accepted
}

// NewMatcher starts matching at the beginning of the output.
func (c *Constraint) NewMatcher() *Matcher {
	return &Matcher{c: c, cur: c.start}
}

// Fork returns an independent copy of m at the same point (for drafting
// ahead without moving m).
func (m *Matcher) Fork() *Matcher {
	f := *m
	f.history = nil
	return &f
}

// Mask is the set of tokens allowed next. It is shared and read-only. With
// no token allowed (only possible when the vocabulary cannot spell what
// the grammar needs) it is an error wrapping ErrEmpty.
func (m *Matcher) Mask() (Mask, error) {
	if m.ended {
		return nil, fmt.Errorf("grammar: a mask asked for after the end of generation: %w", ErrRejected)
	}
	m.c.mu.Lock()
	defer m.c.mu.Unlock()
	if m.c.err != nil {
		return nil, m.c.err
	}
	mask, err := m.c.mask(m.cur)
	if err != nil {
		return nil, err
	}
	if m.c.states[m.cur].none {
		return nil, fmt.Errorf("grammar: no token of the vocabulary continues the output: %w", ErrEmpty)
	}
	return mask, nil
}

// next is the state after token id, or dead.
func (m *Matcher) next(id int32) (int32, error) {
	c := m.c
	if id < 0 || int(id) >= c.v.size {
		return dead, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return dead, c.err
	}
	if s := c.states[m.cur].mask; s != nil && !s.Has(id) {
		return dead, nil
	}
	c.callWork = maxCallWork
	s := m.cur
	for _, b := range c.v.pieces[id] {
		var err error
		if s, err = c.move(s, b); err != nil || s == dead {
			return dead, err
		}
	}
	if len(c.v.pieces[id]) == 0 {
		return dead, nil
	}
	return s, nil
}

// Allowed reports whether token id may come next.
func (m *Matcher) Allowed(id int32) bool {
	if m.ended {
		return false
	}
	if m.isEOG(id) {
		return m.Accepting()
	}
	s, err := m.next(id)
	return err == nil && s != dead
}

func (m *Matcher) isEOG(id int32) bool {
	for _, e := range m.c.v.eog {
		if e == id {
			return true
		}
	}
	return false
}

// Advance accepts token id. A token the grammar does not allow is an error
// wrapping ErrRejected, and m is unchanged.
func (m *Matcher) Advance(id int32) error {
	if m.ended {
		return fmt.Errorf("grammar: token %d after the end: %w", id, ErrRejected)
	}
	if m.isEOG(id) {
		if !m.Accepting() {
			return fmt.Errorf("grammar: end of generation before the output is complete: %w", ErrRejected)
		}
		m.history = append(m.history, m.cur)
		m.ended = true
		return nil
	}
	s, err := m.next(id)
	if err != nil {
		return err
	}
	if s == dead {
		return fmt.Errorf("grammar: token %d (%q): %w", id, m.c.v.pieces[id], ErrRejected)
	}
	m.history = append(m.history, m.cur)
	m.cur = s
	return nil
}

// Rollback undoes the last n accepted tokens (speculative tokens the target
// rejected). It cannot go back past a Fork or the start.
func (m *Matcher) Rollback(n int) error {
	if n < 0 || n > len(m.history) {
		return fmt.Errorf("grammar: rollback of %d tokens, %d accepted", n, len(m.history))
	}
	if n == 0 {
		return nil
	}
	m.cur = m.history[len(m.history)-n]
	m.history = m.history[:len(m.history)-n]
	m.ended = false
	return nil
}

// Accepting reports whether the output so far is complete: an
// end-of-generation token may come next.
func (m *Matcher) Accepting() bool {
	if m.ended {
		return true
	}
	m.c.mu.Lock()
	defer m.c.mu.Unlock()
	return m.c.states[m.cur].accept
}

// Done reports whether nothing but the end may come: the output is complete
// and the grammar allows no more text (or the end was accepted). The
// engine then stops without asking the model.
func (m *Matcher) Done() bool {
	if m.ended {
		return true
	}
	m.c.mu.Lock()
	defer m.c.mu.Unlock()
	st := &m.c.states[m.cur]
	return st.accept && len(st.stacks) == 0
}

// Ended reports whether an end-of-generation token was accepted.
func (m *Matcher) Ended() bool { return m.ended }
