package plan

import (
	"github.com/tandem-run/tandem/engine/device"
	"slices"
	"testing"

	"github.com/tandem-run/tandem/engine/gguf"
	"github.com/tandem-run/tandem/kernels/quant"
	"github.com/tandem-run/tandem/kernels/sharedtest"
)

func openShared(t *testing.T, name string) *gguf.File {
	t.Helper()
	f, err := gguf.Open(sharedtest.Path(t, "models", name))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// The demo pair as the executor will run it on CPU virtual devices: the
// target by layers over two devices, its EAGLE-3 draft on a third.
func TestDemoPairWithEagle3(t *testing.T) {
	target := openShared(t, "factory-target-Q4_K_M.gguf")
	draft := openShared(t, "factory-eagle3-F16.gguf")
	for _, mode := range []Borrow{BorrowInPlace, BorrowCopy} {
		p := mustMake(t, Input{Target: target, Draft: draft, Devices: cpus(3, 1<<30), Ctx: 2048, Batch: 64, KV: SameKV(quant.F16),
			TargetPlacement: Placement{Devices: []int{0, 1}, Ratios: []float64{3, 1}},
			DraftPlacement:  Placement{Devices: []int{2}, Borrow: mode}})
		checkShards(t, p.Target.Tensors)
		checkShards(t, p.Draft.Tensors)
		if !slices.Equal(p.Draft.Borrowed, []string{"token_embd.weight", "output.weight"}) {
			t.Errorf("borrowed %v", p.Draft.Borrowed)
		}
		tAll, _, _, _ := fileBytes(target)
		dAll, _, _, _ := fileBytes(draft)
		emb, _ := target.Tensor("token_embd.weight")
		head, _ := target.Tensor("output.weight")
		want := dAll
		if mode == BorrowCopy {
			want += emb.Bytes + head.Bytes
		}
		if got := sumUsage(p, Target, weightsOf); got != tAll {
			t.Errorf("%s: target weights %d, want the file's %d", mode, got, tAll)
		}
		if got := sumUsage(p, Draft, weightsOf); got != want {
			t.Errorf("%s: draft weights %d, want %d", mode, got, want)
		}
		if got := p.Target.BlockDevice; !slices.Equal(got, []int{0, 0, 0, 0, 0, 0, 1, 1}) {
			t.Errorf("blocks on %v, want 6 on device 0 and 2 on device 1", got)
		}
		// One draft block: K and V of 2 heads of 64 for 2048 positions, f16.
		if got := sumUsage(p, Draft, func(u Usage) int64 { return u.KV }); got != 2*2048*2*64*2 {
			t.Errorf("%s: draft KV %d bytes", mode, got)
		}
		if !p.Fits {
			t.Errorf("%s: the demo pair does not fit 1 GiB devices", mode)
		}
	}
}

// A classic draft (the llama demo draft, tied head) has everything it needs.
func TestDemoPairWithClassicDraft(t *testing.T) {
	target := openShared(t, "factory-target-F16.gguf")
	draft := openShared(t, "factory-draft-Q8_0.gguf")
	p := mustMake(t, Input{Target: target, Draft: draft, Devices: cpus(2, 1<<30), Ctx: 1024, Batch: 32, KV: SameKV(quant.Q8_0),
		TargetPlacement: Placement{Devices: []int{0}}, DraftPlacement: Placement{Devices: []int{1}}})
	if p.Borrow != nil || len(p.Draft.Borrowed) != 0 || !p.Draft.Shape.Tied {
		t.Errorf("classic draft: borrow %+v, borrowed %v, tied %v", p.Borrow, p.Draft.Borrowed, p.Draft.Shape.Tied)
	}
	dAll, _, _, _ := fileBytes(draft)
	if got := sumUsage(p, Draft, weightsOf); got != dAll {
		t.Errorf("draft weights %d, want %d", got, dAll)
	}
	if b := budgetFor(t, p, 1); b.Role() != "draft" || b.Draft.Head == 0 {
		t.Errorf("device 1: role %s, draft head %d bytes", b.Role(), b.Draft.Head)
	}
}

// With parallel sequences the target holds a KV cache of the context for
// each; its draft model does too on CPUs, where a batch drafts, and keeps
// one where either model is on a GPU, whose batches are not drafted.
func TestParallelDraftSlots(t *testing.T) {
	target := openShared(t, "factory-target-Q4_K_M.gguf")
	draft := openShared(t, "factory-draft-Q8_0.gguf")
	const ctx, parallel = 256, 8
	// A token of the draft's cache: 2 blocks, K and V of 2 heads of 64, F16.
	const draftToken = 2 * 2 * 2 * 64 * 2
	gpu := device.Device{Index: 1, Name: "GPU 1", Kind: device.CUDA, MemoryTotal: 1 << 32, MemoryFree: 1 << 32}
	devs := append(cpus(1, 1<<32), gpu)
	for _, tc := range []struct {
		name          string
		target, draft int // devices
		draftSlots    int64
		onGPU         bool
	}{
		{"both on the CPU", 0, 0, parallel, false},
		{"both on the GPU", 1, 1, 1, true},
		{"target on the GPU", 1, 0, 1, true},
		{"draft on the GPU", 0, 1, 1, true},
	} {
		tp, dp := Placement{Devices: []int{tc.target}}, Placement{Devices: []int{tc.draft}}
		p := mustMake(t, Input{Target: target, Draft: draft, Devices: devs, Ctx: ctx, Batch: 64, KV: SameKV(quant.F16),
			Parallel: parallel, TargetPlacement: tp, DraftPlacement: dp})
		if got, want := sumUsage(p, Draft, func(u Usage) int64 { return u.KV }), tc.draftSlots*ctx*draftToken; got != want {
			t.Errorf("%s: the draft's KV is %d bytes, want %d (%d slots)", tc.name, got, want, tc.draftSlots)
		}
		single := mustMake(t, Input{Target: target, Devices: devs, Ctx: ctx, Batch: 64, KV: SameKV(quant.F16), TargetPlacement: tp})
		if got, want := sumUsage(p, Target, func(u Usage) int64 { return u.KV }), parallel*sumUsage(single, Target, func(u Usage) int64 { return u.KV }); got != want {
			t.Errorf("%s: the target's KV is %d bytes, want %d", tc.name, got, want)
		}
		if got := BatchOnGPU(devs, tp, dp); got != tc.onGPU {
			t.Errorf("%s: BatchOnGPU = %v", tc.name, got)
		}
	}
}
