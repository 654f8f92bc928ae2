package cuda

import (
	"runtime"
	"sync"
)

// worker runs every driver call for one device on one locked OS thread,
// because a CUDA context is current per thread and Go would otherwise move
// the calling goroutine between threads (seen: CUresult 201 after a syscall).
//
// Work is posted as closures. post does not wait: kernels are queued on the
// device stream anyway, so waiting per launch would only add a thread
// hand-off. The first error of posted work is kept and returned by the next
// do, like the driver's own sticky errors.
type worker struct {
	jobs chan func() error
	done chan struct{}

	sendMu   sync.Mutex // guards closed and sends on jobs
	closed   bool
	errMu    sync.Mutex // guards err; never held while sending
	err      error      // first error of posted work, not yet reported
	stopOnce sync.Once
}

// startWorker starts the thread and runs setup on it (making a context
// current); a setup error stops the worker and is returned.
func startWorker(setup func() error) (*worker, error) {
	w := &worker{jobs: make(chan func() error, 1024), done: make(chan struct{})}
	ready := make(chan error, 1)
	go w.loop(setup, ready)
	if err := <-ready; err != nil {
		<-w.done
		return nil, err
	}
	return w, nil
}

func (w *worker) loop(setup func() error, ready chan<- error) {
	runtime.LockOSThread()
	// The thread stays locked until it exits: a thread with a context
	// current is never handed back to the scheduler.
	defer close(w.done)
	if err := setup(); err != nil {
		ready <- err
		return
	}
	ready <- nil
	for job := range w.jobs {
		if err := job(); err != nil {
			w.errMu.Lock()
			if w.err == nil {
				w.err = err
			}
			w.errMu.Unlock()
		}
	}
}

// post queues f without waiting for it.
func (w *worker) post(f func() error) error {
	w.sendMu.Lock()
	defer w.sendMu.Unlock()
	if w.closed {
		return ErrClosed
	}
	w.jobs <- f
	return nil
}

// do runs f on the device thread and waits. It returns the first pending
// error of earlier posted work, if any, else f's error.
func (w *worker) do(f func() error) error {
	reply := make(chan error, 1)
	if err := w.post(func() error { reply <- f(); return nil }); err != nil {
		return err
	}
	err := <-reply
	w.errMu.Lock()
	defer w.errMu.Unlock()
	if w.err != nil {
		err, w.err = w.err, nil
	}
	return err
}

// stop runs last on the device thread, then ends it.
func (w *worker) stop(last func() error) error {
	err := w.do(last)
	w.stopOnce.Do(func() {
		w.sendMu.Lock()
		w.closed = true
		close(w.jobs)
		w.sendMu.Unlock()
		<-w.done
	})
	return err
}
