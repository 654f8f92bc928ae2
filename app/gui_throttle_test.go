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

func TestFrameMonitorReport(t *testing.T) {
	now := time.Unix(1000, 0)
	m := newFrameMonitor(5*time.Millisecond, func() time.Time { return now }, nil)
	step := func(d time.Duration) {
		now = now.Add(d)
		m.tick()
	}
	m.tick()
	m.setPhase("loading")
	for range 10 {
		step(5 * time.Millisecond)
	}
	step(150 * time.Millisecond) // a stall
	m.setPhase("streaming")
	step(20 * time.Millisecond)
	r := m.report()
	if l := r["loading"]; l.Samples != 11 || l.MaxMS != 150 || l.Over100 != 1 || l.P50MS != 5 {
		t.Errorf("loading %+v", l)
	}
	if s := r["streaming"]; s.Samples != 1 || s.MaxMS != 20 || s.Over100 != 0 {
		t.Errorf("streaming %+v", s)
	}
	if len(m.worst) != 1 || m.worst[0].Phase != "loading" || m.worst[0].GapMS != 150 {
		t.Errorf("stalls %+v", m.worst)
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
