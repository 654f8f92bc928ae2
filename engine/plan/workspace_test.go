package plan

import (
	"path/filepath"
	"testing"

	"github.com/tandem-run/tandem/engine/gguf"
	"github.com/tandem-run/tandem/engine/plan/plantest"
	"github.com/tandem-run/tandem/kernels/cuda/workspace"
	"github.com/tandem-run/tandem/kernels/quant"
)

// Each GPU's budget counts the CUDA backend's workspace for its share of
// the passes: under a tensor split, the integer products' widest input
// and the attention of the device's half of the heads; a draft on the same
// GPU shares the workspace (the larger need of the two, not the sum); a
// model of F16 weights quantizes nothing; CPU devices keep none.
func TestWorkspaceBudget(t *testing.T) {
	target := plantest.Qwen3_8B(quant.Q8_0) // 32 heads of 128, FFN 12288, n_embd 4096
	draft := plantest.Llama1B(quant.F16)    // 32 heads of 64
	const ctx, batch = 4096, 64
	in := Input{Target: open(t, target), Draft: open(t, draft), Devices: inventory(t, "11x24GB.json"),
		Ctx: ctx, Batch: batch, KV: SameKV(quant.F16),
		TargetPlacement: Placement{Devices: []int{0, 1}, Split: SplitTensor},
		DraftPlacement:  Placement{Devices: []int{1}}}
	p := mustMake(t, in)
	half := workspace.For(workspace.Pass{Rows: batch, Keys: ctx, Heads: 16, HeadDim: 128, Quantized: 12288 / 2})
	draftNeeds := workspace.For(workspace.Pass{Rows: batch, Keys: ctx, Heads: 32, HeadDim: 64})
	if draftNeeds[workspace.Q8] != 0 {
		t.Fatalf("an F16 draft quantizes activations: %v", draftNeeds)
	}
	for _, d := range []int{0, 1} {
		b := budgetFor(t, p, d)
		want := half
		if d == 1 {
			want = half.Max(draftNeeds)
		}
		if b.Workspace != want {
			t.Errorf("GPU %d workspace %v, want %v", d, b.Workspace, want)
		}
		sum := b.Target.Total() + b.Draft.Total() + b.Overhead + want.Total()
		if b.Total() != sum {
			t.Errorf("GPU %d total %d, want %d with the workspace", d, b.Total(), sum)
		}
		if c := b.Categories(); c.Scratch != b.Target.Scratch+want.Total() {
			t.Errorf("GPU %d scratch category %d, want the target's %d and the workspace's %d", d, c.Scratch, b.Target.Scratch, want.Total())
		}
	}
	if p.Draft.Workspace[1] != draftNeeds {
		t.Errorf("draft's workspace on GPU 1 %v, want %v", p.Draft.Workspace[1], draftNeeds)
	}

	in.Devices = cpus(2, 64<<30)
	in.DraftPlacement.Devices = []int{1}
	for _, b := range mustMake(t, in).Devices {
		if b.Workspace.Total() != 0 {
			t.Errorf("CPU device %d has a workspace %v", b.Device.Index, b.Workspace)
		}
	}
}

// A mixture-of-experts model's GPU reserves the CUDA backend's MoE scratch
// (routing, and per routed pair its expert activations and output) for the
// batch; the dense models above reserve none.
func TestWorkspaceExperts(t *testing.T) {
	f, err := gguf.Open(filepath.Join("..", "model", "testdata", "qwen3moe-tiny-F16.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	const ctx, batch = 256, 16
	p := mustMake(t, Input{Target: f, Devices: inventory(t, "1x24GB.json"), Ctx: ctx, Batch: batch, KV: SameKV(quant.F16),
		TargetPlacement: Placement{Devices: []int{0}}})
	experts, _ := f.ArchUint("expert_count")
	used, _ := f.ArchUint("expert_used_count")
	gate, _ := f.Tensor("blk.0.ffn_gate_exps.weight")
	embd, _ := f.ArchUint("embedding_length")
	want := workspace.MoEFor(batch, int(used), int(experts), int(embd), int(gate.Dims[1])).Bytes
	if got := budgetFor(t, p, 0).Workspace[workspace.MoE]; got != want || want == 0 {
		t.Errorf("MoE scratch %d bytes, want %d", got, want)
	}
}
