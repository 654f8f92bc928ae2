package plan

import (
	"strconv"
	"strings"
	"testing"

	"github.com/tandem-run/tandem/engine/plan/plantest"
	"github.com/tandem-run/tandem/kernels/quant"
)

// apply makes the changes of a suggestion as the command line would.
func apply(t *testing.T, in Input, changes map[string]string) Input {
	t.Helper()
	ints := func(v string) []int {
		var out []int
		for _, f := range strings.Split(v, ",") {
			n, err := strconv.Atoi(f)
			if err != nil {
				t.Fatalf("change %q: %v", v, err)
			}
			out = append(out, n)
		}
		return out
	}
	for k, v := range changes {
		switch k {
		case "kv-type":
			typ, err := quant.ParseType(strings.ToUpper(v))
			if err != nil {
				t.Fatal(err)
			}
			in.KVType = typ
		case "ctx":
			in.Ctx = ints(v)[0]
		case "ratios":
			in.TargetPlacement.Ratios = nil
			for _, n := range ints(v) {
				in.TargetPlacement.Ratios = append(in.TargetPlacement.Ratios, float64(n))
			}
		case "head":
			in.TargetPlacement.Head = HeadMode(v)
		case "split":
			in.TargetPlacement.Split = Split(v)
		case "draft-devices":
			in.DraftPlacement = Placement{Devices: ints(v), Borrow: in.DraftPlacement.Borrow}
		case "borrow":
			in.DraftPlacement.Borrow = Borrow(v)
		default:
			t.Fatalf("suggestion changes unknown flag %q", k)
		}
	}
	return in
}

// checkSuggestions: the plan does not fit, and each suggestion, applied as
// its flags say, gives a plan that fits.
func checkSuggestions(t *testing.T, in Input, want ...string) *Plan {
	t.Helper()
	p := mustMake(t, in)
	if p.Fits {
		t.Fatal("the plan fits; the test needs one that does not")
	}
	found := map[string]bool{}
	for _, s := range p.Suggestions {
		for k := range s.Changes {
			found[k] = true
		}
		q := mustMake(t, apply(t, in, s.Changes))
		if !q.Fits || !s.Plan.Fits {
			t.Errorf("suggestion %q (%v) does not fit", s.Text, s.Changes)
		}
	}
	for _, w := range want {
		if !found[w] {
			t.Errorf("no suggestion changes --%s; got %+v", w, p.Suggestions)
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
		{"big context", Input{Target: f16, Devices: two12, Ctx: 65536, Batch: 512, KVType: quant.F16,
			TargetPlacement: Placement{Devices: []int{0, 1}}}, []string{"kv-type", "ctx"}},
		{"lopsided ratios", Input{Target: f16, Devices: two12, Ctx: 4096, Batch: 512, KVType: quant.F16,
			TargetPlacement: Placement{Devices: []int{0, 1}, Ratios: []float64{4, 1}}}, []string{"ratios"}},
		{"replicated head", Input{Target: f16, Devices: two12, Ctx: 32768, Batch: 512, KVType: quant.F16,
			TargetPlacement: Placement{Devices: []int{0, 1}, Split: SplitTensor, Head: HeadReplicated}}, []string{"head"}},
		{"draft on a full device", Input{Target: q4f, Draft: open(t, plantest.Llama1B(quant.Q8_0)), Devices: cpus(3, 4<<30),
			Ctx: 4096, Batch: 512, KVType: quant.F16,
			TargetPlacement: Placement{Devices: []int{0, 1}}, DraftPlacement: Placement{Devices: []int{1}}}, []string{"draft-devices"}},
		{"copied head", Input{Target: q4f, Draft: open(t, plantest.Eagle3(q4)), Devices: cpus(3, 4800<<20),
			Ctx: 4096, Batch: 512, KVType: quant.F16,
			TargetPlacement: Placement{Devices: []int{0, 1}}, DraftPlacement: Placement{Devices: []int{1}, Borrow: BorrowCopy}}, []string{"borrow"}},
	} {
		t.Run(tc.name, func(t *testing.T) { checkSuggestions(t, tc.in, tc.want...) })
	}
}

func TestNoSuggestionForHopelessPlan(t *testing.T) {
	p := mustMake(t, Input{Target: open(t, plantest.Blocks100()), Devices: inventory(t, "1x24GB.json"),
		Ctx: 4096, Batch: 512, KVType: quant.F16, TargetPlacement: Placement{Devices: []int{0}}})
	if p.Fits || len(p.Suggestions) != 0 {
		t.Errorf("a 60 GB model on one 24 GB card: fits %v, %d suggestions", p.Fits, len(p.Suggestions))
	}
	if v := p.Devices[0].Verdict(); !strings.HasPrefix(v, "over by ") {
		t.Errorf("verdict %q", v)
	}
}
