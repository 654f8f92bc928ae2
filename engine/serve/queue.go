package serve

import (
	"context"
	"errors"
	"sync"
)

// errQueueFull is returned by acquire when the queue is at its bound.
var errQueueFull = errors.New("serve: too many requests waiting")

// fifo lets up to slots requests at a time use the runner (1 unless it
// decodes several together) and queues the others in arrival order, up to a
// bound. (A buffered channel as a semaphore would not do: Go wakes its
// waiters in no promised order.)
type fifo struct {
	max   int // waiters allowed besides the holders
	slots int // holders at once; 0 means 1

	mu      sync.Mutex
	busy    int             // holders
	waiters []chan struct{} // closed to hand a slot over
}

// acquire waits for a slot, in turn. It fails at once with errQueueFull
// when max requests already wait, and with ctx's error when ctx ends first.
// On success the caller must call release exactly once.
func (q *fifo) acquire(ctx context.Context) (release func(), err error) {
	q.mu.Lock()
	if q.busy < max(q.slots, 1) && len(q.waiters) == 0 {
		q.busy++
		q.mu.Unlock()
		return q.release, nil
	}
	if len(q.waiters) >= q.max {
		q.mu.Unlock()
		return nil, errQueueFull
	}
	turn := make(chan struct{})
	q.waiters = append(q.waiters, turn)
	q.mu.Unlock()

	select {
	case <-turn:
		return q.release, nil
	case <-ctx.Done():
	}
	q.mu.Lock()
	for i, w := range q.waiters {
		if w == turn {
			q.waiters = append(q.waiters[:i], q.waiters[i+1:]...)
			q.mu.Unlock()
			return nil, ctx.Err()
		}
	}
	q.mu.Unlock()
	// The slot was handed over while ctx ended: pass it on.
	q.release()
	return nil, ctx.Err()
}

// release hands the slot to the longest waiter, or frees it.
func (q *fifo) release() {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.waiters) == 0 {
		q.busy--
		return
	}
	next := q.waiters[0]
	q.waiters = q.waiters[1:]
	close(next)
}

// waiting is the number of requests in the queue, for the log.
func (q *fifo) waiting() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.waiters)
}
