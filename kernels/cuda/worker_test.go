package cuda

import (
	"errors"
	"testing"
)

// Jobs run in the order posted; a failure of posted work is reported by
// the next wait of the backend that posted it, once, and not by another
// backend sharing the thread; a stopped thread refuses work. (Jobs with no
// context need no driver, so this runs everywhere.) The same for a thread
// that polls for jobs and replies before parking and one that parks at once.
func TestWorkerOrderAndErrors(t *testing.T) {
	for _, spin := range []bool{true, false} {
		workerOrderAndErrors(t, newWorker(nil, spin))
	}
}

func workerOrderAndErrors(t *testing.T, w *worker) {
	var got []int
	for i := range 1000 {
		if err := w.post(0, nil, func() error { got = append(got, i); return nil }); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.do(0, nil, func() error { return nil }); err != nil {
		t.Fatal(err)
	}
	for i, v := range got {
		if v != i {
			t.Fatalf("job %d ran as %d", i, v)
		}
	}

	var a, b pending
	boom := errors.New("boom")
	if err := w.post(0, &a, func() error { return boom }); err != nil {
		t.Fatal(err)
	}
	if err := w.do(0, &b, func() error { return nil }); err != nil {
		t.Errorf("the other backend's wait: %v", err)
	}
	if err := w.do(0, &a, func() error { return nil }); !errors.Is(err, boom) {
		t.Errorf("the failing backend's wait: %v, want %v", err, boom)
	}
	if err := w.do(0, &a, func() error { return nil }); err != nil {
		t.Errorf("reported twice: %v", err)
	}

	w.stop()
	if err := w.post(0, nil, func() error { return nil }); !errors.Is(err, ErrClosed) {
		t.Errorf("post after stop: %v", err)
	}
}

// While a reduce group on the thread has launched more reduces on one
// member than on another, the thread runs launch jobs only: a wait or any
// other call is refused with ErrReduceOpen (it could wait forever for a
// launch queued behind it), a posted one through the next wait. Once the
// counts agree again, calls run. (No driver needed: the group's counts are
// set by hand.)
func TestWorkerRefusesCallsWhileRoundOpen(t *testing.T) {
	w := newWorker(nil, true)
	defer w.stop()
	g := &group{members: []*Backend{{name: "a"}, {name: "b"}}, launched: []int{0, 0}}
	if err := w.do(0, nil, func() error { w.groups = append(w.groups, g); return nil }); err != nil {
		t.Fatal(err)
	}
	// member a launches its reduce: the round is open
	if err := w.postLaunch(0, nil, func() error { g.launched[0]++; return nil }); err != nil {
		t.Fatal(err)
	}
	ran := false
	if err := w.do(0, nil, func() error { ran = true; return nil }); !errors.Is(err, ErrReduceOpen) {
		t.Errorf("wait with the round open: %v, want ErrReduceOpen", err)
	}
	var errs pending
	if err := w.post(0, &errs, func() error { ran = true; return nil }); err != nil {
		t.Fatal(err)
	}
	if ran {
		t.Error("a refused call ran")
	}
	// other launches go on; b's closes the round
	launched := false
	if err := w.postLaunch(0, nil, func() error { launched = true; return nil }); err != nil {
		t.Fatal(err)
	}
	if err := w.postLaunch(0, nil, func() error { g.launched[1]++; return nil }); err != nil {
		t.Fatal(err)
	}
	if err := w.do(0, &errs, func() error { return nil }); !errors.Is(err, ErrReduceOpen) {
		t.Errorf("the refused post's error at the next wait: %v, want ErrReduceOpen", err)
	}
	if err := w.do(0, &errs, func() error { ran = true; return nil }); err != nil || !ran || !launched {
		t.Errorf("with the round closed: err %v, ran %v, launched %v", err, ran, launched)
	}
}

// A thread that backends started for themselves stops when the last of
// them leaves it (a backend moved onto a group's thread leaves its own);
// a Worker's thread stays until Worker.Close.
func TestWorkerUsers(t *testing.T) {
	own := newWorker(nil, true)
	own.auto = true
	if first, second := own.hold(), own.hold(); !first || !second {
		t.Fatal("hold refused on a running thread")
	}
	own.release()
	if err := own.do(0, nil, func() error { return nil }); err != nil {
		t.Errorf("with one user left: %v", err)
	}
	own.release()
	if err := own.post(0, nil, func() error { return nil }); !errors.Is(err, ErrClosed) {
		t.Errorf("after the last user left: %v, want ErrClosed", err)
	}
	if own.hold() {
		t.Error("hold on a stopped thread")
	}

	shared := newWorker(nil, true)
	defer shared.stop()
	if !shared.hold() {
		t.Fatal("hold refused")
	}
	shared.release()
	if err := shared.do(0, nil, func() error { return nil }); err != nil {
		t.Errorf("a Worker's thread after its last backend left: %v", err)
	}
}
