package model

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/tandem-run/tandem/engine/device"
	"github.com/tandem-run/tandem/engine/gguf"
	"github.com/tandem-run/tandem/engine/plan"
	"github.com/tandem-run/tandem/kernels"
	"github.com/tandem-run/tandem/kernels/quant"
	"github.com/tandem-run/tandem/kernels/sharedtest"
)

// captureAll captures layers of m, in chunks, into a buffer on be and
// keeps every chunk's rows on the host: all positions' states, row-major,
// and the position each chunk started at.
func captureAll(t *testing.T, m *Model, be kernels.Backend, layers []int) (*[]float32, *[]int) {
	t.Helper()
	width := len(layers) * m.params.Embd
	buf, err := be.Alloc(kernels.Label{Owner: "test", Cat: kernels.Scratch}, int64(4*m.batch*width))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { be.Free(buf) })
	dst := kernels.NewTensor(buf, quant.F32, m.batch, width, 0)
	var got []float32
	var starts []int
	err = m.Capture(layers, be, dst, func(pos, n int) error {
		host := make([]float32, n*width)
		if err := be.Read(kernels.F32Bytes(host), dst.RowSlice(0, n)); err != nil {
			return err
		}
		starts = append(starts, pos)
		got = append(got[:pos*width], host...)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return &got, &starts
}

// A placed target hands over the same block inputs as one device: the
// embedding (block 0), a block that starts a device's run, one inside it,
// and the final state, in chunks of the batch, into a buffer on a device
// that runs all of them (copied there by the programs) or not (through
// the host).
func TestPlacedCaptureIsTheModels(t *testing.T) {
	seq := demoSequence(t)
	layers := []int{0, 2, 5, 8}
	one := placeModel(t, "factory-target-F16.gguf", "cpu:1GiB", plan.Placement{Devices: []int{0}}, 128, 16)
	wantp, _ := captureAll(t, one.m, one.backends[0], layers)
	if _, err := one.m.Forward(context.Background(), seq, 0, nil); err != nil {
		t.Fatal(err)
	}
	if !one.m.cap.direct {
		t.Error("one device copies the states through the host")
	}
	want := *wantp
	for _, l := range []placedLayout{placedLayouts[0], placedLayouts[1], placedLayouts[3], placedLayouts[6]} {
		for _, to := range []int{0, 2} {
			t.Run(fmt.Sprintf("%s/to device %d", l.name, to), func(t *testing.T) {
				r := placeModel(t, "factory-target-F16.gguf", "cpu:1GiB,cpu:1GiB,cpu:1GiB", l.placement(), 128, 16)
				got, starts := captureAll(t, r.m, r.backends[to], layers)
				if _, err := r.m.Forward(context.Background(), seq, 0, nil); err != nil {
					t.Fatal(err)
				}
				var chunks []int
				for c := 0; c < len(seq); c += 16 {
					chunks = append(chunks, c)
				}
				if len(*got) != len(want) || !slices.Equal(*starts, chunks) {
					t.Fatalf("captured %d values in chunks at %v, want %d in chunks of 16", len(*got), *starts, len(want))
				}
				var worst, scale float64
				for i := range want {
					scale = max(scale, math.Abs(float64(want[i])))
					worst = max(worst, math.Abs(float64((*got)[i]-want[i])))
				}
				t.Logf("largest difference from one device: %.2e of the largest state (direct %v)", worst/scale, r.m.cap.direct)
				if worst > 1e-5*scale {
					t.Errorf("captured states depart from one device's by %.2e of the largest", worst/scale)
				}
			})
		}
	}
}

// placedEagle3 is the demo target placed by tp and its EAGLE-3 draft on a
// device of its own, borrowing as the plan says.
func placedEagle3(t *testing.T, tp plan.Placement, borrow plan.Borrow) (*Model, *Eagle3) {
	t.Helper()
	_, load := placedEagle3Rig(t, tp, plan.Placement{Devices: []int{2}, Borrow: borrow})
	draft, err := load.draft()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := draft.Close(); err != nil {
			t.Error(err)
		}
	})
	return load.target, draft
}

// eagle3Load loads the draft of a planned pair.
type eagle3Load struct {
	tf, df   *gguf.File
	p        *plan.Plan
	target   *Model
	backends map[int]kernels.Backend
}

func (l eagle3Load) draft() (*Eagle3, error) {
	return LoadEagle3(context.Background(), l.df, l.tf, l.p, l.p.Draft, l.target, l.backends, nil)
}

// placedEagle3Rig plans the demo target and EAGLE-3 draft on three CPU
// virtual devices and loads the target.
func placedEagle3Rig(t *testing.T, tp, dp plan.Placement) (*Model, eagle3Load) {
	t.Helper()
	open := func(name string) *gguf.File { return openGGUF(t, sharedtest.Path(t, "models", name)) }
	tf, df := open("factory-target-F16.gguf"), open("factory-eagle3-F16.gguf")
	inv, err := device.ParseVirtual("cpu:256MiB,cpu:256MiB,cpu:256MiB")
	if err != nil {
		t.Fatal(err)
	}
	p, err := plan.Make(plan.Input{Target: tf, Draft: df, Devices: inv.Devices, TargetPlacement: tp,
		DraftPlacement: dp, Ctx: 128, Batch: 16, KV: plan.SameKV(quant.F32)})
	if err != nil {
		t.Fatal(err)
	}
	backends := virtualCPUs(t, inv.Devices)
	target, err := LoadPlan(context.Background(), tf, p, &p.Target, backends, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { target.Close() })
	return target, eagle3Load{tf: tf, df: df, p: p, target: target, backends: backends}
}

// A placed draft is refused, with nothing left allocated, when the plan
// spreads it over two devices.
func TestPlacedEagle3Refused(t *testing.T) {
	target, load := placedEagle3Rig(t, plan.Placement{Devices: []int{0}}, plan.Placement{Devices: []int{1, 2}, Split: plan.SplitTensor})
	before := map[int]int64{}
	for i, be := range load.backends {
		before[i] = be.Usage().Total()
	}
	d, err := load.draft()
	if !errors.Is(err, ErrUnsupported) {
		t.Fatalf("got %v, %v; want %v", d, err, ErrUnsupported)
	}
	t.Log(err)
	for i, be := range load.backends {
		if n := be.Usage().Total(); n != before[i] {
			t.Errorf("device %d holds %d bytes after the refusal, %d before", i, n, before[i])
		}
	}
	if target.cap != nil {
		t.Error("the refused draft left the target capturing")
	}
}

// The placed draft's logits are the one-device draft's, wherever its
// borrowed head runs; its top token merged from the shards of a head
// split by vocabulary is the argmax of those logits, with their softmax
// probability.
func TestPlacedEagle3Drafts(t *testing.T) {
	seq := demoSequence(t)
	n, drafted := 20, []int32{seq[21], seq[22], 7}
	ref, err := loadEagle3Pair(t, demoEagle3(t), 16)
	if err != nil {
		t.Fatal(err)
	}
	want := ref.draftRun(t, seq, n, drafted)
	for _, tc := range []struct {
		name   string
		tp     plan.Placement
		borrow plan.Borrow
	}{
		{"target by layers, head used in place", plan.Placement{Devices: []int{0, 1}, Ratios: []float64{1, 3}}, plan.BorrowInPlace},
		{"target by tensors, head split, used in place", plan.Placement{Devices: []int{0, 1}, Split: plan.SplitTensor, Head: plan.HeadSplit}, plan.BorrowInPlace},
		// The demo's tops here are ids 264 to 528: in the first shard,
		// and in the second with a shard boundary at 256.
		{"target by tensors 1:31, head split, used in place", plan.Placement{Devices: []int{0, 1}, Ratios: []float64{1, 31}, Split: plan.SplitTensor, Head: plan.HeadSplit}, plan.BorrowInPlace},
		{"target by tensors, head split, copied", plan.Placement{Devices: []int{0, 1}, Split: plan.SplitTensor, Head: plan.HeadSplit}, plan.BorrowCopy},
	} {
		t.Run(tc.name, func(t *testing.T) {
			target, draft := placedEagle3(t, tc.tp, tc.borrow)
			ctx := context.Background()
			if _, err := target.Forward(ctx, seq[:n], 0, nil); err != nil {
				t.Fatal(err)
			}
			check := func(i int, logits []float32, top Top) {
				t.Helper()
				scale := math.Abs(float64(want[i][argmax(want[i])]))
				for id := range logits {
					if d := math.Abs(float64(logits[id]-want[i][id])) / scale; d > 1e-4 {
						t.Fatalf("call %d: logit %d is %g, one device %g", i, id, logits[id], want[i][id])
					}
				}
				if w := topOf(logits); top.ID != w.ID || math.Abs(top.P-w.P) > 1e-5 {
					t.Errorf("call %d: top %+v, from the logits %+v", i, top, w)
				}
			}
			// Each call twice: Top, then the logits of the same pass.
			top, err := draft.ForwardTop(ctx, seq[1:n+1], 0)
			if err != nil {
				t.Fatal(err)
			}
			logits, err := draft.readLogits()
			if err != nil {
				t.Fatal(err)
			}
			check(0, logits, top)
			for i, tok := range drafted {
				if top, err = draft.StepTop(ctx, tok, n+i); err != nil {
					t.Fatal(err)
				}
				if logits, err = draft.readLogits(); err != nil {
					t.Fatal(err)
				}
				check(i+1, logits, top)
			}
		})
	}
}
