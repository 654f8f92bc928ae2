package cpu

import (
	"math/rand/v2"
	"sync/atomic"
	"testing"
)

// countTask records how often each item ran and on which worker.
type countTask struct {
	hits    []atomic.Int32
	workers int
	bad     atomic.Bool
}

func (c *countTask) run(w, lo, hi int) {
	if w < 0 || w >= c.workers || lo < 0 || hi > len(c.hits) || lo >= hi {
		c.bad.Store(true)
		return
	}
	for i := lo; i < hi; i++ {
		c.hits[i].Add(1)
	}
}

// TestPoolRunsEveryItemOnce drives many short loops back to back (as decode
// does), so helpers that wake late or keep polling meet later loops.
func TestPoolRunsEveryItemOnce(t *testing.T) {
	for _, size := range []int{1, 2, 3, 8} {
		p := newPool(size)
		rng := rand.New(rand.NewPCG(1, uint64(size)))
		for range 3000 {
			n := 1 + rng.IntN(300)
			c := &countTask{hits: make([]atomic.Int32, n), workers: size}
			p.parallel(c, n, 1+rng.IntN(20))
			if c.bad.Load() {
				t.Fatalf("size %d: a chunk outside [0, %d) or a bad worker index", size, n)
			}
			for i := range c.hits {
				if h := c.hits[i].Load(); h != 1 {
					t.Fatalf("size %d: item %d of %d ran %d times", size, i, n, h)
				}
			}
		}
		p.close()
	}
}
