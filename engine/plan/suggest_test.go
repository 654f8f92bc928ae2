package plan

import (
	"strings"
	"testing"

	"github.com/tandem-run/tandem/engine/plan/plantest"
	"github.com/tandem-run/tandem/kernels/quant"
)

// changed names what a suggestion changes, by the command line's flags.
func changed(c Change) []string {
	var out []string
	for _, f := range []struct {
		flag string
		set  bool
	}{
		{"kv-type", c.KV != nil}, {"ctx", c.Ctx > 0}, {"ratios", c.Ratios != nil}, {"head", c.Head != ""},
		{"split", c.Split != ""}, {"draft-devices", c.DraftDevices != nil}, {"borrow", c.Borrow != ""},
	} {
		if f.set {
			out = append(out, f.flag)
		}
	}
	return out
}

// checkSuggestions: the plan does not fit, and each suggestion, its change
// applied to the input and planned again, gives a plan that fits.
func checkSuggestions(t *testing.T, in Input, want ...string) *Plan {
	t.Helper()
	p := mustMake(t, in)
	if p.Fits {
		t.Fatal("the plan fits; the test needs one that does not")
	}
	found := map[string]bool{}
	for _, s := range p.Suggestions {
		for _, k := range changed(s.Change) {
			found[k] = true
		}
		q := mustMake(t, s.Change.Apply(in))
		if !q.Fits || !s.Plan.Fits {
			t.Errorf("suggestion %q (%+v) does not fit", s.Text, s.Change)
		}
	}
	for _, w := range want {
		if !found[w] {
			t.Errorf("no suggestion changes --%s; got %+v", w, p.Suggestions)
		}
	}
	for _, s := range p.Suggestions {
		if kv := s.Plan.KV; !kv.RunsOnAll(in.Resolve().modelDevices()) {
			t.Errorf("suggestion %q: a %v cache, which the devices do not run", s.Text, kv)
		}
	}
	return p
}

func TestSuggestionsFit(t *testing.T) {
	f16 := open(t, plantest.Qwen3_8B(quant.F16))
	q4 := plantest.Qwen3_8B(quant.Q4_K)
	q4f := open(t, q4)
	two12 := inventory(t, "2x12GB.json")
	for _, tc := range []struct {
		name string
		in   Input
		want []string
	}{
		// 16 GB of weights and 9 GB of KV on two 12 GB cards: only a
		// smaller cache or context helps.
		{"big context", Input{Target: f16, Devices: two12, Ctx: 65536, Batch: 512, KV: SameKV(quant.F16),
			TargetPlacement: Placement{Devices: []int{0, 1}}}, []string{"kv-type", "ctx"}},
		{"big context on CPUs", Input{Target: f16, Devices: cpus(2, 12e9), Ctx: 65536, Batch: 512, KV: SameKV(quant.F16),
			TargetPlacement: Placement{Devices: []int{0, 1}}}, []string{"kv-type", "ctx"}},
		{"lopsided ratios", Input{Target: f16, Devices: two12, Ctx: 4096, Batch: 512, KV: SameKV(quant.F16),
			TargetPlacement: Placement{Devices: []int{0, 1}, Ratios: []float64{4, 1}}}, []string{"ratios"}},
		{"replicated head", Input{Target: f16, Devices: two12, Ctx: 35840, Batch: 512, KV: SameKV(quant.F16),
			TargetPlacement: Placement{Devices: []int{0, 1}, Split: SplitTensor, Head: HeadReplicated}}, []string{"head"}},
		{"draft on a full device", Input{Target: q4f, Draft: open(t, plantest.Llama1B(quant.Q8_0)), Devices: cpus(3, 4<<30),
			Ctx: 4096, Batch: 512, KV: SameKV(quant.F16),
			TargetPlacement: Placement{Devices: []int{0, 1}}, DraftPlacement: Placement{Devices: []int{1}}}, []string{"draft-devices"}},
		{"copied head", Input{Target: q4f, Draft: open(t, plantest.Eagle3(q4)), Devices: cpus(3, 4800<<20),
			Ctx: 4096, Batch: 512, KV: SameKV(quant.F16),
			TargetPlacement: Placement{Devices: []int{0, 1}}, DraftPlacement: Placement{Devices: []int{1}, Borrow: BorrowCopy}}, []string{"borrow"}},
	} {
		t.Run(tc.name, func(t *testing.T) { checkSuggestions(t, tc.in, tc.want...) })
	}
}

func TestNoSuggestionForHopelessPlan(t *testing.T) {
	p := mustMake(t, Input{Target: open(t, plantest.Blocks100()), Devices: inventory(t, "1x24GB.json"),
		Ctx: 4096, Batch: 512, KV: SameKV(quant.F16), TargetPlacement: Placement{Devices: []int{0}}})
	if p.Fits || len(p.Suggestions) != 0 {
		t.Errorf("a 60 GB model on one 24 GB card: fits %v, %d suggestions", p.Fits, len(p.Suggestions))
	}
	if v := p.Devices[0].Verdict(); !strings.HasPrefix(v, "over by ") {
		t.Errorf("verdict %q", v)
	}
}
