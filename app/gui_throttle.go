package app

import (
	"sync"
	"time"
)

// throttle hands values produced off the main goroutine (streamed text,
// load progress) to the UI at most once per interval, merging the values
// that arrive in between. Without it a fast model would queue one UI update
// per token.
type throttle[T any] struct {
	interval time.Duration
	post     func(func())                // runs a function on the main goroutine (fyne.Do)
	after    func(time.Duration, func()) // schedules a call (time.AfterFunc)
	merge    func(acc, v T) T            // folds v into what is pending
	apply    func(T)                     // shows a value; runs on the main goroutine

	mu        sync.Mutex
	pending   T
	has       bool
	scheduled bool
}

func newThrottle[T any](interval time.Duration, post func(func()), merge func(acc, v T) T, apply func(T)) *throttle[T] {
	return &throttle[T]{interval: interval, post: post, merge: merge, apply: apply,
		after: func(d time.Duration, f func()) { time.AfterFunc(d, f) }}
}

// push adds v; it is shown within one interval.
func (t *throttle[T]) push(v T) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.has {
		t.pending = t.merge(t.pending, v)
	} else {
		t.pending, t.has = v, true
	}
	if !t.scheduled {
		t.scheduled = true
		t.after(t.interval, t.fire)
	}
}

func (t *throttle[T]) fire() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.scheduled = false
	t.postPending()
}

// flush shows what is pending now. Posts happen under the lock, so the
// main goroutine sees values in the order they were pushed, and anything
// the caller posts after flush comes after them.
func (t *throttle[T]) flush() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.postPending()
}

func (t *throttle[T]) postPending() {
	if !t.has {
		return
	}
	v := t.pending
	var zero T
	t.pending, t.has = zero, false
	t.post(func() { t.apply(v) })
}
