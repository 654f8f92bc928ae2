package plan

import (
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/tandem-run/tandem/engine/gguf"
	"github.com/tandem-run/tandem/engine/plan/plantest"
	"github.com/tandem-run/tandem/kernels/quant"
)

// fileBytes sums the file's tensors, and separately the one-dimensional block
// tensors (the norms a tensor split mirrors) and the head with its norm.
func fileBytes(f *gguf.File) (all, blockNorms, head, headNorm int64) {
	headName := nameHead
	if _, ok := f.Tensor(nameHead); !ok {
		headName = nameEmbd
	}
	for _, t := range f.Tensors {
		all += t.Bytes
		switch {
		case strings.HasPrefix(t.Name, "blk.") && len(t.Dims) == 1:
			blockNorms += t.Bytes
		case t.Name == headName:
			head = t.Bytes
		case t.Name == nameHeadNorm:
			headNorm = t.Bytes
		}
	}
	return
}

// The weights on all devices add up to the file's tensor bytes, plus the
// copies a placement asks for: mirrored norms in a tensor split, the head's
// norm beside every head shard, and a whole head per extra replica.
func TestWeightBytesMatchFile(t *testing.T) {
	qwen := open(t, plantest.Qwen3_8B(quant.Q4_K))
	qwenF16 := open(t, plantest.Qwen3_8B(quant.F16))
	tied := open(t, plantest.Llama1B(quant.Q8_0))
	devs := cpus(4, 1<<40)
	for _, tc := range []struct {
		name  string
		f     *gguf.File
		place Placement
	}{
		{"one device", qwen, Placement{Devices: []int{0}}},
		{"layer 3 uneven", qwen, Placement{Devices: []int{0, 1, 2}, Ratios: []float64{5, 2, 1}}},
		{"layer head on first", qwen, Placement{Devices: []int{2, 0, 1}, Head: HeadSingle, HeadDevice: 2}},
		{"layer head replicated", qwen, Placement{Devices: []int{0, 1, 2, 3}, Head: HeadReplicated}},
		{"layer head split", qwen, Placement{Devices: []int{0, 1, 2}, Head: HeadSplit}},
		{"tensor 2", qwen, Placement{Devices: []int{0, 1}, Split: SplitTensor}},
		{"tensor 3 uneven", qwenF16, Placement{Devices: []int{0, 1, 3}, Split: SplitTensor, Ratios: []float64{1, 2, 3}}},
		{"tensor 4 replicated", qwen, Placement{Devices: []int{0, 1, 2, 3}, Split: SplitTensor, Head: HeadReplicated}},
		{"tied layer", tied, Placement{Devices: []int{0, 1}}},
		{"tied tensor split head", tied, Placement{Devices: []int{0, 1, 2}, Split: SplitTensor}},
		{"tied replicated", tied, Placement{Devices: []int{0, 1}, Head: HeadReplicated}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := mustMake(t, Input{Target: tc.f, Devices: devs, TargetPlacement: tc.place, Ctx: 4096, Batch: 512, KV: SameKV(quant.F16)})
			all, norms, head, headNorm := fileBytes(tc.f)
			n := int64(len(tc.place.Devices))
			want := all
			if tc.place.Split == SplitTensor {
				want += (n - 1) * norms
			}
			switch p.Target.Placement.Head {
			case HeadReplicated:
				want += (n - 1) * (head + headNorm)
			case HeadSplit:
				want += (n - 1) * headNorm
			}
			if got := sumUsage(p, Target, weightsOf); got != want {
				t.Errorf("weights on all devices = %d, want %d (file %d)", got, want, all)
			}
			checkShards(t, p.Target.Tensors)
			if !p.Fits || len(p.Suggestions) != 0 {
				t.Errorf("fits %v with %d suggestions on 1 TiB devices", p.Fits, len(p.Suggestions))
			}
		})
	}
}

// checkShards checks every tensor's shards: whole copies on distinct
// devices, or ranges that tile one dimension exactly, bytes adding up.
func checkShards(t *testing.T, tensors []Tensor) {
	t.Helper()
	for i := range tensors {
		pt := &tensors[i]
		var full int64 = 1
		for _, d := range pt.Dims {
			full *= d
		}
		fullBytes, err := pt.Type.RowBytes(pt.Dims[0])
		if err != nil {
			t.Fatal(err)
		}
		fullBytes *= full / pt.Dims[0]
		seen := map[int]bool{}
		allWhole := true
		for _, s := range pt.Shards {
			if seen[s.Device] {
				t.Errorf("%s: two shards on device %d", pt.Name, s.Device)
			}
			seen[s.Device] = true
			allWhole = allWhole && s.Whole(pt)
		}
		if allWhole {
			for _, s := range pt.Shards {
				if s.Bytes != fullBytes {
					t.Errorf("%s: whole copy of %d bytes, want %d", pt.Name, s.Bytes, fullBytes)
				}
			}
			continue
		}
		shards := slices.Clone(pt.Shards)
		slices.SortFunc(shards, func(a, b Shard) int { return int(a.Lo - b.Lo) })
		var next, bytes int64
		for _, s := range shards {
			if s.Dim != shards[0].Dim || s.Lo != next || s.Hi < s.Lo {
				t.Errorf("%s: shard %+v does not continue at %d along dim %d", pt.Name, s, next, shards[0].Dim)
			}
			next, bytes = s.Hi, bytes+s.Bytes
		}
		if next != pt.Dims[shards[0].Dim] || bytes != fullBytes {
			t.Errorf("%s: shards cover %d of %d and %d of %d bytes", pt.Name, next, pt.Dims[shards[0].Dim], bytes, fullBytes)
		}
	}
}

// A split head's rows add up to the vocabulary, follow the ratios, and each
// shard device has logits for exactly its rows.
func TestSplitHeadRows(t *testing.T) {
	f := open(t, plantest.Qwen3_8B(quant.Q4_K))
	for _, ratios := range [][]float64{{1, 1}, {3, 1}, {1, 2, 3, 4}} {
		devs := seq(0, len(ratios))
		p := mustMake(t, Input{Target: f, Devices: cpus(4, 1<<40), Ctx: 1024, Batch: 64, KV: SameKV(quant.F16),
			TargetPlacement: Placement{Devices: devs, Ratios: ratios, Split: SplitTensor}})
		var rows int64
		var sum float64
		for _, r := range ratios {
			sum += r
		}
		for i, h := range p.Target.HeadRun {
			rows += h.Rows.Len()
			if want := 151936 * ratios[i] / sum; math.Abs(float64(h.Rows.Len())-want) > 1 {
				t.Errorf("ratios %v: device %d has %d rows, want about %.0f", ratios, h.Device, h.Rows.Len(), want)
			}
			logits := bufferBytes(p.Target.Buffers, RoleLogits, h.Device)
			if logits != h.Rows.Len()*64*4 {
				t.Errorf("ratios %v: device %d logits %d bytes, want %d rows x 64 x 4", ratios, h.Device, logits, h.Rows.Len())
			}
		}
		if rows != 151936 {
			t.Errorf("ratios %v: head rows add up to %d, want the vocabulary 151936", ratios, rows)
		}
	}
}

func bufferBytes(bs []Buffer, role BufferRole, dev int) int64 {
	var n int64
	for _, b := range bs {
		if b.Role == role && b.Device == dev {
			n += b.Bytes
		}
	}
	return n
}

// KV bytes follow n_ctx x blocks x kv_heads x head_dim x type size, for K and
// V, each in its own type; a tensor split divides them by KV heads.
func TestKVBytes(t *testing.T) {
	f := open(t, plantest.Qwen3_8B(quant.Q4_K)) // 36 blocks, 8 KV heads of 128 (GQA 4:1)
	for _, tc := range []struct {
		kv    quant.Type
		v     quant.Type // V's type when it differs
		place Placement
	}{
		{quant.F16, 0, Placement{Devices: []int{0}}},
		{quant.Q8_0, 0, Placement{Devices: []int{0, 1, 2}, Ratios: []float64{1, 1, 2}}},
		{quant.Q4_0, 0, Placement{Devices: []int{0}}},
		{quant.Q8_0, quant.Q4_0, Placement{Devices: []int{0, 1}}},
		{quant.F32, 0, Placement{Devices: []int{0, 1}, Split: SplitTensor}},
		{quant.Q8_0, 0, Placement{Devices: []int{0, 1, 2}, Split: SplitTensor, Ratios: []float64{2, 1, 1}}},
	} {
		const ctx = 10000
		kv := SameKV(tc.kv)
		if tc.v != 0 {
			kv.V = tc.v
		}
		p := mustMake(t, Input{Target: f, Devices: cpus(3, 1<<40), TargetPlacement: tc.place, Ctx: ctx, Batch: 512, KV: kv})
		want := int64(ctx * 36 * 8 * 128 * (elemBytes(kv.K) + elemBytes(kv.V)))
		if got := sumUsage(p, Target, func(u Usage) int64 { return u.KV }); got != want {
			t.Errorf("%v %s: KV %d bytes, want %d", tc.kv, tc.place.Split, got, want)
		}
		if tc.place.Split != SplitTensor {
			continue
		}
		for i, d := range tc.place.Devices {
			heads := p.Target.KVHeads[0][i].Len()
			want := int64(ctx * 36 * heads * 128 * 2 * int64(tc.kv.TypeSize()) / int64(tc.kv.BlockSize()))
			if got := budgetFor(t, p, d).Target.KV; got != want {
				t.Errorf("%v tensor split: device %d with %d KV heads holds %d bytes of KV, want %d", tc.kv, d, heads, got, want)
			}
		}
		if got := p.Target.KVHeads[0]; len(got) == 3 && (got[0].Len() != 4 || got[1].Len() != 2 || got[2].Len() != 2) {
			t.Errorf("ratios 2:1:1 over 8 KV heads gave %v", got)
		}
	}
}

func budgetFor(t *testing.T, p *Plan, d int) Budget {
	t.Helper()
	b, ok := budgetOf(p, d)
	if !ok {
		t.Fatalf("device %d is not in the plan", d)
	}
	return b
}

// Layer split: whole blocks by ratio, in device order.
func TestLayerSplitBlocks(t *testing.T) {
	f := open(t, plantest.Blocks100())
	p := mustMake(t, Input{Target: f, Devices: cpus(3, 1<<40), Ctx: 4096, Batch: 512, KV: SameKV(quant.F16),
		TargetPlacement: Placement{Devices: []int{2, 0, 1}, Ratios: []float64{2, 1, 1}}})
	count := map[int]int{}
	for b, d := range p.Target.BlockDevice {
		count[d]++
		if b > 0 && d != p.Target.BlockDevice[b-1] && slices.Index([]int{2, 0, 1}, d) < slices.Index([]int{2, 0, 1}, p.Target.BlockDevice[b-1]) {
			t.Errorf("block %d goes back to device %d", b, d)
		}
	}
	if count[2] != 50 || count[0] != 25 || count[1] != 25 {
		t.Errorf("blocks per device %v, want 2:50 0:25 1:25", count)
	}
	for _, pt := range p.Target.Tensors {
		if pt.Block >= 0 && (len(pt.Shards) != 1 || pt.Shards[0].Device != p.Target.BlockDevice[pt.Block]) {
			t.Errorf("%s is not whole on its block's device", pt.Name)
		}
	}
	// The head is on the last device, the embedding on the first; the
	// devices after a boundary, and the head's, receive activations.
	if h := p.Target.HeadRun; len(h) != 1 || h[0].Device != 1 {
		t.Errorf("head runs on %v, want device 1", h)
	}
	for _, d := range []int{0, 1} {
		if bufferBytes(p.Target.Buffers, RoleReceive, d) == 0 {
			t.Errorf("device %d receives no activations", d)
		}
	}
	if bufferBytes(p.Target.Buffers, RoleReceive, 2) != 0 {
		t.Error("the first device receives activations")
	}
}

func TestMakeIsDeterministic(t *testing.T) {
	f := open(t, plantest.Qwen3_8B(quant.Q4_K))
	d := open(t, plantest.Eagle3(plantest.Qwen3_8B(quant.Q4_K)))
	in := Input{Target: f, Draft: d, Devices: inventory(t, "2x12GB.json"), Ctx: 32768, Batch: 512, KV: SameKV(quant.F16),
		TargetPlacement: Placement{Devices: []int{0, 1}, Split: SplitTensor}, DraftPlacement: Placement{Devices: []int{0}}}
	a, b := mustMake(t, in), mustMake(t, in)
	if !reflect.DeepEqual(a, b) {
		t.Error("two plans of one input differ")
	}
}

func TestShardFileRange(t *testing.T) {
	f := open(t, plantest.Qwen3_8B(quant.Q4_K))
	p := mustMake(t, Input{Target: f, Devices: cpus(2, 1<<40), Ctx: 1024, Batch: 64, KV: SameKV(quant.F16),
		TargetPlacement: Placement{Devices: []int{0, 1}, Split: SplitTensor}})
	for _, pt := range p.Target.Tensors {
		info, _ := f.Tensor(pt.Name)
		for _, s := range pt.Shards {
			off, n, ok := s.FileRange(&pt)
			switch {
			case s.Dim == 0 && len(pt.Dims) > 1:
				if ok {
					t.Errorf("%s: a column cut has a file range", pt.Name)
				}
			case !ok || off < 0 || off+n > info.Bytes || n != s.Bytes:
				t.Errorf("%s shard %+v: file range %d+%d of %d", pt.Name, s, off, n, info.Bytes)
			case s.Hi == pt.Dims[s.Dim] && off+n != info.Bytes:
				t.Errorf("%s: the last rows end at %d, not at the tensor's end %d", pt.Name, off+n, info.Bytes)
			}
		}
	}
}

func TestBadInput(t *testing.T) {
	f := open(t, plantest.Qwen3_8B(quant.Q4_K))
	odd := plantest.Qwen3_8B(quant.Q4_K)
	odd.Heads, odd.KVHeads, odd.HeadDim, odd.Embd = 12, 4, 64, 512 // 192-column KV groups vs blocks of 256
	oddF := open(t, odd)
	small := plantest.Qwen3_8B(quant.F16)
	small.HeadDim, small.Heads, small.KVHeads = 20, 4, 1 // 20 values per token: not q8_0 blocks
	smallF := open(t, small)
	eagle := plantest.Eagle3(plantest.Qwen3_8B(quant.Q4_K))
	eagle.TargetLayers = []int32{2, 40}
	eagleF := open(t, eagle)
	noHead := open(t, plantest.Eagle3(plantest.Qwen3_8B(quant.Q4_K)))
	narrow := open(t, plantest.Eagle3(plantest.Llama1B(quant.Q4_K)))
	devs := cpus(3, 1<<40)
	base := Input{Target: f, Devices: devs, Ctx: 4096, Batch: 512, KV: SameKV(quant.F16), TargetPlacement: Placement{Devices: []int{0, 1}}}
	for _, tc := range []struct {
		name string
		edit func(*Input)
		want string
	}{
		{"no target", func(in *Input) { in.Target = nil }, "no target"},
		{"no devices", func(in *Input) { in.Devices, in.TargetPlacement.Devices = nil, nil }, "no devices"},
		{"unknown device", func(in *Input) { in.TargetPlacement.Devices = []int{0, 7} }, "not in the inventory"},
		{"device twice", func(in *Input) { in.TargetPlacement.Devices = []int{1, 1} }, "twice"},
		{"ratio count", func(in *Input) { in.TargetPlacement.Ratios = []float64{1} }, "1 ratios for 2 devices"},
		{"zero ratio", func(in *Input) { in.TargetPlacement.Ratios = []float64{1, 0} }, "positive"},
		{"NaN ratio", func(in *Input) { in.TargetPlacement.Ratios = []float64{1, math.NaN()} }, "positive"},
		{"bad split", func(in *Input) { in.TargetPlacement.Split = "rows" }, "split"},
		{"bad head", func(in *Input) { in.TargetPlacement.Head = "both" }, "head"},
		{"head device elsewhere", func(in *Input) { in.TargetPlacement.Head, in.TargetPlacement.HeadDevice = HeadSingle, 2 }, "head device 2"},
		{"huge ctx", func(in *Input) { in.Ctx = 1 << 25 }, "context size"},
		{"kv type", func(in *Input) { in.KV = SameKV(quant.Q4_K) }, "KV cache"},
		{"kv type a device cannot run", func(in *Input) {
			in.Devices = slices.Clone(devs)
			in.Devices[1].Kind = "rocm" // a backend with no cache table
			in.KV = KVTypes{K: quant.Q8_0, V: quant.F16}
		}, "KV cache cannot run on"},
		{"empty device", func(in *Input) {
			in.TargetPlacement.Devices, in.TargetPlacement.Ratios = []int{0, 1, 2}, []float64{1000, 1, 1}
		}, "gets none of the 36 blocks"},
		{"columns off blocks", func(in *Input) { in.Target, in.TargetPlacement.Split = oddF, SplitTensor }, "do not fall on its blocks of 256"},
		{"q8_0 odd heads", func(in *Input) { in.Target, in.KV = smallF, SameKV(quant.Q8_0) }, "KV type Q8_0"},
		{"draft reads missing block", func(in *Input) { in.Draft, in.DraftPlacement.Devices = eagleF, []int{2} }, "target block 40"},
		{"eagle3 as target", func(in *Input) { in.Target = noHead }, "no token_embd.weight"},
		{"draft of another width", func(in *Input) { in.Draft, in.DraftPlacement.Devices = narrow, []int{2} }, "width 4096, but its hidden size is 2048"},
		{"bad borrow", func(in *Input) {
			in.Draft, in.DraftPlacement = noHead, Placement{Devices: []int{2}, Borrow: "share"}
		}, "borrow"},
	} {
		in := base
		in.TargetPlacement.Devices = slices.Clone(base.TargetPlacement.Devices)
		tc.edit(&in)
		_, err := Make(in)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "plan: ") {
			t.Errorf("%s: error %v, want one mentioning %q", tc.name, err, tc.want)
		}
	}
}

// Resolve applies each default once: the trained context capped at 4096,
// a batch of 512 capped at the context, the target on every device and
// the draft on the target's last.
func TestResolve(t *testing.T) {
	short := plantest.Qwen3_8B(quant.Q4_K)
	short.ContextLength = 1000
	long := plantest.Qwen3_8B(quant.Q4_K)
	long.ContextLength = 40960
	shortF, longF := open(t, short), open(t, long)
	devs := cpus(3, 1<<40)
	for _, tc := range []struct {
		name             string
		in               Input
		ctx, batch       int
		target, draftDev []int
	}{
		{"short-trained", Input{Target: shortF, Devices: devs}, 1000, 512, []int{0, 1, 2}, nil},
		{"long-trained", Input{Target: longF, Devices: devs}, 4096, 512, []int{0, 1, 2}, nil},
		{"small context", Input{Target: longF, Devices: devs, Ctx: 256}, 256, 256, []int{0, 1, 2}, nil},
		{"batch over context", Input{Target: longF, Devices: devs, Ctx: 256, Batch: 1024}, 256, 256, []int{0, 1, 2}, nil},
		{"draft", Input{Target: longF, Draft: shortF, Devices: devs, TargetPlacement: Placement{Devices: []int{2, 0}}}, 4096, 512, []int{2, 0}, []int{0}},
	} {
		r := tc.in.Resolve()
		if r.Ctx != tc.ctx || r.Batch != tc.batch || !slices.Equal(r.TargetPlacement.Devices, tc.target) || !slices.Equal(r.DraftPlacement.Devices, tc.draftDev) {
			t.Errorf("%s: ctx %d batch %d target %v draft %v; want %d %d %v %v", tc.name, r.Ctx, r.Batch,
				r.TargetPlacement.Devices, r.DraftPlacement.Devices, tc.ctx, tc.batch, tc.target, tc.draftDev)
		}
	}
}

func TestVerdict(t *testing.T) {
	b := Budget{Capacity: 3 << 30, Target: Usage{Weights: 2 << 30}, Overhead: 512 << 20}
	if !b.Fits() || b.Verdict() != "fits, 512 MiB spare" {
		t.Errorf("verdict %q", b.Verdict())
	}
	b.Target.KV = 1 << 30
	if b.Fits() || b.Verdict() != "over by 512 MiB" || b.Role() != "target" {
		t.Errorf("verdict %q, role %s", b.Verdict(), b.Role())
	}
}
