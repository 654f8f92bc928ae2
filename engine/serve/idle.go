package serve

import "sync"

// idleRelease returns memory to the system when the server falls idle.
//
// A burst of requests (hundreds of streams, or of connections refused
// before their body) leaves the Go heap tens of MiB larger than idle; the
// runtime's background scavenger gives those pages back over minutes. A
// desktop server sits idle most of the time, so when the last request in
// flight ends it is worth one forced collection that returns them at once
// (debug.FreeOSMemory: a few milliseconds on a heap of this size, on a
// goroutine of its own, never on a request's path).
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
