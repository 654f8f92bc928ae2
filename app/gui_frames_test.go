package app

import (
	"testing"
	"time"
)

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
	step(20 * time.Millisecond) // began in loading: counts for both
	step(20 * time.Millisecond)
	r := m.report()
	if l := r["loading"]; l.Samples != 12 || l.MaxMS != 150 || l.Over100 != 1 || l.P50MS != 5 {
		t.Errorf("loading %+v", l)
	}
	if s := r["streaming"]; s.Samples != 2 || s.MaxMS != 20 || s.Over100 != 0 {
		t.Errorf("streaming %+v", s)
	}
	if len(m.worst) != 1 || m.worst[0].Phase != "loading" || m.worst[0].GapMS != 150 {
		t.Errorf("stalls %+v", m.worst)
	}
}

// A gap is counted in every phase it overlaps, so the frame drawn as a load
// ends is reported with the load, and stalls over 100 ms are listed.
func TestFrameMonitorPhases(t *testing.T) {
	clock := time.Unix(1000, 0)
	m := newFrameMonitor(time.Millisecond, func() time.Time { return clock }, func(f func()) { f() })
	step := func(d time.Duration) { clock = clock.Add(d); m.tick() }

	m.setPhase("idle")
	m.tick()
	step(10 * time.Millisecond)
	m.setPhase("loading")
	step(20 * time.Millisecond)
	m.setPhase("idle")
	m.setPhase("loading")
	m.setPhase("idle")
	step(150 * time.Millisecond) // the chat page's first frame, after the load
	step(5 * time.Millisecond)

	r := m.report()
	if got := r["loading"]; got.Samples != 2 || got.MaxMS != 150 || got.Over100 != 1 {
		t.Errorf("loading %+v, want 2 samples, max 150 ms, one over 100 ms", got)
	}
	if got := r["idle"]; got.Samples != 4 || got.MaxMS != 150 || got.P50MS != 20 {
		t.Errorf("idle %+v, want 4 samples (10, 20, 150, 5 ms)", got)
	}
	if len(m.worst) != 1 || m.worst[0].Phase != "loading+idle" || m.worst[0].GapMS != 150 {
		t.Errorf("stalls %+v, want one of 150 ms in loading+idle", m.worst)
	}
}

// Once closed (the app quitting), ticks still queued or run while the
// window is torn down add no gap.
func TestFrameMonitorStopsAtClose(t *testing.T) {
	clock := time.Unix(1000, 0)
	m := newFrameMonitor(time.Millisecond, func() time.Time { return clock }, func(f func()) { f() })
	m.setPhase("idle")
	m.tick()
	clock = clock.Add(10 * time.Millisecond)
	m.tick()
	m.close()
	clock = clock.Add(300 * time.Millisecond) // the window's teardown
	m.tick()
	if r := m.report()["idle"]; r.Samples != 1 || r.MaxMS != 10 || len(m.worst) != 0 {
		t.Errorf("idle %+v, stalls %+v; want the one 10 ms gap before close", r, m.worst)
	}
}

// Posted work's delay is kept per phase apart from the frame gaps: a probe
// that ran late is not a gap in the window's loop.
func TestFrameMonitorProbeDelay(t *testing.T) {
	clock := time.Unix(1000, 0)
	m := newFrameMonitor(time.Millisecond, func() time.Time { return clock }, func(f func()) { f() })
	m.setPhase("idle")
	m.tick()
	due := clock
	clock = clock.Add(16 * time.Millisecond)
	m.tick()
	m.probe(due.Add(4 * time.Millisecond)) // 12 ms late
	m.setPhase("streaming")
	due = clock
	clock = clock.Add(16 * time.Millisecond)
	m.tick()
	clock = clock.Add(200 * time.Millisecond) // the probe waited for a CPU; the loop had passed at +16 ms
	m.probe(due)
	r := m.report()
	// The second gap began in idle: it counts there too.
	if got := r["idle"]; got.Samples != 2 || got.MaxMS != 16 || got.PostMaxMS != 12 {
		t.Errorf("idle %+v, want two 16 ms gaps and a probe 12 ms late", got)
	}
	if got := r["streaming"]; got.Samples != 1 || got.MaxMS != 16 || got.Over100 != 0 || got.PostMaxMS != 216 || got.PostP99MS != 216 {
		t.Errorf("streaming %+v, want one 16 ms gap and a probe 216 ms late", got)
	}
	if len(m.worst) != 0 {
		t.Errorf("stalls %+v, want none: no frame gap was over 100 ms", m.worst)
	}
	m.close()
	m.probe(clock)
	if got := m.report()["streaming"].PostMaxMS; got != 216 {
		t.Errorf("a probe after close changed the delay to %v ms", got)
	}
}
