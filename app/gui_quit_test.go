package app

import (
	"os"
	"syscall"
	"testing"
	"time"
)

// quitRig drives quitOnSignal with a hand-fed clock.
type quitRig struct {
	sig          chan os.Signal
	done         chan struct{}
	ticks        chan time.Time
	quits, kicks int
	died         chan os.Signal
	returned     chan struct{}
}

func startQuitRig(t *testing.T, grace time.Duration) *quitRig {
	t.Helper()
	r := &quitRig{sig: make(chan os.Signal, 2), done: make(chan struct{}), ticks: make(chan time.Time),
		died: make(chan os.Signal, 2), returned: make(chan struct{})}
	quit := make(chan struct{}, 1)
	go func() {
		defer close(r.returned)
		quitOnSignal(r.sig, r.done, func() { r.quits++; quit <- struct{}{} }, func() { r.kicks++ },
			func(s os.Signal) { r.died <- s }, func(time.Duration) <-chan time.Time { return r.ticks }, grace)
	}()
	r.sig <- syscall.SIGTERM
	select {
	case <-quit:
	case <-time.After(10 * time.Second):
		t.Fatal("the first signal did not close the window")
	}
	return r
}

func (r *quitRig) wait(t *testing.T) {
	t.Helper()
	select {
	case <-r.returned:
	case <-time.After(10 * time.Second):
		t.Fatal("quitOnSignal did not return")
	}
}

func TestQuitOnSignalClosesGracefully(t *testing.T) {
	r := startQuitRig(t, time.Second)
	r.ticks <- time.Time{} // one tick: the main loop is woken once
	close(r.done)
	r.wait(t)
	if len(r.died) != 0 || r.quits != 1 || r.kicks != 1 {
		t.Fatalf("quits %d kicks %d died %d, want 1 1 0", r.quits, r.kicks, len(r.died))
	}
}

func TestQuitOnSignalEndsAWedgedClose(t *testing.T) {
	r := startQuitRig(t, time.Second)
	for range 4 { // 4 ticks of 250 ms: the grace of 1 s is spent
		r.ticks <- time.Time{}
	}
	r.wait(t)
	if s := <-r.died; s != syscall.SIGTERM {
		t.Fatalf("died of %v, want the signal that asked to quit", s)
	}
	if r.kicks != 3 {
		t.Fatalf("kicks %d, want 3 (each tick before the last)", r.kicks)
	}
}

func TestQuitOnSignalSecondSignalEndsAtOnce(t *testing.T) {
	r := startQuitRig(t, time.Hour)
	r.sig <- os.Interrupt
	r.wait(t)
	if s := <-r.died; s != os.Interrupt {
		t.Fatalf("died of %v, want the second signal", s)
	}
}

func TestQuitOnSignalReturnsWhenClosedFirst(t *testing.T) {
	done := make(chan struct{})
	close(done)
	quitOnSignal(make(chan os.Signal), done, func() { t.Fatal("quit without a signal") }, nil, nil, nil, time.Second)
}
