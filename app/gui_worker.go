package app

import "sync"

// worker runs jobs one at a time on a goroutine of its own, so slow work
// (planning, disk writes) stays off the main goroutine and in order.
type worker struct {
	mu      sync.Mutex
	queue   []func()
	latest  func() // a replaceable job, run after the queue
	running bool
	idle    *sync.Cond
}

// add queues job; every added job runs, in order.
func (w *worker) add(job func()) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.queue = append(w.queue, job)
	w.kick()
}

// replace sets the job to run next after the queue, dropping a replaceable
// job that has not started: only the newest plan (or settings snapshot) of
// a burst of edits runs.
func (w *worker) replace(job func()) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.latest = job
	w.kick()
}

func (w *worker) kick() {
	if !w.running {
		w.running = true
		go w.loop()
	}
}

func (w *worker) loop() {
	for {
		w.mu.Lock()
		var job func()
		switch {
		case len(w.queue) > 0:
			job, w.queue = w.queue[0], w.queue[1:]
		case w.latest != nil:
			job, w.latest = w.latest, nil
		default:
			w.running = false
			if w.idle != nil {
				w.idle.Broadcast()
			}
			w.mu.Unlock()
			return
		}
		w.mu.Unlock()
		job()
	}
}

// wait blocks until every job has run (for shutdown and tests).
func (w *worker) wait() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.idle == nil {
		w.idle = sync.NewCond(&w.mu)
	}
	for w.running {
		w.idle.Wait()
	}
}
