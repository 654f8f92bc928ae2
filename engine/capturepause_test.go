package engine

import (
	"testing"
	"time"
)

// pausePair loads the F16 demo target with the head-sharing draft at
// draftPath on a tick clock, as timedPair does.
func pausePair(t *testing.T, draftPath string, perPass time.Duration) *Runner {
	t.Helper()
	clock := &tickClock{t: time.Unix(0, 0), tick: 10 * time.Millisecond}
	r := load(t, Config{Target: modelPath(t, "factory-target-F16.gguf"), Draft: draftPath, Clock: clock.now, WarmUp: -1})
	inner := r.draft
	r.draft = slowDrafter{drafter: inner, clock: clock, base: time.Millisecond, perPass: perPass}
	t.Cleanup(func() { r.draft = inner })
	return r
}

// While the chooser keeps drafting off, the target's passes capture no
// states for an EAGLE-3 or DFlash draft (they would cost a launch-bound
// GPU target a tenth of its step), and the output stays the target's;
// the probes that come after paused stretches draft on the states the
// draft has (Encode over a gap). Where drafting pays it still turns on,
// capturing, and the output is again the target's.
func TestHeadSharingDraftPausesCapture(t *testing.T) {
	prompts := loadOracle(t)
	for _, tc := range []struct{ name, path string }{
		{"eagle3", modelPath(t, "factory-eagle3-F16.gguf")},
		{"dflash", dflashPath("F16")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := pausePair(t, tc.path, 100*time.Millisecond)
			steps := 0
			for _, p := range prompts[:2] {
				_, events := generateOracle(t, r, p, Drafting{})
				st := events[len(events)-1]
				steps += st.Steps
				t.Logf("costly: drafted %d in %d steps, accepted %d, drafting %v (%q)", st.Drafted, st.Steps, st.Accepted, st.Drafting, st.DraftOff)
				if st.Drafting {
					t.Errorf("a draft dearer than the target still drafts")
				}
			}
			handed, skipped := r.target.m.CaptureCounts()
			t.Logf("costly: %d steps, %d chunks captured, %d paused", steps, handed, skipped)
			if skipped < steps/2 {
				t.Errorf("%d of %d steps ran paused with drafting off", skipped, steps)
			}

			r = pausePair(t, tc.path, time.Millisecond)
			var st Stats
			for _, p := range prompts[:2] {
				_, events := generateOracle(t, r, p, Drafting{})
				st = events[len(events)-1]
				t.Logf("paying: drafted %d in %d steps, accepted %d, drafting %v (%q)", st.Drafted, st.Steps, st.Accepted, st.Drafting, st.DraftOff)
			}
			handed, skipped = r.target.m.CaptureCounts()
			t.Logf("paying: %d chunks captured, %d paused", handed, skipped)
			if !st.Drafting || st.Accepted == 0 {
				t.Errorf("a cheap draft: drafting %v (%q), accepted %d", st.Drafting, st.DraftOff, st.Accepted)
			}
		})
	}
}
