package grammar

import (
	"container/list"
	"sync"
)

// Cache keeps constraints by a key naming their grammar (a schema's text,
// a GBNF text), so that requests repeating a schema, as clients do, share
// its parse states and masks: the first request computes each mask (a
// trie walk, about a millisecond on a 151k vocabulary), later ones look
// it up (about a microsecond). It is safe for concurrent use.
type Cache struct {
	v   *Vocab
	max int

	mu    sync.Mutex
	order *list.List // of *cacheEntry, most recently used first
	byKey map[string]*list.Element
}

type cacheEntry struct {
	key string
	c   *Constraint
}

// NewCache keeps up to size constraints over v, dropping the least
// recently used.
func NewCache(v *Vocab, size int) *Cache {
	return &Cache{v: v, max: max(size, 1), order: list.New(), byKey: map[string]*list.Element{}}
}

// Get returns the constraint kept under key, or compiles one with build
// and keeps it. Build errors are returned and not kept.
func (c *Cache) Get(key string, build func() (*Grammar, error)) (*Constraint, error) {
	c.mu.Lock()
	if e, ok := c.byKey[key]; ok {
		c.order.MoveToFront(e)
		c.mu.Unlock()
		return e.Value.(*cacheEntry).c, nil
	}
	c.mu.Unlock()
	// Compile outside the lock: two requests may both build the same
	// grammar at first; the second's result is dropped.
	g, err := build()
	if err != nil {
		return nil, err
	}
	con, err := NewConstraint(g, c.v)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.byKey[key]; ok {
		c.order.MoveToFront(e)
		return e.Value.(*cacheEntry).c, nil
	}
	c.byKey[key] = c.order.PushFront(&cacheEntry{key, con})
	for c.order.Len() > c.max {
		last := c.order.Back()
		c.order.Remove(last)
		delete(c.byKey, last.Value.(*cacheEntry).key)
	}
	return con, nil
}
