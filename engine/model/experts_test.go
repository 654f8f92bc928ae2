package model

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tandem-run/tandem/engine/device"
	"github.com/tandem-run/tandem/engine/gguf"
	"github.com/tandem-run/tandem/engine/plan"
	"github.com/tandem-run/tandem/kernels"
	"github.com/tandem-run/tandem/kernels/quant"
)

// expertsApart loads the qwen3moe fixture with its experts on CPU virtual
// device 1 and the rest on device 0, a CPU backend without the MoE op (as
// a GPU whose backend lacks it), so that only the expert device can run
// the experts. It returns the plan, the backends and the model.
func expertsApart(t *testing.T, f *gguf.File, ctx, batch int) (*plan.Plan, map[int]kernels.Backend, *Model) {
	t.Helper()
	inv, err := device.ParseVirtual("cpu:512MiB,cpu:512MiB")
	if err != nil {
		t.Fatal(err)
	}
	pl := plan.Placement{Devices: []int{0}, Experts: plan.ExpertsOnDevice, ExpertDevice: 1}
	p, err := plan.Make(plan.Input{Target: f, Devices: inv.Devices, TargetPlacement: pl, Ctx: ctx, Batch: batch, KV: plan.SameKV(quant.F32)})
	if err != nil {
		t.Fatal(err)
	}
	bes := virtualCPUs(t, inv.Devices)
	gpu := bes[0]
	bes[0] = noOp{Backend: gpu, lacks: "moe"}
	m, err := LoadPlan(context.Background(), f, p, &p.Target, bes, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := m.Close(); err != nil {
			t.Error(err)
		}
	})
	bes[0] = gpu
	return p, bes, m
}

func openQwen3MoE(t *testing.T) *gguf.File {
	t.Helper()
	return openGGUF(t, filepath.Join("testdata", "qwen3moe-tiny-F16.gguf"))
}

// TestExpertsApartIsOneDevice: with the experts on their own device, the
// teacher-forced logits of every oracle prompt equal one device's to the
// bit (the same products in the same order, only the rows cross devices),
// and greedy decoding gives transformers' 48 tokens.
func TestExpertsApartIsOneDevice(t *testing.T) {
	f := openQwen3MoE(t)
	_, _, apart := expertsApart(t, f, 256, 64)
	one, o := openFixture(t, "qwen3moe-tiny-F16")
	vocab := one.Params().Vocab
	for pi, p := range o.Prompts {
		seq := append(slices.Clone(p.IDs), p.Greedy...)
		want, err := one.Forward(context.Background(), seq, 0, allRows(len(seq)))
		if err != nil {
			t.Fatal(err)
		}
		want = slices.Clone(want)
		got, err := apart.Forward(context.Background(), seq, 0, allRows(len(seq)))
		if err != nil {
			t.Fatal(err)
		}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("prompt %d position %d id %d: logit %v apart, %v on one device", pi, i/vocab, i%vocab, got[i], want[i])
			}
		}
	}
	for pi, g := range o.Greedy {
		if got := greedyArgmax(t, apart, g.PromptIDs, len(g.GreedyIDs)); !slices.Equal(got, g.GreedyIDs) {
			t.Errorf("prompt %d: greedy %v, transformers %v", pi, got, g.GreedyIDs)
		}
	}
}

// TestExpertsApartUsage checks the plan against the file and against what
// each device holds: the expert device holds every expert tensor and
// router and nothing else of weight, the other device none of them, and
// each device's bytes by category are the plan's, to the byte.
func TestExpertsApartUsage(t *testing.T) {
	f := openQwen3MoE(t)
	p, bes, _ := expertsApart(t, f, 256, 64)
	var experts, rest int64
	for _, ti := range f.Tensors {
		switch {
		case strings.Contains(ti.Name, "_exps.") || strings.Contains(ti.Name, "ffn_gate_inp."):
			experts += ti.Bytes
		default:
			rest += ti.Bytes
		}
	}
	if len(p.Devices) != 2 {
		t.Fatalf("plan uses %d devices, want 2", len(p.Devices))
	}
	gpu, host := p.Devices[0].Target, p.Devices[1].Target
	if r := p.Report(); r.Devices[1].Categories.Experts != experts || r.Devices[0].Categories.Experts != 0 {
		t.Errorf("report: experts %d and %d bytes, want 0 and %d", r.Devices[0].Categories.Experts, r.Devices[1].Categories.Experts, experts)
	}
	if host.Experts != experts || host.Weights+host.Embedding+host.Head != 0 {
		t.Errorf("expert device: experts %d bytes, other weights %d; the file's experts and routers are %d",
			host.Experts, host.Weights+host.Embedding+host.Head, experts)
	}
	if gpu.Experts != 0 || gpu.Weights+gpu.Embedding+gpu.Head != rest {
		t.Errorf("block device: experts %d, weights %d; the file's other tensors are %d", gpu.Experts, gpu.Weights+gpu.Embedding+gpu.Head, rest)
	}
	for _, b := range p.Devices {
		held := bes[b.Device.Index].Usage()
		u := b.Target
		for _, c := range []struct {
			cat  kernels.Category
			want int64
		}{
			{kernels.Weights, u.Weights + u.Experts},
			{kernels.Embedding, u.Embedding},
			{kernels.Head, u.Head},
			{kernels.KV, u.KV},
			{kernels.Scratch, u.Scratch},
		} {
			if got := held[kernels.Label{Owner: "target", Cat: c.cat}]; got != c.want {
				t.Errorf("device %d %v: holds %d bytes, plan %d", b.Device.Index, c.cat, got, c.want)
			}
		}
		t.Logf("device %d (%s): holds %d bytes, plan %d without the context overhead (experts %d)",
			b.Device.Index, b.Device.Label(), held.Total(), u.Total(), u.Experts)
	}
}

// TestExpertsApartRefused: a placement of experts apart is refused for a
// model without experts, and on a device that also runs blocks.
func TestExpertsApartRefused(t *testing.T) {
	inv, err := device.ParseVirtual("cpu:512MiB,cpu:512MiB")
	if err != nil {
		t.Fatal(err)
	}
	f := openQwen3MoE(t)
	_, err = plan.Make(plan.Input{Target: f, Devices: inv.Devices, Ctx: 64,
		TargetPlacement: plan.Placement{Devices: []int{0, 1}, Experts: plan.ExpertsOnDevice, ExpertDevice: 1}})
	if err == nil || !strings.Contains(err.Error(), "expert device 1 is also one of the model's devices") {
		t.Errorf("experts on a block device: %v", err)
	}
	g := openGGUF(t, filepath.Join("testdata", "gemma3-tiny-F16.gguf"))
	_, err = plan.Make(plan.Input{Target: g, Devices: inv.Devices, Ctx: 64,
		TargetPlacement: plan.Placement{Devices: []int{0}, Experts: plan.ExpertsOnDevice, ExpertDevice: 1}})
	if err == nil || !strings.Contains(err.Error(), "has no routed experts") {
		t.Errorf("gemma3 with experts apart: %v", err)
	}
}
