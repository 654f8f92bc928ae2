package cpu

import (
	"container/heap"
	"sort"

	"github.com/tandem-run/tandem/kernels"
)

// argmax finds each row's largest value.
type argmax struct{ dst, x view }

func (b *Backend) newArgmax(o kernels.Argmax) (*argmax, error) {
	dst, err := b.writable(o.Dst)
	if err != nil {
		return nil, err
	}
	x, err := b.rows(o.X)
	if err != nil {
		return nil, err
	}
	return &argmax{dst: dst, x: x}, nil
}

func (s *argmax) exec(p *pool) error {
	p.parallel(s, s.x.rows, p.grainFor(s.x.rows, rowGrain(s.x.cols)))
	return nil
}

func (s *argmax) run(_, lo, hi int) {
	out := s.dst.i32(0)
	for r := lo; r < hi; r++ {
		out[r] = int32(argmaxF32(s.x.f32(r)))
	}
}

// argmaxF32 is the index of the largest value, the first on ties.
func argmaxF32(x []float32) int {
	best := 0
	for i, v := range x {
		if v > x[best] {
			best = i
		}
	}
	return best
}

// topK finds each row's K largest values, best first.
type topK struct {
	ids, vals, x view
	heaps        []candidates // per worker
}

func (b *Backend) newTopK(o kernels.TopK) (*topK, error) {
	ids, err := b.writable(o.Ids)
	if err != nil {
		return nil, err
	}
	vals, err := b.writable(o.Vals)
	if err != nil {
		return nil, err
	}
	x, err := b.rows(o.X)
	if err != nil {
		return nil, err
	}
	s := &topK{ids: ids, vals: vals, x: x, heaps: make([]candidates, b.pool.size)}
	for w := range s.heaps {
		s.heaps[w] = make(candidates, 0, ids.cols)
	}
	return s, nil
}

func (s *topK) exec(p *pool) error {
	p.parallel(s, s.x.rows, 1)
	return nil
}

func (s *topK) run(w, lo, hi int) {
	k := s.ids.cols
	for r := lo; r < hi; r++ {
		h := s.heaps[w][:0]
		for i, v := range s.x.f32(r) {
			c := candidate{int32(i), v}
			if len(h) < k {
				h = append(h, c)
				if len(h) == k {
					heap.Init(&h)
				}
			} else if c.beats(h[0]) {
				h[0] = c
				heap.Fix(&h, 0)
			}
		}
		sort.Slice(h, func(i, j int) bool { return h[i].beats(h[j]) })
		ids, vals := s.ids.i32(r), s.vals.f32(r)
		for i, c := range h {
			ids[i], vals[i] = c.id, c.val
		}
		s.heaps[w] = h
	}
}

type candidate struct {
	id  int32
	val float32
}

// beats orders by value, then by lower index.
func (c candidate) beats(o candidate) bool {
	return c.val > o.val || c.val == o.val && c.id < o.id
}

// candidates is a min-heap: the weakest kept candidate is at the root.
type candidates []candidate

func (h candidates) Len() int           { return len(h) }
func (h candidates) Less(i, j int) bool { return h[j].beats(h[i]) }
func (h candidates) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *candidates) Push(x any)        { *h = append(*h, x.(candidate)) }
func (h *candidates) Pop() any {
	old := *h
	c := old[len(old)-1]
	*h = old[:len(old)-1]
	return c
}
