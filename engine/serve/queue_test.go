package serve

import (
	"context"
	"errors"
	"testing"
)

// TestFIFOOrder queues waiters one by one and checks that the slot goes to
// them in arrival order, that the bound holds, and that a waiter that gives
// up leaves the line without losing anyone's turn.
func TestFIFOOrder(t *testing.T) {
	q := fifo{max: 4}
	release, err := q.acquire(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	type grant struct {
		who     int
		release func()
	}
	granted := make(chan grant)
	quitter, quit := context.WithCancel(t.Context())
	defer quit()
	results := make(chan error, 4)
	for who := range 4 {
		ctx := t.Context()
		if who == 2 {
			ctx = quitter
		}
		go func() {
			r, err := q.acquire(ctx)
			results <- err
			if err == nil {
				granted <- grant{who, r}
			}
		}()
		for q.waiting() != who+1 { // enter the line one at a time
			waitBriefly()
		}
	}
	if _, err := q.acquire(t.Context()); !errors.Is(err, errQueueFull) {
		t.Fatalf("fifth waiter: %v, want errQueueFull", err)
	}
	quit()
	if err := <-results; !errors.Is(err, context.Canceled) {
		t.Fatalf("the waiter that gave up got %v", err)
	}
	if q.waiting() != 3 {
		t.Fatalf("%d waiting after one gave up, want 3", q.waiting())
	}
	for _, want := range []int{0, 1, 3} {
		release()
		g := <-granted
		if g.who != want {
			t.Fatalf("slot went to %d, want %d", g.who, want)
		}
		release = g.release
	}
	release()
	if r, err := q.acquire(t.Context()); err != nil {
		t.Fatalf("free slot: %v", err)
	} else {
		r()
	}
}

// TestFIFOHandoverRace gives the slot to a waiter whose ctx ends at the
// same moment, many times: the slot must never be lost.
func TestFIFOHandoverRace(t *testing.T) {
	q := fifo{max: 1}
	for range 200 {
		release, err := q.acquire(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() {
			defer close(done)
			if r, err := q.acquire(ctx); err == nil {
				r()
			}
		}()
		for q.waiting() != 1 {
			waitBriefly()
		}
		go cancel()
		release()
		<-done
		cancel()
		r, err := q.acquire(t.Context()) // the slot must be free again
		if err != nil {
			t.Fatal(err)
		}
		r()
	}
}
