package cpu

import (
	"sync"
	"sync/atomic"
)

// task is work split into items [0, n); run does items [lo, hi) on worker w
// (0 <= w < pool.size), which indexes per-worker scratch.
type task interface {
	run(w, lo, hi int)
}

// pool is a fixed set of worker goroutines that share one parallel loop at a
// time. The caller takes part as worker 0, so a one-thread pool runs inline.
// Work is handed out in chunks through an atomic counter, so a worker slowed
// by a noisy neighbour simply takes fewer chunks.
//
// One pool is driven by one goroutine at a time (its backend's user).
type pool struct {
	size  int
	start []chan struct{} // one per helper goroutine (workers 1..size-1)
	done  chan struct{}
	wg    sync.WaitGroup

	// the loop in flight
	t     task
	n     int
	grain int
	next  atomic.Int64
}

func newPool(size int) *pool {
	if size < 1 {
		size = 1
	}
	p := &pool{size: size, done: make(chan struct{}, size)}
	for w := 1; w < size; w++ {
		c := make(chan struct{}, 1)
		p.start = append(p.start, c)
		p.wg.Add(1)
		go p.worker(w, c)
	}
	return p
}

func (p *pool) worker(w int, start <-chan struct{}) {
	defer p.wg.Done()
	for range start {
		p.drain(w)
		p.done <- struct{}{}
	}
}

// drain takes chunks of the current loop until none are left.
func (p *pool) drain(w int) {
	for {
		lo := int(p.next.Add(int64(p.grain))) - p.grain
		if lo >= p.n {
			return
		}
		p.t.run(w, lo, min(lo+p.grain, p.n))
	}
}

// parallel runs t over items [0, n) in chunks of grain items and returns
// when all are done. Loops too small to share run on the caller alone.
func (p *pool) parallel(t task, n, grain int) {
	if n <= 0 {
		return
	}
	grain = max(grain, 1)
	if p.size == 1 || n <= grain {
		t.run(0, 0, n)
		return
	}
	helpers := min(p.size-1, (n+grain-1)/grain-1)
	p.t, p.n, p.grain = t, n, grain
	p.next.Store(0)
	for _, c := range p.start[:helpers] {
		c <- struct{}{}
	}
	p.drain(0)
	for range helpers {
		<-p.done
	}
	p.t = nil
}

// grainFor splits n items into about four chunks per worker, at least least
// items each, so the atomic counter balances load without much traffic.
func (p *pool) grainFor(n, least int) int {
	return max(n/(4*p.size), least)
}

// close stops the helper goroutines.
func (p *pool) close() {
	for _, c := range p.start {
		close(c)
	}
	p.start = nil
	p.wg.Wait()
}
