package plan

import (
	"strings"
	"testing"

	"github.com/dustin/go-humanize"
	"github.com/tandem-run/tandem/engine/device"
	"github.com/tandem-run/tandem/engine/plan/plantest"
	"github.com/tandem-run/tandem/kernels/cuda/workspace"
	"github.com/tandem-run/tandem/kernels/quant"
)

// moeBytes adds up the routed experts and routers of m's header, by hand
// from its shape: what keeping them apart moves.
func moeBytes(t *testing.T, m plantest.Model) int64 {
	t.Helper()
	row := func(n int64, q quant.Type) int64 {
		b, err := q.RowBytes(n)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	e := int64(m.Experts)
	per := row(m.Embd, quant.F32)*e + 2*row(m.Embd, m.Weights)*m.ExpertFFN*e + row(m.ExpertFFN, m.Down)*m.Embd*e
	return per * int64(m.Blocks)
}

// Qwen3-30B-A3B at Q4_K on one 12 GB GPU does not fit; the planner
// suggests keeping the experts in the CPU's memory (llama.cpp's --cpu-moe),
// and that plan holds every expert byte on the CPU and none on the GPU.
func TestExpertsOnCPUSuggested(t *testing.T) {
	shape := plantest.Qwen3_30B_A3B(quant.Q4_K)
	f := open(t, shape)
	gpu := inventory(t, "2x12GB.json")[:1]
	host := device.Device{Index: 1, Name: "host memory", Kind: device.CPU, Physical: -1, MemoryTotal: 64 << 30, MemoryFree: 48 << 30}
	in := Input{Target: f, Devices: append(gpu, host), TargetPlacement: Placement{Devices: []int{0}}, Ctx: 8192, KV: SameKV(quant.F16)}
	p := mustMake(t, in)
	experts := moeBytes(t, shape)
	if got := p.Target.ExpertBytes(); got != experts {
		t.Errorf("ExpertBytes %d, the shape's %d", got, experts)
	}
	if p.Fits {
		t.Fatalf("30B-A3B fits a 12 GB GPU: %s", p.Devices[0].Verdict())
	}
	var s *Suggestion
	for i := range p.Suggestions {
		if p.Suggestions[i].Change.ExpertsDevice != nil {
			s = &p.Suggestions[i]
		}
	}
	if s == nil || *s.Change.ExpertsDevice != 1 || !strings.Contains(s.Text, "--cpu-moe") {
		t.Fatalf("suggestions %+v: none keeps the experts on the CPU", p.Suggestions)
	}
	q := s.Plan
	if !q.Fits || len(q.Devices) != 2 || q.Devices[1].Target.Experts != experts || q.Devices[0].Target.Experts != 0 {
		t.Fatalf("with the experts on the CPU: fits %v, devices %+v", q.Fits, q.Devices)
	}
	if weightsOf(q.Devices[1].Target) != 0 || weightsOf(q.Devices[0].Target)+experts != weightsOf(p.Devices[0].Target) {
		t.Errorf("GPU weights %d + experts %d, want the whole model's %d; CPU other weights %d",
			weightsOf(q.Devices[0].Target), experts, weightsOf(p.Devices[0].Target), weightsOf(q.Devices[1].Target))
	}
	for _, b := range q.Devices {
		t.Logf("%s: %s of %s (experts %s)", b.Device.Label(), humanize.IBytes(uint64(b.Total())), humanize.IBytes(uint64(b.Capacity)),
			humanize.IBytes(uint64(b.Target.Experts)))
	}
	t.Logf("suggested: %s", s.Text)
}

// A model without experts gets no such suggestion, and a placement of
// experts apart is refused for it and checked against the devices.
func TestExpertsApartChecks(t *testing.T) {
	f := open(t, plantest.Qwen3_8B(quant.Q4_K))
	devs := append(inventory(t, "2x12GB.json")[:1], device.Device{Index: 1, Kind: device.CPU, MemoryTotal: 8 << 30})
	p := mustMake(t, Input{Target: f, Devices: devs, TargetPlacement: Placement{Devices: []int{0}}, Ctx: 32768})
	for _, s := range p.Suggestions {
		if s.Change.ExpertsDevice != nil {
			t.Errorf("a dense model got %q", s.Text)
		}
	}
	moe := open(t, plantest.Qwen3_30B_A3B(quant.Q4_K))
	for _, c := range []struct {
		f    *plantest.Model
		pl   Placement
		says string
	}{
		{nil, Placement{Devices: []int{0}, Experts: ExpertsOnDevice, ExpertDevice: 1}, "has no routed experts"},
		{&plantest.Model{}, Placement{Devices: []int{0}, Experts: ExpertsOnDevice, ExpertDevice: 5}, "expert device 5 is not in the inventory"},
		{&plantest.Model{}, Placement{Devices: []int{0, 1}, Experts: ExpertsOnDevice, ExpertDevice: 1}, "also one of the model's devices"},
		{&plantest.Model{}, Placement{Devices: []int{0}, Experts: "ram"}, `experts "ram"`},
	} {
		in := Input{Target: f, Devices: devs, TargetPlacement: c.pl, Ctx: 4096}
		if c.f != nil {
			in.Target = moe
		}
		if _, err := Make(in); err == nil || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%+v: %v, want %q", c.pl, err, c.says)
		}
	}
}

// With the experts apart, the GPUs running the blocks reserve no MoE
// scratch of the CUDA backend; a GPU holding the experts does.
func TestExpertsApartWorkspace(t *testing.T) {
	f := open(t, plantest.Qwen3_30B_A3B(quant.Q4_K))
	devs := append(inventory(t, "2x16GB.json"), device.Device{Index: 2, Kind: device.CPU, MemoryTotal: 64 << 30})
	for _, c := range []struct {
		name    string
		blocks  []int
		experts int
		moe     map[int]bool // devices whose workspace has MoE scratch
	}{
		{"with their blocks", []int{0, 1}, -1, map[int]bool{0: true, 1: true}},
		{"on the CPU", []int{0, 1}, 2, map[int]bool{}},
		{"on GPU 1", []int{0}, 1, map[int]bool{1: true}},
	} {
		pl := Placement{Devices: c.blocks}
		if c.experts >= 0 {
			pl.Experts, pl.ExpertDevice = ExpertsOnDevice, c.experts
		}
		p := mustMake(t, Input{Target: f, Devices: devs, TargetPlacement: pl, Ctx: 4096})
		for d := range 3 {
			if got := p.Target.Workspace[d][workspace.MoE] > 0; got != c.moe[d] {
				t.Errorf("experts %s: device %d reserves %d bytes of MoE scratch", c.name, d, p.Target.Workspace[d][workspace.MoE])
			}
		}
	}
}
