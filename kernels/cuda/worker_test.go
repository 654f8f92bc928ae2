package cuda

import (
	"errors"
	"testing"
)

// Jobs run in the order posted; a failure of posted work is reported by
// the next wait of the backend that posted it, once, and not by another
// backend sharing the thread; a stopped thread refuses work. (Jobs with no
// context need no driver, so this runs everywhere.)
func TestWorkerOrderAndErrors(t *testing.T) {
	w := newWorker(nil)
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
