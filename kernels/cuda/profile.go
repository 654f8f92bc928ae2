package cuda

import (
	"fmt"
	"sort"
)

// KernelTime is the GPU time one kernel took over the profiled runs.
type KernelTime struct {
	Kernel  string
	Op      string
	Calls   int
	Seconds float64
}

// profiler times every launch of profiled program runs with events. It is
// for finding where a forward pass spends its time: runs stay eager (no
// graph) while it is on, queued behind a spin so that launch gaps are not
// what it measures.
type profiler struct {
	events []cuEvent
	totals map[[2]string]*KernelTime
}

// SetProfiling turns per-kernel timing of program runs on or off; Profile
// reports what was timed since it was turned on.
func (be *Backend) SetProfiling(on bool) error {
	return be.do(func() error {
		if !on {
			err := be.prof.destroy(be.drv)
			be.prof = nil
			return err
		}
		if be.prof == nil {
			be.prof = &profiler{totals: map[[2]string]*KernelTime{}}
		}
		return nil
	})
}

// Profile is the kernel time per (kernel, op) since profiling was turned on,
// the largest first.
func (be *Backend) Profile() ([]KernelTime, error) {
	var out []KernelTime
	err := be.do(func() error {
		if be.prof == nil {
			return fmt.Errorf("cuda: profiling is off")
		}
		for _, k := range be.prof.totals {
			out = append(out, *k)
		}
		return nil
	})
	sort.Slice(out, func(i, j int) bool { return out[i].Seconds > out[j].Seconds })
	return out, err
}

// profiling reports whether programs run under the profiler. prof is set
// only by SetProfiling, which waits for the worker, so reading it from the
// caller's goroutine between calls is ordered by that wait.
func (be *Backend) profiling() bool { return be.prof != nil }

// runProfiled launches the steps with an event between each two, waits,
// and adds the intervals to the totals. Device thread only.
func (p *profiler) runProfiled(be *Backend, steps []step) error {
	d := be.drv
	for len(p.events) < len(steps)+1 {
		e, err := d.eventCreate(true)
		if err != nil {
			return err
		}
		p.events = append(p.events, e)
	}
	// Hold the GPU while the launches queue, 10 us per launch, so that no
	// interval below includes the host's launch time.
	spin, err := be.function("spin")
	if err != nil {
		return err
	}
	if err := be.launch(spin, [3]uint32{1, 1, 1}, [3]uint32{1, 1, 1}, 0, []uint64{argI64(int64(len(steps)) * 10000)}); err != nil {
		return err
	}
	for i := range steps {
		s := &steps[i]
		if err := d.eventRecord(p.events[i], be.stream); err != nil {
			return err
		}
		if err := be.launch(s.fn, s.grid, s.block, s.shared, s.args); err != nil {
			return fmt.Errorf("cuda: %s (%s): %w", s.op, s.kernel, err)
		}
	}
	if err := d.eventRecord(p.events[len(steps)], be.stream); err != nil {
		return err
	}
	if err := d.eventSync(p.events[len(steps)]); err != nil {
		return err
	}
	for i := range steps {
		ms, err := d.eventElapsed(p.events[i], p.events[i+1])
		if err != nil {
			return err
		}
		key := [2]string{steps[i].kernel, steps[i].op}
		k := p.totals[key]
		if k == nil {
			k = &KernelTime{Kernel: key[0], Op: key[1]}
			p.totals[key] = k
		}
		k.Calls++
		k.Seconds += float64(ms) / 1e3
	}
	return nil
}

func (p *profiler) destroy(d *driver) error {
	if p == nil {
		return nil
	}
	for _, e := range p.events {
		if err := d.eventDestroy(e); err != nil {
			return err
		}
	}
	p.events = nil
	return nil
}
