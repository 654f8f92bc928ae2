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
		// The draft cannot fuse past a gap (Encode): keep the rows here.
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
