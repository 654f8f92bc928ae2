package model

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/tandem-run/tandem/engine/device"
	"github.com/tandem-run/tandem/engine/plan"
	"github.com/tandem-run/tandem/kernels"
	"github.com/tandem-run/tandem/kernels/cpu"
	"github.com/tandem-run/tandem/kernels/quant"
	"github.com/tandem-run/tandem/kernels/sharedtest"
)

// placedLayout is one way of spreading a model over CPU virtual devices.
type placedLayout struct {
	name   string
	target bool // only for the target: the draft has 2 blocks, too few for these ratios
	split  plan.Split
	head   plan.HeadMode
	ratios []float64
}

func (l placedLayout) placement() plan.Placement {
	devs := make([]int, len(l.ratios))
	for i := range devs {
		devs[i] = i
	}
	return plan.Placement{Devices: devs, Ratios: l.ratios, Split: l.split, Head: l.head}
}

var placedLayouts = []placedLayout{
	{"layer-2", false, plan.SplitLayer, "", []float64{1, 3}},
	{"layer-3", true, plan.SplitLayer, "", []float64{2, 1, 5}},
	{"layer-3-head-split", false, plan.SplitLayer, plan.HeadSplit, []float64{3, 2, 3}},
	{"tensor-2-head-split", false, plan.SplitTensor, plan.HeadSplit, []float64{1, 1}},
	{"tensor-3-head-split", false, plan.SplitTensor, plan.HeadSplit, []float64{1, 2, 1}},
	{"tensor-2-head-replicated", false, plan.SplitTensor, plan.HeadReplicated, []float64{3, 1}},
	{"tensor-3-head-replicated", false, plan.SplitTensor, plan.HeadReplicated, []float64{1, 1, 1}},
	{"one", false, plan.SplitLayer, "", []float64{1}},
}

// placedRig is a plan and its Placed model on CPU virtual devices.
type placedRig struct {
	plan     *plan.Plan
	backends map[int]kernels.Backend
	m        *Model
}

// placeModel plans file over CPU virtual devices of the given caps with
// placement pl, and loads it if the plan fits (m is nil otherwise).
func placeModel(t testing.TB, file, caps string, pl plan.Placement, ctx, batch int) *placedRig {
	t.Helper()
	return placeModelOn(t, file, caps, pl, ctx, batch, nil)
}

// placeModelOn is placeModel with each device's backend passed through
// wrap (nil: as it is).
func placeModelOn(t testing.TB, file, caps string, pl plan.Placement, ctx, batch int, wrap func(dev int, be kernels.Backend) kernels.Backend) *placedRig {
	t.Helper()
	f := openGGUF(t, sharedtest.Path(t, "models", file))
	inv, err := device.ParseVirtual(caps)
	if err != nil {
		t.Fatal(err)
	}
	p, err := plan.Make(plan.Input{Target: f, Devices: inv.Devices, TargetPlacement: pl,
		Ctx: ctx, Batch: batch, KV: plan.SameKV(quant.F32)})
	if err != nil {
		t.Fatal(err)
	}
	r := &placedRig{plan: p, backends: virtualCPUs(t, inv.Devices)}
	if wrap != nil {
		for i, be := range r.backends {
			r.backends[i] = wrap(i, be)
		}
	}
	r.m, err = LoadPlan(context.Background(), f, p, &p.Target, r.backends, nil)
	if err != nil {
		if !p.Fits && errors.Is(err, ErrBadParam) {
			return r
		}
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := r.m.Close(); err != nil {
			t.Error(err)
		}
	})
	return r
}

// virtualCPUs is a CPU backend for each of devs, by index: two threads,
// the device's capacity as its memory limit, closed when the test ends.
func virtualCPUs(t testing.TB, devs []device.Device) map[int]kernels.Backend {
	bes := map[int]kernels.Backend{}
	for _, d := range devs {
		be := cpu.New(cpu.Options{Name: fmt.Sprintf("cpu%d", d.Index), Threads: 2, MemoryLimit: int64(d.Capacity())})
		t.Cleanup(func() { be.Close() })
		bes[d.Index] = be
	}
	return bes
}

// TestPlacedOracle runs the demo target and draft on every layout and
// compares with the oracle and with one device: teacher-forced top-1 ids
// equal the reference's, logits within 1e-4 of the largest of one device's
// run (tensor split adds shares in another order), the device-side argmax
// and top-k (merged across a split head's shards) are those of the
// gathered logits, and greedy decoding reproduces the reference
// continuation.
func TestPlacedOracle(t *testing.T) {
	o := loadOracle(t)
	greedyLen := 24
	if testing.Short() {
		greedyLen = 8
	}
	for _, tc := range []struct {
		file  string
		draft bool
		ref   func(i int) refRun
	}{
		{"factory-target-F16.gguf", false, func(i int) refRun { return o.Prompts[i].Target }},
		{"factory-draft-F16.gguf", true, func(i int) refRun { return o.Prompts[i].Draft }},
	} {
		one := openModel(t, tc.file, Options{Context: 128})
		vocab := one.Params().Vocab
		want := make([][]float32, len(o.Prompts))
		for pi, p := range o.Prompts {
			seq := append(slices.Clone(p.IDs), tc.ref(pi).Greedy...)
			logits, err := one.Forward(context.Background(), seq, 0, allRows(len(seq)))
			if err != nil {
				t.Fatal(err)
			}
			want[pi] = slices.Clone(logits)
		}
		for _, l := range placedLayouts {
			if tc.draft && l.target {
				continue
			}
			t.Run(tc.file+"/"+l.name, func(t *testing.T) {
				r := placeModel(t, tc.file, "cpu:1GiB,cpu:1GiB,cpu:1GiB", l.placement(), 128, 32)
				var worst float64
				for pi, p := range o.Prompts {
					ref := tc.ref(pi)
					seq := append(slices.Clone(p.IDs), ref.Greedy...)
					logits, err := r.m.Forward(context.Background(), seq, 0, allRows(len(seq)))
					if err != nil {
						t.Fatal(err)
					}
					logits = slices.Clone(logits)
					checkTops(t, r.m, seq, logits)
					for pos := range seq {
						row, one := logits[pos*vocab:(pos+1)*vocab], want[pi][pos*vocab:(pos+1)*vocab]
						if got := argmax(row); got != ref.Teacher.TopIDs[pos][0] {
							t.Errorf("prompt %d pos %d: top-1 %d, reference %d", pi, pos, got, ref.Teacher.TopIDs[pos][0])
						}
						scale := math.Abs(float64(one[argmax(one)]))
						for id := range row {
							worst = max(worst, math.Abs(float64(row[id]-one[id]))/scale)
						}
					}
					got := greedy(t, r.m, p.IDs, greedyLen)
					if !slices.Equal(got, ref.Greedy[:greedyLen]) {
						t.Errorf("prompt %d greedy:\n got %v\nwant %v", pi, got, ref.Greedy[:greedyLen])
					}
				}
				t.Logf("largest logit difference from one device: %.2e of the largest logit", worst)
				if worst > 1e-4 {
					t.Errorf("logits depart from one device's by %.2e of the largest", worst)
				}
			})
		}
	}
}

// checkTops runs seq through m again for every row's argmax and top 7 on
// the devices, and compares them with logits, m's gathered logits of the
// same pass: the argmax of each row (the lowest id on ties) and its seven
// best, lower ids first on ties, with their logits.
func checkTops(t *testing.T, m *Model, seq []int32, logits []float32) {
	t.Helper()
	const k = 7
	vocab := m.Params().Vocab
	ctx := context.Background()
	ids, err := m.ForwardArgmax(ctx, seq, 0, allRows(len(seq)))
	if err != nil {
		t.Fatal(err)
	}
	ids = slices.Clone(ids)
	top, err := m.ForwardTopK(ctx, seq, 0, allRows(len(seq)), k)
	if err != nil {
		t.Fatal(err)
	}
	for pos := range seq {
		row := logits[pos*vocab : (pos+1)*vocab]
		if want := argmax(row); ids[pos] != want {
			t.Errorf("pos %d: device argmax %d, of the logits %d", pos, ids[pos], want)
		}
		for j, want := range topIDs(row, k) {
			if got := top[pos*k+j]; got.ID != want || got.Logit != row[want] {
				t.Errorf("pos %d: top %d is %+v, of the logits %d (%g)", pos, j, got, want, row[want])
			}
		}
	}
}

// TestPlacedQuantized runs the Q8_0 target by layers, which computes
// exactly what one device does, and must decode alike. (A tensor split adds
// partial sums in another order; with Q8_0 activations that can flip the
// rounding of a later block's quantized input, so its logits differ by
// quantization steps rather than float rounding: the F16 layouts above are
// the tensor split's exactness test.)
func TestPlacedQuantized(t *testing.T) {
	o := loadOracle(t)
	one := openModel(t, "factory-target-Q8_0.gguf", Options{Context: 128})
	for _, l := range []placedLayout{placedLayouts[0], placedLayouts[1]} {
		t.Run(l.name, func(t *testing.T) {
			r := placeModel(t, "factory-target-Q8_0.gguf", "cpu:1GiB,cpu:1GiB,cpu:1GiB", l.placement(), 128, 32)
			for _, p := range o.Prompts[:3] {
				want := greedy(t, one, p.IDs, 16)
				if got := greedy(t, r.m, p.IDs, 16); !slices.Equal(got, want) {
					t.Errorf("greedy:\n got %v\nwant %v", got, want)
				}
			}
		})
	}
}

// TestPlacedUsage checks what each device really holds against the plan:
// per device and category, to the byte.
func TestPlacedUsage(t *testing.T) {
	for _, l := range placedLayouts {
		t.Run(l.name, func(t *testing.T) {
			r := placeModel(t, "factory-target-Q8_0.gguf", "cpu:1GiB,cpu:1GiB,cpu:1GiB", l.placement(), 256, 64)
			for _, b := range r.plan.Devices {
				held := r.backends[b.Device.Index].Usage()
				planned := b.Target
				for _, c := range []struct {
					cat       kernels.Category
					want, got int64
				}{
					{kernels.Weights, planned.Weights, 0},
					{kernels.Embedding, planned.Embedding, 0},
					{kernels.Head, planned.Head, 0},
					{kernels.KV, planned.KV, 0},
					{kernels.Scratch, planned.Scratch, 0},
				} {
					got := held[kernels.Label{Owner: "target", Cat: c.cat}]
					if got != c.want {
						t.Errorf("device %d %v: holds %d bytes, plan %d", b.Device.Index, c.cat, got, c.want)
					}
				}
				t.Logf("device %d: holds %d bytes, plan %d (%+.3f%%)", b.Device.Index, held.Total(), b.Total(),
					100*float64(held.Total()-b.Total())/float64(b.Total()))
			}
		})
	}
}

// TestPlacedRefusesOverBudget: a cap too small is the planner's verdict,
// and nothing is allocated on any device.
func TestPlacedRefusesOverBudget(t *testing.T) {
	r := placeModel(t, "factory-target-Q8_0.gguf", "cpu:4MiB,cpu:40MiB", placedLayouts[0].placement(), 256, 64)
	if r.plan.Fits || r.m != nil {
		t.Fatalf("a 4 MiB device took a quarter of a 20 MB model: fits %v", r.plan.Fits)
	}
	for i, be := range r.backends {
		if n := be.Usage().Total(); n != 0 {
			t.Errorf("device %d holds %d bytes after a refused load", i, n)
		}
	}
}
