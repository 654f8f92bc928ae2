package grammar

import (
	"fmt"
	"slices"
	"sync"
	"unsafe"
)

// Limits on one Constraint's tables. A real schema reaches a few hundred
// states; an ambiguous or deeply recursive grammar could make states
// without end, and gets ErrTooComplex instead of the memory.
const (
	maxStates      = 1 << 16
	maxStateStacks = 1 << 12
	maxNodes       = 1 << 22
	maxCachedMasks = 256
	// Expansion steps one move on a byte, and one call (a mask, a token),
	// may take: a JSON grammar's moves take tens, a mask of a cold state
	// on a 151k vocabulary some hundred thousand. They also bound the
	// depth of expand's recursion.
	maxMoveWork = 1 << 16
	maxCallWork = 1 << 23
)

// State ids: dead is the state with no way on (a byte the grammar refuses).
const (
	dead    int32 = -1
	unknown int32 = -2
)

// stackNode is one frame of a parse stack: the position of the element to
// match next and the frame below (-1: none). Frames are hash-consed, so a
// stack is one id and stacks share their tails.
type stackNode struct{ pos, below int32 }

// state is a set of parse stacks, each with a terminal on top.
type state struct {
	stacks []int32 // sorted ids of the stacks' top frames
	accept bool    // some parse is complete
	trans  []int32 // byte -> next state, unknown until asked; nil until first asked
	mask   Mask    // cached, or nil
	none   bool    // the cached mask allows no token
}

// Constraint is a grammar applied to a vocabulary: the states of its parse,
// their moves on each byte and their token masks, computed as they are
// first needed and kept. It is safe for concurrent use; Matchers share it.
type Constraint struct {
	g *Grammar
	v *Vocab

	mu      sync.Mutex // guards the fields below
	nodes   []stackNode
	nodeIDs map[stackNode]int32
	states  []state
	byKey   map[string]int32
	masks   int // states holding a cached mask
	start   int32
	err     error // the first limit hit; every later call fails with it

	// scratch for one move
	moveWork int // expansion steps left in this move
	callWork int // expansion steps left in this call
	seen     map[stackNode]bool
	leaves   []int32
	isLeaf   map[int32]bool
	accepts  bool
}

// NewConstraint applies g to v.
func NewConstraint(g *Grammar, v *Vocab) (*Constraint, error) {
	c := &Constraint{g: g, v: v, nodeIDs: map[stackNode]int32{}, byKey: map[string]int32{},
		seen: map[stackNode]bool{}, isLeaf: map[int32]bool{}}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.callWork = maxCallWork
	c.begin()
	for _, a := range g.alts[g.root] {
		c.expand(a, -1)
	}
	s, err := c.finish()
	if err != nil {
		return nil, err
	}
	if s == dead {
		return nil, fmt.Errorf("grammar: rule %q: %w", g.names[g.root], ErrEmpty)
	}
	c.start = s
	return c, nil
}

func (c *Constraint) node(pos, below int32) int32 {
	k := stackNode{pos, below}
	if id, ok := c.nodeIDs[k]; ok {
		return id
	}
	if len(c.nodes) >= maxNodes && c.err == nil {
		c.err = fmt.Errorf("grammar: over %d parse frames: %w", maxNodes, ErrTooComplex)
	}
	id := int32(len(c.nodes))
	c.nodes = append(c.nodes, k)
	c.nodeIDs[k] = id
	return id
}

func (c *Constraint) begin() {
	c.moveWork = maxMoveWork
	clear(c.seen)
	clear(c.isLeaf)
	c.leaves = c.leaves[:0]
	c.accepts = false
}

// expand adds the stacks that continue from position pos (with frame below
// under it) up to their next terminal. A reference pushes the position
// after it, unless that is the end of its alternative: then the callee
// returns straight to below (so right recursion does not grow the stack).
func (c *Constraint) expand(pos, below int32) {
	if c.err != nil {
		return
	}
	if c.moveWork--; c.moveWork < 0 {
		c.err = fmt.Errorf("grammar: a step took over %d expansions (an ambiguous grammar?): %w", maxMoveWork, ErrTooComplex)
		return
	}
	if c.callWork--; c.callWork < 0 {
		c.err = fmt.Errorf("grammar: a mask took over %d expansions (an ambiguous grammar?): %w", maxCallWork, ErrTooComplex)
		return
	}
	k := stackNode{pos, below}
	if c.seen[k] {
		return
	}
	c.seen[k] = true
	switch e := c.g.elems[pos]; e.kind {
	case endElem:
		if below < 0 {
			c.accepts = true
			return
		}
		f := c.nodes[below]
		c.expand(f.pos, f.below)
	case termElem:
		id := c.node(pos, below)
		if !c.isLeaf[id] {
			c.isLeaf[id] = true
			c.leaves = append(c.leaves, id)
		}
	case refElem:
		ret := below
		if c.g.elems[pos+1].kind != endElem {
			ret = c.node(pos+1, below)
		}
		for _, a := range c.g.alts[e.arg] {
			c.expand(a, ret)
		}
	}
}

// finish interns the stacks expand gathered as a state.
func (c *Constraint) finish() (int32, error) {
	if c.err != nil {
		return dead, c.err
	}
	if len(c.leaves) == 0 && !c.accepts {
		return dead, nil
	}
	if len(c.leaves) > maxStateStacks {
		c.err = fmt.Errorf("grammar: over %d parses at once: %w", maxStateStacks, ErrTooComplex)
		return dead, c.err
	}
	slices.Sort(c.leaves)
	key := make([]byte, 1+4*len(c.leaves))
	if c.accepts {
		key[0] = 1
	}
	copy(key[1:], unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(c.leaves))), 4*len(c.leaves)))
	if id, ok := c.byKey[string(key)]; ok {
		return id, nil
	}
	if len(c.states) >= maxStates {
		c.err = fmt.Errorf("grammar: over %d parse states: %w", maxStates, ErrTooComplex)
		return dead, c.err
	}
	id := int32(len(c.states))
	c.states = append(c.states, state{stacks: slices.Clone(c.leaves), accept: c.accepts})
	c.byKey[string(key)] = id
	return id, nil
}

// move is the state after byte b from state s (dead if b is refused).
// The caller holds mu.
func (c *Constraint) move(s int32, b byte) (int32, error) {
	st := &c.states[s]
	if st.trans == nil {
		st.trans = make([]int32, 256)
		for i := range st.trans {
			st.trans[i] = unknown
		}
	}
	if t := st.trans[b]; t != unknown {
		return t, nil
	}
	c.begin()
	for _, id := range st.stacks {
		f := c.nodes[id]
		if c.g.terms[c.g.elems[f.pos].arg].has(b) {
			c.expand(f.pos+1, f.below)
		}
	}
	t, err := c.finish()
	if err != nil {
		return dead, err
	}
	c.states[s].trans[b] = t // states may have grown: index again
	return t, nil
}

// mask is the set of tokens allowed in state s.
func (c *Constraint) mask(s int32) (Mask, error) {
	if m := c.states[s].mask; m != nil {
		return m, nil
	}
	c.callWork = maxCallWork
	v := c.v
	m := newMask(v.size)
	if c.states[s].accept {
		for _, id := range v.eog {
			m.set(id)
		}
	}
	at := make([]int32, v.maxDepth+1) // state after the first d bytes of the current prefix
	at[0] = s
	for i := 0; i < len(v.trie); {
		n := &v.trie[i]
		from := at[n.depth-1]
		t := unknown
		if tr := c.states[from].trans; tr != nil {
			t = tr[n.b]
		}
		if t == unknown {
			var err error
			if t, err = c.move(from, n.b); err != nil {
				return nil, err
			}
		}
		if t == dead {
			i = int(n.next)
			continue
		}
		at[n.depth] = t
		for _, id := range v.ids[n.tokLo:n.tokHi] {
			m.set(id)
		}
		i++
	}
	if c.masks >= maxCachedMasks {
		for i := range c.states {
			c.states[i].mask = nil
		}
		c.masks = 0
	}
	c.states[s].mask = m
	c.states[s].none = m.Count() == 0
	c.masks++
	return m, nil
}

// Grammar is the grammar the constraint applies.
func (c *Constraint) Grammar() *Grammar { return c.g }

// Vocab is the vocabulary the constraint applies to.
func (c *Constraint) Vocab() *Vocab { return c.v }
