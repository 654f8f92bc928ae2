package model

import (
	"context"
	"errors"
	"math"
	"slices"
	"testing"

	"github.com/tandem-run/tandem/engine/device"
	"github.com/tandem-run/tandem/engine/gguf"
	"github.com/tandem-run/tandem/engine/plan"
	"github.com/tandem-run/tandem/kernels"
	"github.com/tandem-run/tandem/kernels/cpu"
	"github.com/tandem-run/tandem/kernels/quant"
	"github.com/tandem-run/tandem/kernels/sharedtest"
)

// A placed target hands over the same block inputs as one device: the
// embedding (block 0), a block that starts a device's run, one inside it,
// and the final state, in chunks of the batch.
func TestPlacedCaptureIsTheModels(t *testing.T) {
	seq := demoSequence(t)
	layers := []int{0, 2, 5, 8}
	width := len(layers) * 384
	var want []float32
	var one *Model
	one = openModel(t, "factory-target-F16.gguf", Options{Context: 128, Batch: 16, CaptureLayers: layers,
		OnCapture: func(pos int, hidden kernels.Tensor) error {
			host := make([]float32, hidden.Elements())
			if err := one.be.Read(kernels.F32Bytes(host), hidden); err != nil {
				return err
			}
			want = append(want[:pos*width], host...)
			return nil
		}})
	if _, err := one.Forward(context.Background(), seq, 0, nil); err != nil {
		t.Fatal(err)
	}
	for _, l := range []placedLayout{placedLayouts[0], placedLayouts[1], placedLayouts[3], placedLayouts[6]} {
		t.Run(l.name, func(t *testing.T) {
			r := placeModel(t, "factory-target-F16.gguf", "cpu:1GiB,cpu:1GiB,cpu:1GiB", l.placement(), 128, 16)
			var got []float32
			var starts []int
			err := r.m.Capture(layers, func(pos int, hidden []float32) error {
				starts = append(starts, pos)
				got = append(got[:pos*width], hidden...)
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := r.m.Forward(context.Background(), seq, 0, nil); err != nil {
				t.Fatal(err)
			}
			var chunks []int
			for c := 0; c < len(seq); c += 16 {
				chunks = append(chunks, c)
			}
			if len(got) != len(want) || !slices.Equal(starts, chunks) {
				t.Fatalf("captured %d values in chunks at %v, want %d in chunks of 16", len(got), starts, len(want))
			}
			var worst, scale float64
			for i := range want {
				scale = max(scale, math.Abs(float64(want[i])))
				worst = max(worst, math.Abs(float64(got[i]-want[i])))
			}
			t.Logf("largest difference from one device: %.2e of the largest state", worst/scale)
			if worst > 1e-5*scale {
				t.Errorf("captured states depart from one device's by %.2e of the largest", worst/scale)
			}
		})
	}
}

// placedEagle3 is the demo target placed by tp and its EAGLE-3 draft on a
// device of its own, borrowing as the plan says.
func placedEagle3(t *testing.T, tp plan.Placement, borrow plan.Borrow) (*Placed, *Eagle3) {
	t.Helper()
	target, load := placedEagle3Rig(t, tp, plan.Placement{Devices: []int{2}, Borrow: borrow})
	var draft *Eagle3
	ep, err := ReadEagle3Params(load.df)
	if err != nil {
		t.Fatal(err)
	}
	if err := target.Capture(ep.TargetLayers, func(pos int, h []float32) error { return draft.EncodeHost(context.Background(), pos, h) }); err != nil {
		t.Fatal(err)
	}
	if draft, err = load.draft(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := draft.Close(); err != nil {
			t.Error(err)
		}
	})
	return target, draft
}

// eagle3Load loads the draft of a planned pair.
type eagle3Load struct {
	tf, df   *gguf.File
	p        *plan.Plan
	target   *Placed
	backends map[int]kernels.Backend
}

func (l eagle3Load) draft() (*Eagle3, error) {
	return LoadEagle3Placed(context.Background(), l.df, l.tf, l.p, l.p.Draft, l.target, l.backends, nil)
}

// placedEagle3Rig plans the demo target and EAGLE-3 draft on three CPU
// virtual devices and loads the target.
func placedEagle3Rig(t *testing.T, tp, dp plan.Placement) (*Placed, eagle3Load) {
	t.Helper()
	open := func(name string) *gguf.File {
		f, err := gguf.Open(sharedtest.Path(t, "models", name))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		return f
	}
	tf, df := open("factory-target-F16.gguf"), open("factory-eagle3-F16.gguf")
	inv, err := device.ParseVirtual("cpu:256MiB,cpu:256MiB,cpu:256MiB")
	if err != nil {
		t.Fatal(err)
	}
	p, err := plan.Make(plan.Input{Target: tf, Draft: df, Devices: inv.Devices, TargetPlacement: tp,
		DraftPlacement: dp, Ctx: 128, Batch: 16, KVType: quant.F32})
	if err != nil {
		t.Fatal(err)
	}
	backends := map[int]kernels.Backend{}
	for _, d := range inv.Devices {
		be := cpu.New(cpu.Options{Threads: 2, MemoryLimit: int64(d.Capacity())})
		backends[d.Index] = be
		t.Cleanup(func() { be.Close() })
	}
	target, err := LoadPlaced(context.Background(), tf, p, &p.Target, backends, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { target.Close() })
	return target, eagle3Load{tf: tf, df: df, p: p, target: target, backends: backends}
}

// A placed draft is refused, with nothing left allocated, when the target
// does not capture the blocks it reads or when the plan spreads it over
// two devices.
func TestPlacedEagle3Refused(t *testing.T) {
	layers := plan.Placement{Devices: []int{0, 1}, Ratios: []float64{1, 3}}
	for _, tc := range []struct {
		name    string
		tp, dp  plan.Placement
		capture []int
		want    error
	}{
		{"no capture", layers, plan.Placement{Devices: []int{2}}, nil, ErrBadParam},
		{"other blocks captured", layers, plan.Placement{Devices: []int{2}}, []int{2, 4}, ErrBadParam},
		{"draft by tensors on two devices", plan.Placement{Devices: []int{0}}, plan.Placement{Devices: []int{1, 2}, Split: plan.SplitTensor}, []int{2, 4, 5}, ErrUnsupported},
	} {
		t.Run(tc.name, func(t *testing.T) {
			target, load := placedEagle3Rig(t, tc.tp, tc.dp)
			if err := target.Capture(tc.capture, func(int, []float32) error { return nil }); err != nil {
				t.Fatal(err)
			}
			before := map[int]int64{}
			for i, be := range load.backends {
				before[i] = be.Usage().Total()
			}
			d, err := load.draft()
			if !errors.Is(err, tc.want) {
				t.Fatalf("got %v, %v; want %v", d, err, tc.want)
			}
			t.Log(err)
			for i, be := range load.backends {
				if n := be.Usage().Total(); n != before[i] {
					t.Errorf("device %d holds %d bytes after the refusal, %d before", i, n, before[i])
				}
			}
		})
	}
}

// The placed draft's logits are the one-device draft's, wherever its
// borrowed head runs; its top token merged from the shards of a head
// split by vocabulary is the argmax of those logits, with their softmax
// probability.
func TestPlacedEagle3Drafts(t *testing.T) {
	seq := demoSequence(t)
	n, drafted := 20, []int32{seq[21], seq[22], 7}
	ref, err := loadEagle3Pair(t, demoEagle3(t), 16, Eagle3Options{Batch: 16})
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
