//go:build !headless

package app

import (
	"slices"
	"testing"
	"time"
)

func TestThrottleMergesAndKeepsOrder(t *testing.T) {
	var posted []func()
	var shown []string
	var timers []func()
	th := newThrottle(frameInterval, func(f func()) { posted = append(posted, f) },
		func(acc, v string) string { return acc + v }, func(s string) { shown = append(shown, s) })
	th.after = func(_ time.Duration, f func()) { timers = append(timers, f) }
	run := func() {
		for _, f := range posted {
			f()
		}
		posted = nil
	}

	for _, p := range []string{"And", " God", " said"} {
		th.push(p)
	}
	if len(timers) != 1 || len(posted) != 0 {
		t.Fatalf("3 pushes: %d timers, %d posts; want 1 timer, no post yet", len(timers), len(posted))
	}
	timers[0]()
	run()
	th.push(", Let")
	th.push(" there")
	th.flush() // the generation ended before the next frame
	run()
	timers[1]() // the frame timer still fires: nothing left to show
	run()
	if want := []string{"And God said", ", Let there"}; !slices.Equal(shown, want) {
		t.Errorf("shown %q, want %q", shown, want)
	}
}

func TestWorkerReplaceKeepsNewest(t *testing.T) {
	var w worker
	block := make(chan struct{})
	var ran []int
	w.add(func() { <-block })
	for i := range 5 {
		w.replace(func() { ran = append(ran, i) })
	}
	w.add(func() { ran = append(ran, 100) })
	close(block)
	w.wait()
	if want := []int{100, 4}; !slices.Equal(ran, want) {
		t.Errorf("ran %v, want %v (queued jobs first, then only the newest replaceable one)", ran, want)
	}
}
