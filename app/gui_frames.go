package app

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// frameMonitor measures how long the window goes without a frame: tick runs
// once per pass of Fyne's event loop on the main goroutine (an endless
// animation calls it, and Fyne ticks animations on every pass, 60 a second,
// whether or not anything is redrawn), so the gap between two ticks is how
// long the window could neither take input nor draw. Gaps are kept per
// phase (startup, idle, loading, streaming) so a report says which activity
// stalls the window. A gap counts for every phase it overlaps: the frame
// drawn just after a load ends (the chat page appearing) still counts as
// loading.
//
// Apart from frames it keeps how late work posted to the main goroutine
// runs (fyne.Do: a streamed token, a load's progress): a ticker posts a
// probe every period and the probe's delay is kept per phase. Fyne passes
// posted work through a goroutine of its own, which can wait for a CPU while
// the main thread is idle, so that delay is not a frame gap: on the 2-core
// test machine under other sessions' builds, perf sched showed the main
// thread asleep (not waiting for a CPU) for 83-208 ms of each 106-216 ms
// gap that an earlier, probe-only monitor reported, while the probe waited
// for the threads that pass it on.
type frameMonitor struct {
	period time.Duration
	now    func() time.Time
	post   func(func())

	// Touched only on the main goroutine.
	phase   string
	entered []string // phases left since the last tick
	last    time.Time
	gaps    map[string][]time.Duration
	worst   []stall                    // gaps over 100 ms, in order
	work    map[string]time.Duration   // longest posted function per phase
	late    map[string][]time.Duration // the probes' delays, per phase

	stopOnce sync.Once
	stop     chan struct{}
	// stopped is set by close: ticks still queued, or run by Fyne on the
	// ticker's goroutine once its loop has ended, measure the window's
	// teardown, not a frame.
	stopped atomic.Bool
}

func newFrameMonitor(period time.Duration, now func() time.Time, post func(func())) *frameMonitor {
	return &frameMonitor{period: period, now: now, post: post, phase: "startup",
		gaps: map[string][]time.Duration{}, work: map[string]time.Duration{}, late: map[string][]time.Duration{},
		stop: make(chan struct{})}
}

// start posts a probe every period until close.
func (m *frameMonitor) start() {
	go func() {
		t := time.NewTicker(m.period)
		defer t.Stop()
		for {
			select {
			case <-m.stop:
				return
			case due := <-t.C: // when the tick was due, however late it came
				m.post(func() { m.probe(due) })
			}
		}
	}()
}

func (m *frameMonitor) close() {
	m.stopped.Store(true)
	m.stopOnce.Do(func() { close(m.stop) })
}

// probe runs on the main goroutine: the delay since due, the probe's
// tick, is how late posted work runs.
func (m *frameMonitor) probe(due time.Time) {
	if m.stopped.Load() {
		return
	}
	m.late[m.phase] = append(m.late[m.phase], m.now().Sub(due))
}

// tick runs on the main goroutine once per pass of the window's loop.
func (m *frameMonitor) tick() {
	if m.stopped.Load() {
		return
	}
	now := m.now()
	if !m.last.IsZero() {
		gap := now.Sub(m.last)
		phases := m.entered
		if !slices.Contains(phases, m.phase) {
			phases = append(phases, m.phase)
		}
		for _, p := range phases {
			m.gaps[p] = append(m.gaps[p], gap)
		}
		if gap > stallGap {
			m.worst = append(m.worst, stall{strings.Join(phases, "+"), m.last.UnixMilli(), ms(gap)})
		}
	}
	m.entered = m.entered[:0]
	m.last = now
}

// stallGap is the longest gap the UI may take (issue 10: no frame over 100 ms).
const stallGap = 100 * time.Millisecond

// stall is one gap over stallGap and when it began (Unix milliseconds, to
// line it up with what a script did then).
type stall struct {
	Phase  string  `json:"phase"` // "loading+idle": the phases it overlapped
	UnixMS int64   `json:"unix_ms"`
	GapMS  float64 `json:"gap_ms"`
}

// timed wraps post so that the run time of every function the app posts
// to the main goroutine is kept per phase: the app's own share of a gap,
// as against drawing, the window system or other processes.
func (m *frameMonitor) timed(post func(func())) func(func()) {
	return func(f func()) {
		post(func() {
			start, phase := m.now(), m.phase
			f()
			m.work[phase] = max(m.work[phase], m.now().Sub(start))
		})
	}
}

// setPhase names what the window is doing from now on (main goroutine).
func (m *frameMonitor) setPhase(p string) {
	if m != nil && p != m.phase {
		if !slices.Contains(m.entered, m.phase) {
			m.entered = append(m.entered, m.phase)
		}
		m.phase = p
	}
}

// frameReport is the gap statistics of one phase, in milliseconds.
type frameReport struct {
	Samples int     `json:"samples"`
	MaxMS   float64 `json:"max_ms"`
	P99MS   float64 `json:"p99_ms"`
	P50MS   float64 `json:"p50_ms"`
	Over100 int     `json:"over_100ms"`
	// WorkMaxMS is the longest function the app posted in this phase.
	WorkMaxMS float64 `json:"work_max_ms"`
	// PostMaxMS and PostP99MS are how late posted work began to run (the
	// probes': see frameMonitor), not frame gaps.
	PostMaxMS float64 `json:"post_max_ms"`
	PostP99MS float64 `json:"post_p99_ms"`
}

// report summarises the gaps per phase (main goroutine).
func (m *frameMonitor) report() map[string]frameReport {
	out := map[string]frameReport{}
	for phase, g := range m.gaps {
		s := slices.Clone(g)
		slices.Sort(s)
		r := frameReport{Samples: len(s), MaxMS: ms(s[len(s)-1]), P99MS: ms(s[len(s)*99/100]), P50MS: ms(s[len(s)/2]),
			WorkMaxMS: ms(m.work[phase])}
		for _, d := range s {
			if d > stallGap {
				r.Over100++
			}
		}
		if l := slices.Clone(m.late[phase]); len(l) > 0 {
			slices.Sort(l)
			r.PostMaxMS, r.PostP99MS = ms(l[len(l)-1]), ms(l[len(l)*99/100])
		}
		out[phase] = r
	}
	return out
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// writeReport saves the phases' report() and the stalls as JSON.
func (m *frameMonitor) writeReport(path string) error {
	b, err := json.MarshalIndent(struct {
		Phases map[string]frameReport `json:"phases"`
		Stalls []stall                `json:"stalls"`
	}{m.report(), m.worst}, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("app: frame stats: %w", err)
	}
	return nil
}
