package plan

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/tandem-run/tandem/engine/device"
	"github.com/tandem-run/tandem/engine/plan/plantest"
	"github.com/tandem-run/tandem/kernels/quant"
)

// checkRepairs: Make refuses in with an IdleDeviceError for device idle,
// Repairs offers changes whose texts hold each of want, and each change,
// applied to in, plans.
func checkRepairs(t *testing.T, in Input, role Role, idle int, want ...string) []Suggestion {
	t.Helper()
	_, err := Make(in)
	var e *IdleDeviceError
	if !errors.As(err, &e) || e.Role != role || e.Device != idle {
		t.Fatalf("Make: %v, want an idle %s device %d", err, role, idle)
	}
	rs := Repairs(in, err)
	var texts []string
	for _, r := range rs {
		texts = append(texts, r.Text)
		if _, err := Make(r.Change.Apply(in)); err != nil {
			t.Errorf("repair %q (%+v): %v", r.Text, r.Change, err)
		}
	}
	for _, w := range want {
		if !slices.ContainsFunc(texts, func(s string) bool { return strings.Contains(s, w) }) {
			t.Errorf("no repair says %q; got %q", w, texts)
		}
	}
	for i := 1; i < len(rs); i++ {
		if rs[i].Plan.Fits && !rs[i-1].Plan.Fits {
			t.Errorf("repair %q fits but comes after %q, which does not", rs[i].Text, rs[i-1].Text)
		}
	}
	return rs
}

func TestRepairsOfAnIdleDevice(t *testing.T) {
	q4 := open(t, plantest.Qwen3_8B(quant.Q4_K))
	big, small := uint64(64<<30), uint64(1<<30)
	lopsided := []device.Device{
		{Index: 0, Name: "cpu", Kind: device.CPU, Virtual: true, Physical: -1, MemoryTotal: big, MemoryFree: big},
		{Index: 1, Name: "cpu", Kind: device.CPU, Virtual: true, Physical: -1, MemoryTotal: big, MemoryFree: big},
		{Index: 2, Name: "cpu", Kind: device.CPU, Virtual: true, Physical: -1, MemoryTotal: small, MemoryFree: small},
	}
	t.Run("target ratio too low", func(t *testing.T) {
		// 1 part in 101 of 36 blocks rounds to none.
		in := Input{Target: q4, Devices: cpus(2, big), Ctx: 4096,
			TargetPlacement: Placement{Devices: []int{0, 1}, Ratios: []float64{1, 100}}}
		rs := checkRepairs(t, in, Target, 0, "give CPU 0 a 2% share of the target (1 of its 36 blocks)", "leave CPU 0 out of the target's devices")
		if got := rs[0].Change.Ratios; !slices.Equal(got, []float64{2, 98}) {
			t.Errorf("raised ratios %v, want [2 98]", got)
		}
	})
	t.Run("draft over a device with little room", func(t *testing.T) {
		// The draft is spread by free memory: 1 GiB beside 64 GiB is
		// under a sixteenth, none of its 16 blocks.
		in := Input{Target: q4, Draft: open(t, plantest.Llama1B(quant.Q8_0)), Devices: lopsided, Ctx: 4096,
			TargetPlacement: Placement{Devices: []int{0}}, DraftPlacement: Placement{Devices: []int{2, 1}}}
		rs := checkRepairs(t, in, Draft, 2, "run the draft on CPU 1 only", "run the draft on CPU 2 only")
		for _, r := range rs {
			if r.Change.Ratios != nil || r.Change.TargetDevices != nil {
				t.Errorf("repair %q moves the target: %+v", r.Text, r.Change)
			}
		}
	})
	if rs := Repairs(Input{Target: q4}, errors.New("plan: something else")); rs != nil {
		t.Errorf("repairs of another error: %+v", rs)
	}
}

func TestContextSteps(t *testing.T) {
	for _, tc := range []struct {
		ctx, trained, least int
		want                []int
	}{
		{8192, 0, 512, []int{4096, 2048, 1024, 512}},
		{4096, 40960, 512, []int{2048, 1024, 512}},
		// Typed past the trained length: the trained one first, then
		// powers of two, never half of the typed number (24999 once).
		{99999, 2048, 512, []int{2048, 1024, 512}},
		{6000, 0, 512, []int{4096, 2048, 1024, 512}},
		{512, 0, 512, nil},
		{3000, 2048, 1024, []int{2048, 1024}},
	} {
		if got := contextSteps(tc.ctx, tc.trained, tc.least); !slices.Equal(got, tc.want) {
			t.Errorf("contextSteps(%d, %d, %d) = %v, want %v", tc.ctx, tc.trained, tc.least, got, tc.want)
		}
	}
}
