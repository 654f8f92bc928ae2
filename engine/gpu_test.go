package engine

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/tandem-run/tandem/engine/device"
	"github.com/tandem-run/tandem/engine/plan"
	"github.com/tandem-run/tandem/engine/sample"
	"github.com/tandem-run/tandem/kernels/cuda"
)

// On a real GPU the process's memory, as the driver reports it, is the
// plan's total for the device: the weights, caches and scratch the backend
// allocates from the plan plus the CUDA context. packaging/gpu-engine.sh
// samples nvidia-smi while this runs and compares with the line it prints.
func TestGPUMemoryMatchesPlan(t *testing.T) {
	if *backend != "cuda" {
		t.Skip("needs -engine.backend=cuda")
	}
	gpu := []device.Device{{Index: 0, Name: "GPU 0", MemoryTotal: 140 << 30, MemoryFree: 140 << 30, Kind: device.CUDA}}
	r := load(t, Config{
		Target: modelPath(t, "factory-target-F16.gguf"), Draft: modelPath(t, "factory-draft-Q8_0.gguf"),
		Placement: &Placement{Devices: gpu, Target: plan.Placement{Devices: []int{0}}, Draft: plan.Placement{Devices: []int{0}}},
	})
	planned := r.Plan().Devices[0]
	report := func(when string) {
		held := r.DeviceUsage()[0].Total()
		line := fmt.Sprintf("GPUMEM %s: plan %d bytes (%d allocations + %d context), backend holds %d", when,
			planned.Total(), planned.Total()-plan.Overhead(gpu[0]), plan.Overhead(gpu[0]), held)
		t.Log(line)
		fmt.Fprintln(os.Stderr, line)
		time.Sleep(time.Second) // let the sampler see this state
	}
	report("after load")
	st, err := r.Generate(context.Background(), Request{Prompt: "In the beginning", MaxTokens: 1800, IgnoreEOS: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("generated %d tokens at %.0f tok/s (drafted %d, accepted %d)", st.GeneratedTokens, st.DecodeTokS(), st.Drafted, st.Accepted)
	report("after a long generation")
}

// On two real GPUs, a target split over both by layers and by tensors holds
// on each what the plan says: the backend's accounting within 3% of the
// plan's allocations, checked here, and the process's memory on each GPU as
// nvidia-smi sees it against the plan's total with the CUDA context, which
// packaging/multigpu.sh samples while this sleeps after printing its
// GPUMEM lines. The target is -engine.bench-model (default: the placement
// tests' target); run one layout per process so that each GPU's peak
// belongs to one plan.
func TestGPUMemoryPlacedMatchesPlan(t *testing.T) {
	if *backend != "cuda" {
		t.Skip("needs -engine.backend=cuda")
	}
	infos, err := cuda.Devices()
	if err != nil || len(infos) < 2 {
		t.Skipf("needs two GPUs: %d found (%v)", len(infos), err)
	}
	target := *benchModel
	if target == "" {
		target = placedTargetPath(t)
	}
	var gpus []device.Device
	for _, info := range infos[:2] {
		gpus = append(gpus, device.Device{Index: info.Ordinal, Name: info.Name, Kind: device.CUDA, MemoryTotal: uint64(info.TotalMemory)})
	}
	for _, tc := range []struct {
		name string
		tp   plan.Placement
	}{
		{"layer", plan.Placement{Devices: []int{0, 1}}},
		{"tensor", plan.Placement{Devices: []int{0, 1}, Split: plan.SplitTensor, Head: plan.HeadSplit}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// llama-bench's context for pp512 and tg128, so its peaks compare.
			r := load(t, Config{Target: target, Context: 640, Batch: 512, Placement: &Placement{Devices: gpus, Target: tc.tp}})
			report := func(when string) {
				held := r.DeviceUsage()
				for _, b := range r.Plan().Devices {
					overhead := plan.Overhead(b.Device)
					got, want := held[b.Device.Index].Total(), b.Total()-overhead
					line := fmt.Sprintf("GPUMEM %s gpu %d %s: plan %d bytes (%d allocations + %d context), backend holds %d",
						tc.name, b.Device.Index, when, b.Total(), want, overhead, got)
					t.Log(line)
					fmt.Fprintln(os.Stderr, line)
					if d := float64(got-want) / float64(want); d < -0.03 || d > 0.03 {
						t.Errorf("GPU %d holds %d bytes, plan %d", b.Device.Index, got, want)
					}
				}
				time.Sleep(2 * time.Second) // let the sampler see this state
			}
			report("after load")
			// One token, then a full batch and some decode steps, which
			// touch every scratch buffer.
			rng := rand.New(rand.NewPCG(1, 2))
			tokens := make([]int32, r.Plan().Batch)
			for i := range tokens {
				tokens[i] = int32(rng.IntN(r.Info().Target.VocabSize))
			}
			if _, err := r.Forward(context.Background(), tokens[:1], 0, nil); err != nil {
				t.Fatal(err)
			}
			report("after one token")
			if _, err := r.Forward(context.Background(), tokens, 0, nil); err != nil {
				t.Fatal(err)
			}
			for i := range 16 {
				if _, err := r.Forward(context.Background(), tokens[i:i+1], len(tokens)+i, nil); err != nil {
					t.Fatal(err)
				}
			}
			report("after a batch and 16 steps")
		})
	}
}

// The oracle's teacher-forced check on the backend under test: over every
// prompt and its reference continuation, the F16 target's top-1 at each
// position is the reference's and its reference logits are within 2e-3 of
// the largest. engine/model's TestOracleTeacherForced makes the same check
// on the CPU; this one runs where -engine.backend puts the model (the GPU
// machine runs it with cuda).
func TestOracleTeacherForcedOnBackend(t *testing.T) {
	if *backend == "cpu" {
		t.Skip("engine/model's TestOracleTeacherForced covers the CPU")
	}
	r := load(t, Config{Target: modelPath(t, "factory-target-F16.gguf"), Context: 256})
	worst := 0.0
	for pi, p := range loadOracle(t) {
		seq := append(slices.Clone(p.IDs), p.Target.Greedy...)
		ref := p.Target.Teacher
		if len(ref.TopIDs) != len(seq) {
			t.Fatalf("prompt %d: %d reference positions for %d tokens", pi, len(ref.TopIDs), len(seq))
		}
		rows := make([]int, len(seq))
		for i := range rows {
			rows[i] = i
		}
		logits, err := r.Forward(context.Background(), seq, 0, rows)
		if err != nil {
			t.Fatal(err)
		}
		vocab := len(logits) / len(rows)
		for pos := range seq {
			row := logits[pos*vocab : (pos+1)*vocab]
			scale := 0.0
			for _, v := range ref.TopLogits[pos] {
				scale = max(scale, math.Abs(v))
			}
			if got, want := sample.Argmax(row), ref.TopIDs[pos][0]; got != want {
				t.Errorf("prompt %d position %d: top-1 %d, reference %d", pi, pos, got, want)
			}
			for j, id := range ref.TopIDs[pos] {
				d := math.Abs(float64(row[id])-ref.TopLogits[pos][j]) / scale
				worst = max(worst, d)
				if d > 2e-3 {
					t.Errorf("prompt %d position %d: logit of %d = %.5f, reference %.5f", pi, pos, id, row[id], ref.TopLogits[pos][j])
				}
			}
		}
	}
	t.Logf("largest logit error on %s: %.2e of the largest reference logit", *backend, worst)
}
