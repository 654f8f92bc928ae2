package engine

import (
	"context"
	"math"
	"testing"
)

// The target's head computes softmax(logits / T) (model.ForwardProbs, the
// rows a sampled round verifies on a GPU) as the softmax of the logits
// Forward gives, computed here in float64: within a relative 1e-4 of each
// probability (plus 1e-9 for the smallest), each row summing to 1 within
// 1e-5, on every row of a prompt and at three temperatures. On the GPU
// machine: -engine.backend=cuda.
func TestForwardProbsIsTheLogitsSoftmax(t *testing.T) {
	r := load(t, Config{Target: modelPath(t, "factory-target-F16.gguf")})
	m := r.target.m
	if _, ok := m.ProbsDevice(); !ok {
		t.Fatal("the demo target's head is on one device, yet ProbsDevice says no")
	}
	ctx := context.Background()
	prompt := loadOracle(t)[0].IDs
	rows := make([]int, len(prompt))
	for i := range rows {
		rows[i] = i
	}
	logits, err := m.Forward(ctx, prompt, 0, rows)
	if err != nil {
		t.Fatal(err)
	}
	logits = append([]float32(nil), logits...)
	vocab := m.Params().Vocab
	var worst float64
	var dst []float32
	for _, temp := range []float64{0.3, 0.7, 1.5} {
		probs, err := m.ForwardProbs(ctx, prompt, 0, rows, temp, dst)
		if err != nil {
			t.Fatal(err)
		}
		dst = probs
		for r := range rows {
			l, p := logits[r*vocab:(r+1)*vocab], probs[r*vocab:(r+1)*vocab]
			top := math.Inf(-1)
			for _, v := range l {
				top = max(top, float64(v)/temp)
			}
			var sum, got float64
			for _, v := range l {
				sum += math.Exp(float64(v)/temp - top)
			}
			for i, v := range l {
				want := math.Exp(float64(v)/temp-top) / sum
				got += float64(p[i])
				d := math.Abs(float64(p[i]) - want)
				worst = max(worst, d/max(want, 1e-5))
				if d > 1e-4*want+1e-9 {
					t.Fatalf("T=%v row %d token %d: %g, softmax of the logits %g", temp, r, i, p[i], want)
				}
			}
			if math.Abs(got-1) > 1e-5 {
				t.Errorf("T=%v row %d: probabilities sum to %.8f", temp, r, got)
			}
		}
	}
	t.Logf("largest relative error %.2e", worst)
	if _, err := m.ForwardProbs(ctx, prompt, 0, rows, 0, nil); err == nil {
		t.Error("ForwardProbs at temperature 0: no error")
	}
}

// Sampled rounds verified on the head's softmax rows (verifyProbs, and the
// draft's steps drawn from its head's rows: the path a GPU takes, forced
// here on any backend) keep the target's distribution: the first two
// tokens under many seeds at a temperature alone, drafting 3 a round, are
// distributed as the target alone's (a chi-square test of homogeneity),
// for a draft model and for an EAGLE-3 draft with a reduced vocabulary
// (its rows' softmax from ForwardProbsRows).
func TestSampledOnHeadKeepsDistribution(t *testing.T) {
	if testing.Short() {
		t.Skip("18,000 sampled generations")
	}
	target := modelPath(t, "factory-target-F16.gguf")
	sampling := Sampling{Temperature: 0.8}
	alone, _ := sampledPairsAt(t, load(t, Config{Target: target}), sampling, 6000, 1<<32)
	cases := []struct {
		name, draft string
	}{
		{"draft model", modelPath(t, "factory-draft-Q8_0.gguf")},
		{"EAGLE-3 with a reduced vocabulary", eagle3WithD2T(t, target)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			with := load(t, Config{Target: target, Draft: c.draft})
			with.probs = true
			switch d := with.draft.(type) {
			case *modelDrafter:
				d.probs = true
			case *eagle3Drafter:
				d.probs = true
			}
			counts, drafted := sampledPairsAt(t, with, sampling, 6000, 0)
			if drafted == 0 {
				t.Fatal("the draft proposed nothing")
			}
			// Four checks (two drafts, two positions) share a false-alarm
			// rate of 0.01 (Bonferroni).
			sameDistribution(t, counts, alone, 0.01/4)
		})
	}
}
