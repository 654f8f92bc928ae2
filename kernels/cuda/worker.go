package cuda

import (
	"runtime"
	"sync"
)

// worker runs driver calls on one locked OS thread, because a CUDA context
// is current per thread and Go would otherwise move the calling goroutine
// between threads (seen: CUresult 201 after a syscall).
//
// Work is posted as jobs, each with the context to make current first: one
// thread can serve several backends (several GPUs, or virtual devices of
// one), switching contexts between their jobs, so that their calls are
// made in exactly the order the program made them and a copy between two
// of them is one job rather than a hand-off between threads (peer.go).
//
// post does not wait: kernels are queued on the device stream anyway, so
// waiting per launch would only add a thread hand-off. The first error of a
// backend's posted work is kept and returned by its next do, like the
// driver's own sticky errors.
type worker struct {
	drv  *driver
	jobs chan job
	done chan struct{}
	cur  cuContext // current on the thread; touched only there
	// groups are the reduce groups whose members make their calls here
	// (allreduce.go); touched only on the thread.
	groups []*group

	sendMu   sync.Mutex // guards closed, users and sends on jobs
	closed   bool
	stopOnce sync.Once
	// spin: the thread polls for jobs, and callers for replies, before
	// parking (next, wait); fixed at start.
	spin bool
	// users counts the backends on a thread that backends started for
	// themselves (auto); the last one's Close stops it. A Worker's thread
	// is stopped by Worker.Close alone.
	auto  bool
	users int
}

// job is one closure for the thread: ctx (unless 0) is made current before
// f runs, and a failure is kept in errs (unless nil) for the next do.
type job struct {
	ctx  cuContext
	errs *pending
	f    func() error
	// launch: f only launches kernels (a program's run), which may go on
	// while a reduce round is open; any other job is refused then
	// (worker.roundOpen).
	launch bool
}

// pending is the first error of one backend's posted work not yet reported.
type pending struct {
	mu  sync.Mutex
	err error
}

func (p *pending) keep(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.err == nil {
		p.err = err
	}
}

func (p *pending) take() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	err := p.err
	p.err = nil
	return err
}

// newWorker starts a thread; it has no context current until a job's.
func newWorker(d *driver, spin bool) *worker {
	w := &worker{drv: d, jobs: make(chan job, 1024), done: make(chan struct{}), spin: spin}
	go w.loop()
	return w
}

func (w *worker) loop() {
	runtime.LockOSThread()
	// The thread stays locked until it exits: a thread with a context
	// current is never handed back to the scheduler.
	defer close(w.done)
	for {
		j, ok := w.next()
		if !ok {
			return
		}
		var err error
		if !j.launch {
			err = w.roundOpen()
		}
		if err == nil {
			err = w.use(j.ctx)
		}
		if err == nil {
			err = j.f()
		}
		if err != nil && j.errs != nil {
			j.errs.keep(err)
		}
	}
}

// Waking a parked goroutine costs a GPU step at every synchronisation.
// The thread waits for its next job parked on a channel; the job's post
// then has the scheduler find it a processor and wake its locked OS
// thread, and a caller parked in do is woken the same way by the reply:
// two hand-offs between OS threads in the gap where the GPU waits for the
// host (after a read, while the host decides and queues the next pass).
// So the thread polls for a next job for a while before parking
// (spinPolls), and do polls for its reply (replyPolls), as the driver's
// own stream synchronisation spins rather than sleeps. Both fall back to
// blocking, so an idle thread costs nothing after a few tens of
// microseconds, and a long wait (a prefill) a bounded spin.
const (
	// spinPolls bounds the thread's polls for a next job: at some
	// nanoseconds a poll of an empty channel (9 on a 2-core VM), some
	// tens of microseconds, about the host's work between a read and
	// the next pass of a speculative round.
	spinPolls = 4096
	// replyPolls bounds a caller's polls for its reply, each after
	// yielding its processor (0.1-0.2 us): a few milliseconds, a decode
	// step of an 8B model on an H200.
	replyPolls = 1 << 15
)

// next is the thread's next job; false once the channel is closed.
func (w *worker) next() (job, bool) {
	if w.spin {
		for range spinPolls {
			select {
			case j, ok := <-w.jobs:
				return j, ok
			default:
			}
		}
	}
	j, ok := <-w.jobs
	return j, ok
}

// use makes ctx current on the thread (0: leaves it); thread only.
func (w *worker) use(ctx cuContext) error {
	if ctx == 0 || ctx == w.cur {
		return nil
	}
	if err := w.drv.setCurrent(ctx); err != nil {
		return err
	}
	w.cur = ctx
	return nil
}

// forget notes that ctx is gone (released), so that a later context that
// happens to get the same handle is made current anew; thread only.
func (w *worker) forget(ctx cuContext) {
	if w.cur == ctx {
		w.cur = 0
	}
}

// post queues f without waiting for it.
func (w *worker) post(ctx cuContext, errs *pending, f func() error) error {
	return w.send(job{ctx: ctx, errs: errs, f: f})
}

// postLaunch queues f, which only launches kernels, without waiting.
func (w *worker) postLaunch(ctx cuContext, errs *pending, f func() error) error {
	return w.send(job{ctx: ctx, errs: errs, f: f, launch: true})
}

func (w *worker) send(j job) error {
	w.sendMu.Lock()
	defer w.sendMu.Unlock()
	if w.closed {
		return ErrClosed
	}
	w.jobs <- j
	return nil
}

// do runs f on the thread and waits. It returns the first pending error of
// earlier work posted with errs, if any, else f's error.
func (w *worker) do(ctx cuContext, errs *pending, f func() error) error {
	reply := make(chan error, 1)
	if err := w.send(job{launch: true, f: func() error {
		// Refused here rather than by loop, so that the reply is sent.
		err := w.roundOpen()
		if err == nil {
			err = w.use(ctx)
		}
		if err == nil {
			err = f()
		}
		if err == nil {
			err = w.gaveUp()
		}
		reply <- err
		return nil
	}}); err != nil {
		return err
	}
	err := w.wait(reply)
	if errs != nil {
		if e := errs.take(); e != nil {
			err = e
		}
	}
	return err
}

// wait is do's wait for its reply: polled first where the thread spins.
func (w *worker) wait(reply chan error) error {
	if w.spin {
		for range replyPolls {
			select {
			case err := <-reply:
				return err
			default:
				runtime.Gosched()
			}
		}
	}
	return <-reply
}

// hold counts one more backend on the thread; false when it has stopped.
func (w *worker) hold() bool {
	w.sendMu.Lock()
	defer w.sendMu.Unlock()
	if w.closed {
		return false
	}
	w.users++
	return true
}

// release counts a backend off the thread and stops a thread that
// backends started for themselves once none is left on it.
func (w *worker) release() {
	w.sendMu.Lock()
	w.users--
	last := w.auto && w.users <= 0
	w.sendMu.Unlock()
	if last {
		w.stop()
	}
}

// stop ends the thread after the jobs queued before it.
func (w *worker) stop() {
	w.stopOnce.Do(func() {
		w.sendMu.Lock()
		w.closed = true
		close(w.jobs)
		w.sendMu.Unlock()
		<-w.done
	})
}

// Worker is an OS thread that makes the driver calls of every backend
// opened with it (Options.Worker), in the order they are made, switching
// CUDA contexts between them. Backends of one model placement share one,
// so that a copy between two of them waits on no other thread; a backend
// opened without one has a thread of its own.
type Worker struct{ w *worker }

// NewWorker starts a thread for backends to share. Without a driver it
// returns ErrNoDriver.
func NewWorker() (*Worker, error) {
	d, err := openDriver()
	if err != nil {
		return nil, err
	}
	return &Worker{newWorker(d, true)}, nil
}

// Close ends the thread; the backends that used it must be closed first.
func (w *Worker) Close() error {
	w.w.stop()
	return nil
}
