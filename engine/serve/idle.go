package serve

import (
	"runtime"
	"runtime/debug"
	"sync"
)

// idleRelease returns memory to the system when the server falls idle.
//
// A burst of requests (hundreds of streams, or of connections refused
// before their body) leaves the Go heap tens of MiB larger than idle; the
// runtime's background scavenger gives those pages back over minutes. A
// desktop server sits idle most of the time, so when the last request in
// flight ends it is worth one forced collection that returns them at once
// (a few milliseconds on a heap of this size, on a goroutine of its own,
// never on a request's path).
//
// A connection's buffers outlive its last request until the client closes
// it, so a connection closing while no request is in flight is a moment to
// release as well (poke).
//
// At most one release runs at a time; a server that falls idle again while
// one runs gets one more after it, so the last burst is always followed by a
// release.
type idleRelease struct {
	release func()

	mu      sync.Mutex
	active  int  // requests in flight
	running bool // a release is under way
	again   bool // the server fell idle again during it
}

// enter counts a request in; the returned func counts it out, and starts a
// release when it was the last one.
func (r *idleRelease) enter() (leave func()) {
	r.mu.Lock()
	r.active++
	r.mu.Unlock()
	return r.leave
}

func (r *idleRelease) leave() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.active--
	r.start()
}

// poke starts a release if no request is in flight.
func (r *idleRelease) poke() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.start()
}

// start runs with r.mu held.
func (r *idleRelease) start() {
	if r.active > 0 {
		return
	}
	if r.running {
		r.again = true
		return
	}
	r.running = true
	go r.loop()
}

func (r *idleRelease) loop() {
	for {
		r.release()
		r.mu.Lock()
		if !r.again {
			r.running = false
			r.mu.Unlock()
			return
		}
		r.again = false
		r.mu.Unlock()
	}
}

// freeOSMemory collects twice before returning free pages: what a burst
// left in sync.Pools (net/http's and bufio's buffers, io.Copy's) survives
// one collection in the pools' victim caches, and an idle server would not
// run the second one for minutes.
func freeOSMemory() {
	runtime.GC()
	debug.FreeOSMemory()
}
