package plan

import (
	"slices"
	"testing"

	"github.com/tandem-run/tandem/engine/plan/plantest"
	"github.com/tandem-run/tandem/kernels/quant"
)

// The layout of the first bug report: a draft alone on GPU 0 while the
// target spans GPUs 3-10 by layers (llama.cpp aborts: the draft's graph
// meets output.weight in another GPU's buffer).
func TestDraftAloneOnGPU0TargetOnGPUs3To10(t *testing.T) {
	target := plantest.Blocks100()
	tf := open(t, target)
	devs := inventory(t, "11x24GB.json")
	in := Input{Target: tf, Devices: devs, Ctx: 8192, Batch: 512, KV: SameKV(quant.F16),
		TargetPlacement: Placement{Devices: seq(3, 11)}, DraftPlacement: Placement{Devices: []int{0}}}

	t.Run("own head", func(t *testing.T) {
		in := in
		in.Draft = open(t, plantest.Llama1B(quant.Q8_0))
		p := mustMake(t, in)
		checkSpread(t, p)
		if b := budgetFor(t, p, 10); b.Role() != "target" {
			t.Errorf("GPU 10 is %s, want target only", b.Role())
		}
		if p.Borrow != nil {
			t.Error("a draft with its own head has a borrow report")
		}
	})

	eagle := open(t, plantest.Eagle3(target))
	in.Draft = eagle
	inPlace := mustMake(t, in)
	checkSpread(t, inPlace)
	in.DraftPlacement.Borrow = BorrowCopy
	copied := mustMake(t, in)
	checkSpread(t, copied)

	// Where the target keeps them: the draft's logits are made on GPU 10,
	// beside the target's head, and embedding rows come from GPU 3.
	if h := inPlace.Draft.HeadRun; len(h) != 1 || h[0].Device != 10 {
		t.Errorf("the draft's head runs on %v, want GPU 10", h)
	}
	if e := inPlace.Draft.EmbeddingRun; len(e) != 1 || e[0].Device != 3 {
		t.Errorf("the draft's lookups run on %v, want GPU 3", e)
	}
	if got, want := bufferBytes(inPlace.Draft.Buffers, RoleLogits, 10), int64(128256*512*4); got != want {
		t.Errorf("draft logits on GPU 10: %d bytes, want %d", got, want)
	}
	if b := budgetFor(t, inPlace, 10); b.Role() != "both" {
		t.Errorf("GPU 10 is %s, want both", b.Role())
	}
	for _, d := range []int{0, 10} {
		if bufferBytes(inPlace.Draft.Buffers, RoleReceive, d) != 8192*512*4 {
			t.Errorf("GPU %d has no receive buffer of 8192 x 512 floats for the draft", d)
		}
	}

	// Copied: the draft holds the target's embedding and head on GPU 0 and
	// nothing on GPU 10.
	emb, _ := tf.Tensor("token_embd.weight")
	head, _ := tf.Tensor("output.weight")
	before, after := budgetFor(t, inPlace, 0).Draft, budgetFor(t, copied, 0).Draft
	if got := weightsOf(after) - weightsOf(before); got != emb.Bytes+head.Bytes {
		t.Errorf("copying adds %d bytes of weights on GPU 0, want %d", got, emb.Bytes+head.Bytes)
	}
	if b := budgetFor(t, copied, 10); b.Draft.Total() != 0 {
		t.Errorf("copied: the draft still uses %d bytes on GPU 10", b.Draft.Total())
	}

	// Both ways are offered, with their costs, whichever was chosen.
	for _, p := range []*Plan{inPlace, copied} {
		r := p.Borrow
		if r == nil || len(r.Options) != 2 || r.Bytes != emb.Bytes+head.Bytes || !slices.Equal(r.Tensors, []string{"token_embd.weight", "output.weight"}) {
			t.Fatalf("borrow report %+v", r)
		}
		if r.Options[0].Draft[10] == 0 || r.Options[1].Draft[10] != 0 || r.Options[1].Draft[0]-r.Options[0].Draft[0] <= emb.Bytes+head.Bytes-8192*512*4 {
			t.Errorf("options %+v do not show the costs per GPU", r.Options)
		}
	}
}

// checkSpread: every GPU fits, the target is on GPUs 3-10 only, in whole
// blocks of 12 or 13, the draft's own tensors on GPU 0 only, each GPU pays
// one CUDA context, and GPUs 1 and 2 are unused.
func checkSpread(t *testing.T, p *Plan) {
	t.Helper()
	if !p.Fits {
		t.Errorf("does not fit: %+v", p.Devices)
	}
	count := map[int]int{}
	for _, d := range p.Target.BlockDevice {
		count[d]++
	}
	for d := 3; d <= 10; d++ {
		if count[d] < 12 || count[d] > 13 {
			t.Errorf("GPU %d has %d blocks, want 12 or 13", d, count[d])
		}
	}
	for _, pt := range p.Target.Tensors {
		for _, s := range pt.Shards {
			if s.Device < 3 {
				t.Errorf("target tensor %s on GPU %d", pt.Name, s.Device)
			}
		}
	}
	for _, pt := range p.Draft.Tensors {
		for _, s := range pt.Shards {
			if s.Device != 0 {
				t.Errorf("draft tensor %s on GPU %d", pt.Name, s.Device)
			}
		}
	}
	var used []int
	for _, b := range p.Devices {
		used = append(used, b.Device.Index)
		if b.Overhead != CUDAContextBytes {
			t.Errorf("GPU %d overhead %d, want one CUDA context", b.Device.Index, b.Overhead)
		}
	}
	if !slices.Equal(used, []int{0, 3, 4, 5, 6, 7, 8, 9, 10}) {
		t.Errorf("devices in use %v", used)
	}
	if b := budgetFor(t, p, 0); b.Role() != "draft" {
		t.Errorf("GPU 0 is %s, want draft", b.Role())
	}
}

// The second bug report's layout: a target on two 12 GB cards by tensor
// split, with a head-sharing draft; head split against head replicated.
func TestTensorSplitTwo12GBHeadSharingDraft(t *testing.T) {
	target := plantest.Qwen3_8B(quant.Q4_K)
	tf := open(t, target)
	in := Input{Target: tf, Draft: open(t, plantest.Eagle3(target)), Devices: inventory(t, "2x12GB.json"),
		Ctx: 8192, Batch: 512, KV: SameKV(quant.F16),
		TargetPlacement: Placement{Devices: []int{0, 1}, Ratios: []float64{1, 1}, Split: SplitTensor, Head: HeadSplit},
		DraftPlacement:  Placement{Devices: []int{0}}}
	split := mustMake(t, in)
	in.TargetPlacement.Head = HeadReplicated
	replicated := mustMake(t, in)
	checkShards(t, split.Target.Tensors)
	checkShards(t, replicated.Target.Tensors)

	head, _ := tf.Tensor("output.weight")
	rowBytes, _ := head.Type.RowBytes(4096)
	const vocab = 151936
	var rows int64
	for i, d := range []int{0, 1} {
		h := split.Target.HeadRun[i]
		rows += h.Rows.Len()
		if h.Device != d || h.Rows.Len() != vocab/2 {
			t.Errorf("head shard %d: %+v, want half the vocabulary on GPU %d", i, h, d)
		}
		// The difference per GPU is the other GPU's head rows.
		s, r := budgetFor(t, split, d), budgetFor(t, replicated, d)
		if got, want := r.Target.Head-s.Target.Head, head.Bytes-h.Rows.Len()*rowBytes; got != want {
			t.Errorf("GPU %d: replicating the head costs %d more bytes, want %d", d, got, want)
		}
		// With the head split, the draft's logits are made on both GPUs and
		// merged; replicated, the draft uses GPU 0's copy.
		if got, want := bufferBytes(split.Draft.Buffers, RoleLogits, d), h.Rows.Len()*512*4; got != want {
			t.Errorf("head split: draft logits on GPU %d are %d bytes, want %d", d, got, want)
		}
	}
	if rows != vocab {
		t.Errorf("head rows add up to %d, want %d", rows, vocab)
	}
	// Each plan offers the three head modes with their totals per GPU.
	opts := map[HeadMode]HeadOption{}
	for _, o := range split.Heads {
		opts[o.Mode] = o
	}
	for _, d := range []int{0, 1} {
		if len(opts) != 3 || opts[HeadReplicated].Totals[d] != budgetFor(t, replicated, d).Total() || opts[HeadSplit].Totals[d] != budgetFor(t, split, d).Total() {
			t.Errorf("GPU %d: head options %+v disagree with the plans", d, split.Heads)
		}
	}
	if h := replicated.Draft.HeadRun; len(h) != 1 || h[0].Device != 0 || h[0].Rows.Len() != vocab {
		t.Errorf("replicated: the draft's head runs on %+v, want all rows on GPU 0", h)
	}
	if b := budgetFor(t, replicated, 1); b.Draft.Total() != 0 {
		t.Errorf("replicated: the draft uses %d bytes on GPU 1", b.Draft.Total())
	}
	for _, p := range []*Plan{split, replicated} {
		if !p.Fits {
			t.Errorf("head %s: does not fit two 12 GB cards: %+v", p.Target.Placement.Head, p.Devices)
		}
		for _, b := range p.Devices {
			if b.Role() != "both" && b.Device.Index == 0 {
				t.Errorf("GPU 0 is %s, want both", b.Role())
			}
		}
	}
}

// The executor's seed layout: a target by tensor split over two devices and
// the draft on a third, on CPU virtual devices.
func TestTensorSplitDraftOnThirdDevice(t *testing.T) {
	target := plantest.Qwen3_8B(quant.Q8_0)
	in := Input{Target: open(t, target), Draft: open(t, plantest.Eagle3(target)), Devices: cpus(3, 64<<30),
		Ctx: 4096, Batch: 256, KV: SameKV(quant.F16),
		TargetPlacement: Placement{Devices: []int{0, 1}, Split: SplitTensor},
		DraftPlacement:  Placement{Devices: []int{2}}}
	p := mustMake(t, in)
	if !p.Fits || len(p.Devices) != 3 {
		t.Fatalf("fits %v on %d devices", p.Fits, len(p.Devices))
	}
	for _, b := range p.Devices {
		if b.Overhead != 0 {
			t.Errorf("virtual CPU device %d has overhead %d", b.Device.Index, b.Overhead)
		}
	}
	// The draft's hidden states go to both head shards; its embedding rows
	// come from device 0; the target's features arrive on device 2.
	if got := holderDevices(p.Draft.HeadRun); !slices.Equal(got, []int{0, 1}) {
		t.Errorf("draft head runs on %v", got)
	}
	if got, want := bufferBytes(p.Draft.Buffers, RoleFeatures, 2), int64(3*4096*256*4); got != want {
		t.Errorf("features buffer %d bytes, want %d", got, want)
	}
	if b := budgetFor(t, p, 2); b.Role() != "draft" || b.Target.Total() != 0 {
		t.Errorf("device 2 is %s with %d target bytes", b.Role(), b.Target.Total())
	}
}

// An EAGLE-3 draft of a tied target borrows one tensor for both jobs, and a
// copy of it is made once.
func TestEagle3OfTiedTarget(t *testing.T) {
	target := plantest.Llama1B(quant.Q8_0)
	tf := open(t, target)
	in := Input{Target: tf, Draft: open(t, plantest.Eagle3(target)), Devices: cpus(2, 8<<30), Ctx: 4096, Batch: 128, KV: SameKV(quant.F16),
		TargetPlacement: Placement{Devices: []int{0}}, DraftPlacement: Placement{Devices: []int{1}, Borrow: BorrowCopy}}
	p := mustMake(t, in)
	emb, _ := tf.Tensor("token_embd.weight")
	if !slices.Equal(p.Draft.Borrowed, []string{"token_embd.weight"}) || !p.Draft.Shape.Tied {
		t.Errorf("borrowed %v, tied %v", p.Draft.Borrowed, p.Draft.Shape.Tied)
	}
	var copies int
	for _, pt := range p.Draft.Tensors {
		if pt.File == Target {
			copies++
			if pt.Bytes() != emb.Bytes || pt.Shards[0].Device != 1 || pt.Class != ClassHead {
				t.Errorf("copy %s: %d bytes on %d, class %s", pt.Name, pt.Bytes(), pt.Shards[0].Device, pt.Class)
			}
		}
	}
	if copies != 1 {
		t.Errorf("%d copies of target tensors, want 1", copies)
	}
	in.DraftPlacement.Borrow = BorrowInPlace
	p = mustMake(t, in)
	if h, e := p.Draft.HeadRun, p.Draft.EmbeddingRun; len(h) != 1 || h[0].Device != 0 || len(e) != 1 || e[0].Device != 0 {
		t.Errorf("in place: head on %v, lookups on %v; want device 0", h, e)
	}
}
