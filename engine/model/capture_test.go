package model

import (
	"context"
	"math"
	"slices"
	"testing"

	"github.com/tandem-run/tandem/kernels"
)

// TestPauseCaptureSkipsTheCopies: while the capture is paused, passes
// neither write the features buffer nor hand states over, and the logits
// are the same; resumed, a pass captures exactly what it would have with
// the capture never paused.
func TestPauseCaptureSkipsTheCopies(t *testing.T) {
	seq := demoSequence(t)
	ctx := context.Background()
	run := func(pause bool) (rows map[int][]float32, logits [][]float32, handed []int) {
		rows = map[int][]float32{}
		pr, err := loadEagle3Pair(t, demoEagle3(t), 0)
		if err != nil {
			t.Fatal(err)
		}
		features := pr.draft.s.hidden
		be := pr.target.cap.be
		// Keep the rows here, to compare what each pass handed over.
		pr.target.cap.fn = func(pos, n int) error {
			handed = append(handed, pos)
			host := make([]float32, n*features.Cols)
			if err := be.Read(kernels.F32Bytes(host), features.RowSlice(0, n)); err != nil {
				return err
			}
			for i := range n {
				rows[pos+i] = host[i*features.Cols : (i+1)*features.Cols]
			}
			return nil
		}
		n := len(seq) - 3
		if _, err := pr.target.Forward(ctx, seq[:n], 0, nil); err != nil {
			t.Fatal(err)
		}
		for i := n; i < len(seq); i++ {
			pr.target.PauseCapture(pause && i < len(seq)-1)
			if pause && i == n {
				// A sentinel the paused passes must leave alone.
				fill := make([]float32, features.Rows*features.Cols)
				for j := range fill {
					fill[j] = float32(j%7) - 3
				}
				if err := be.Write(features, kernels.F32Bytes(fill)); err != nil {
					t.Fatal(err)
				}
			}
			l, err := pr.target.Forward(ctx, seq[i:i+1], i, nil)
			if err != nil {
				t.Fatal(err)
			}
			logits = append(logits, slices.Clone(l))
			if pause && i == len(seq)-2 {
				paused := make([]float32, features.Rows*features.Cols)
				if err := be.Read(kernels.F32Bytes(paused), features); err != nil {
					t.Fatal(err)
				}
				for j, v := range paused {
					if v != float32(j%7)-3 {
						t.Fatalf("paused passes wrote the features buffer at %d: %v", j, v)
					}
				}
			}
		}
		return rows, logits, handed
	}
	always, alwaysLogits, alwaysHanded := run(false)
	rows, logits, handed := run(true)
	for i := range logits {
		for j := range logits[i] {
			if math.Float32bits(logits[i][j]) != math.Float32bits(alwaysLogits[i][j]) {
				t.Fatalf("pass %d logit %d: %v paused, %v capturing", i, j, logits[i][j], alwaysLogits[i][j])
			}
		}
	}
	last := len(seq) - 1
	if want := append(alwaysHanded[:1:1], last); !slices.Equal(handed, want) {
		t.Fatalf("handed over at %v, want %v (always: %v)", handed, want, alwaysHanded)
	}
	if got, want := rows[last], always[last]; len(want) == 0 || !slices.Equal(got, want) {
		t.Fatalf("the resumed pass captured %v..., want %v...", got[:4], want[:4])
	}
}

// BenchmarkDecodeCapture times one token through the demo target handing
// its states to the EAGLE-3 draft (the copies and the draft's fusing)
// against the capture paused: what a decode step pays for a draft that
// drafting off does not read.
func BenchmarkDecodeCapture(b *testing.B) {
	for _, paused := range []bool{false, true} {
		name := "capturing"
		if paused {
			name = "paused"
		}
		b.Run(name, func(b *testing.B) {
			pr, err := loadEagle3Pair(b, demoEagle3(b), 0)
			if err != nil {
				b.Fatal(err)
			}
			pr.target.cap.fn = func(pos, n int) error { return pr.draft.Encode(context.Background(), pos, n) }
			ctx := context.Background()
			prompt := []int32{1, 7570, 203, 5139, 1372, 368, 280, 285}
			if _, err := pr.target.Forward(ctx, prompt, 0, nil); err != nil {
				b.Fatal(err)
			}
			pr.target.PauseCapture(paused)
			b.ResetTimer()
			for i := range b.N {
				if _, err := pr.target.Forward(ctx, []int32{int32(i % 100)}, len(prompt)+i%64, nil); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "tok/s")
		})
	}
}

// After passes with the capture paused, the next captured pass hands over
// states past those the draft holds: EAGLE-3 and DFlash take them across
// the gap (its positions keep stale states) and draft on from there.
func TestEncodeAcrossAPausedGap(t *testing.T) {
	seq := demoSequence(t)
	seq = seq[:min(len(seq), 40)]
	ctx := context.Background()
	n := len(seq) - 4
	// target runs seq[:n] capturing, three tokens paused and the last
	// one capturing again.
	target := func(t *testing.T, m *Model) {
		t.Helper()
		if _, err := m.Forward(ctx, seq[:n], 0, nil); err != nil {
			t.Fatal(err)
		}
		for i := n; i < len(seq); i++ {
			m.PauseCapture(i < len(seq)-1)
			if _, err := m.Forward(ctx, seq[i:i+1], i, nil); err != nil {
				t.Fatalf("pass at %d: %v", i, err)
			}
		}
		if handed, skipped := m.CaptureCounts(); handed < 2 || skipped != 3 {
			t.Errorf("%d chunks handed over, %d paused; want >= 2 and 3", handed, skipped)
		}
	}
	finite := func(t *testing.T, logits []float32) {
		t.Helper()
		for i, v := range logits {
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 1) {
				t.Fatalf("logit %d is %v", i, v)
			}
		}
	}
	t.Run("eagle3", func(t *testing.T) {
		pr, err := loadEagle3Pair(t, demoEagle3(t), 0)
		if err != nil {
			t.Fatal(err)
		}
		// The pair's receiver records states without gaps: hand them to
		// the draft alone, as the engine does.
		pr.target.cap.fn = func(pos, n int) error { return pr.draft.Encode(ctx, pos, n) }
		target(t, pr.target)
		if got := pr.draft.Fused(); got != len(seq) {
			t.Fatalf("the draft holds states up to %d, want %d", got, len(seq))
		}
		// The catch-up runs over the gap's stale states.
		logits, err := pr.draft.Forward(ctx, seq[1:], 0)
		if err != nil {
			t.Fatal(err)
		}
		finite(t, logits)
	})
	t.Run("dflash", func(t *testing.T) {
		pr, err := loadDFlashPair(t, demoDFlash)
		if err != nil {
			t.Fatal(err)
		}
		target(t, pr.target)
		if got := pr.draft.Len(); got != len(seq) {
			t.Fatalf("the draft holds states up to %d, want %d", got, len(seq))
		}
		last := len(seq) - 1
		if err := pr.draft.Truncate(last); err != nil {
			t.Fatal(err)
		}
		logits, err := pr.draft.Block(ctx, seq[last], last, 3)
		if err != nil {
			t.Fatal(err)
		}
		finite(t, logits)
	})
}
