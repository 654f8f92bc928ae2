package cpu

import (
	"runtime"
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
//
// Work is handed out in chunks through one atomic word holding the loop's
// number (epoch) and its next free item, and the caller waits for items
// done, not for helpers to check in. That matters on a busy machine: a
// helper the OS has not scheduled yet simply finds no chunk left when it
// wakes, and the caller — which took the chunks itself — never waits for
// it. Only a chunk a helper has actually claimed is waited for.
//
// One pool is driven by one goroutine at a time (its backend's user).
type pool struct {
	size  int
	wake  []chan struct{} // one per helper goroutine (workers 1..size-1)
	wg    sync.WaitGroup
	state atomic.Uint64 // epoch<<32 | next item of the current loop
	loops [2]loop       // the current loop is loops[epoch%2]
}

// loop is one parallel loop's parameters and progress. Its fields are set
// before its epoch is published and read only by workers holding a claim,
// so they cannot change under a worker: the next loop using this slot
// starts only after every claimed item is done.
type loop struct {
	t     task
	n     atomic.Int64 // atomic only because a worker may peek at a slot
	grain atomic.Int64 // the caller is refilling; its claim then fails
	done  atomic.Int64 // items finished
}

// helperSpin is how many times an idle helper polls for the next loop
// before it sleeps (a poll is an atomic load, a few nanoseconds: some tens
// of microseconds in all); decode runs a few dozen short loops per token
// with a few microseconds of single-threaded work between them, and
// catching the next one without a wake-up saves microseconds each time.
// Polls yield to the Go scheduler only every yieldEvery, since a yield
// takes the scheduler's lock, which the other workers contend for.
const (
	helperSpin = 1 << 14
	yieldEvery = 256
)

func newPool(size int) *pool {
	if size < 1 {
		size = 1
	}
	p := &pool{size: size}
	for w := 1; w < size; w++ {
		c := make(chan struct{}, 1)
		p.wake = append(p.wake, c)
		p.wg.Add(1)
		go p.helper(w, c)
	}
	return p
}

func (p *pool) helper(w int, wake <-chan struct{}) {
	defer p.wg.Done()
	for range wake {
		seen := p.state.Load() >> 32
		for spin := 0; spin < helperSpin; spin++ {
			p.drain(w)
			if e := p.state.Load() >> 32; e != seen {
				seen, spin = e, 0
				continue
			}
			if spin%yieldEvery == yieldEvery-1 {
				runtime.Gosched()
			}
		}
	}
}

// drain claims chunks of the current loop until none are left.
func (p *pool) drain(w int) {
	for {
		s := p.state.Load()
		epoch, next := s>>32, int(uint32(s))
		l := &p.loops[epoch%2]
		// n and grain may belong to a later loop here; the claim below
		// succeeds only if this is still the loop they were read for.
		n, grain := int(l.n.Load()), int(l.grain.Load())
		if next >= n || grain <= 0 {
			return
		}
		// Guided: a share of what is left, in whole grains, so early
		// claims are few and large and the last ones small; whichever
		// worker ends up slower (busier core, costlier items) then
		// holds up the others by one grain at most.
		c := max(grain, (n-next)/(2*p.size))
		hi := min(next+(c+grain-1)/grain*grain, n)
		if !p.state.CompareAndSwap(s, epoch<<32|uint64(hi)) {
			continue
		}
		l.t.run(w, next, hi)
		l.done.Add(int64(hi - next))
	}
}

// parallel runs t over items [0, n) in chunks of whole grains and returns
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
	epoch := p.state.Load()>>32 + 1
	l := &p.loops[epoch%2]
	l.t = t
	l.n.Store(int64(n))
	l.grain.Store(int64(grain))
	l.done.Store(0)
	p.state.Store(epoch << 32) // publish: item 0 of the new loop is free
	helpers := min(len(p.wake), (n+grain-1)/grain-1)
	for _, c := range p.wake[:helpers] {
		select {
		case c <- struct{}{}:
		default: // already awake or about to be
		}
	}
	p.drain(0)
	for spin := 1; l.done.Load() < int64(n); spin++ {
		if spin%yieldEvery == 0 {
			runtime.Gosched()
		}
	}
}

// grainFor is the smallest chunk worth claiming for n items: a sixteenth
// of a worker's share, at least least items (drain claims larger chunks
// while much is left, so a loop takes a dozen or so claims).
func (p *pool) grainFor(n, least int) int {
	return max(n/(16*p.size), least)
}

// close stops the helper goroutines.
func (p *pool) close() {
	for _, c := range p.wake {
		close(c)
	}
	p.wake = nil
	p.wg.Wait()
}
