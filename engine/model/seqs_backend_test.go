package model

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/tandem-run/tandem/engine/plan"
	"github.com/tandem-run/tandem/kernels/backendtest"
	"github.com/tandem-run/tandem/kernels/quant"
	"github.com/tandem-run/tandem/kernels/sharedtest"
)

// A row's logits against its sequence's solo pass, as shares of the
// row's largest solo logit: on the CPU a row's logits do not depend on
// the pass; CUDA rounds passes of more than 16 rows on other kernels (on
// the H200 the demo target's rows came within 1.6e-2, the draft's 2.0e-2),
// while a row that read another sequence's keys, or took another row's
// logits, is off by about the whole scale (1.2 here with every sequence
// reading slot 0's keys). seqsTie is how close the solo top two may be
// for the argmax to differ.
const (
	seqsTol = 0.25
	seqsTie = 0.1
)

// TestForwardSeqsPaddedIsSolo runs the demo pair's models as a --parallel
// batch on a GPU does (engine/batch.go): every pass covers all 8 slots
// with the same number of rows each, a sequence's own rows (its last
// token and drafted ones) followed by filler rows that write its cache
// past what it holds, free slots running filler from position 0,
// sequences accepting some of their rows and rerunning the rest, and
// finished sequences' slots taken by new ones, whose prompts run in
// padded passes while the others' slots get filler. Every own row's
// logits must be the sequence's solo ones (within seqsTol, the same
// argmax unless the solo top two are within seqsTie), on -model.backend's
// backend: the GPU run tells a sequence mixed up with another from
// rounding.
func TestForwardSeqsPaddedIsSolo(t *testing.T) {
	for _, tc := range []struct {
		file   string
		widths []int // a pass's rows per slot, in turn
	}{
		{"factory-target-Q4_K_M.gguf", []int{1, 3, 5, 7, 2}}, // verifying 0, 2, 4, 6 and 1 drafted tokens
		{"factory-draft-Q8_0.gguf", []int{1, 2, 1}},          // drafting, a slot's first row behind by one
	} {
		t.Run(tc.file, func(t *testing.T) { paddedIsSolo(t, tc.file, tc.widths) })
	}
}

// batchedSeq is one sequence of paddedIsSolo: its tokens, its solo
// logits at every position, and the positions its slot holds.
type batchedSeq struct {
	hist   []int32
	prompt int // hist[:prompt] is its prompt, run before its steps
	ref    []float32
	slot   int
	cached int
}

func paddedIsSolo(t *testing.T, file string, widths []int) {
	const slots, seqs, ctxLen = 8, 12, 160
	f := openGGUF(t, sharedtest.Path(t, "models", file))
	be := newFamilyBackend(t)
	defer be.Close()
	opts := Options{Context: ctxLen, KV: plan.SameKV(quant.F16), Batch: 128}
	solo, err := Load(context.Background(), f, be, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer solo.Close()
	opts.Parallel = slots
	together, err := Load(context.Background(), f, be, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer together.Close()
	ctx := context.Background()
	vocab := solo.Params().Vocab

	rng := rand.New(rand.NewPCG(23, uint64(len(file))))
	all := make([]*batchedSeq, seqs)
	for i := range all {
		s := &batchedSeq{prompt: 3 + rng.IntN(30), slot: -1}
		s.hist = make([]int32, s.prompt+24+rng.IntN(40))
		for j := range s.hist {
			s.hist[j] = int32(rng.IntN(vocab))
		}
		logits, err := solo.Forward(ctx, s.hist, 0, allRows(len(s.hist)))
		if err != nil {
			t.Fatal(err)
		}
		s.ref = slices.Clone(logits)
		all[i] = s
	}

	var worst float64
	check := func(s *batchedSeq, pos int, logits []float32, id int32) {
		t.Helper()
		ref := s.ref[pos*vocab : (pos+1)*vocab]
		scale, top := 0.0, argmax(ref)
		for _, v := range ref {
			scale = max(scale, math.Abs(float64(v)))
		}
		second := math.Inf(-1)
		for j, v := range ref {
			if int32(j) != top {
				second = max(second, float64(v))
			}
		}
		tie := float64(ref[top])-second < seqsTie*scale
		if logits != nil {
			d := 0.0
			for j := range ref {
				d = max(d, math.Abs(float64(logits[j]-ref[j])))
			}
			worst = max(worst, d/scale)
			if d > seqsTol*scale {
				t.Errorf("sequence %d (slot %d) at %d: logits off by %.3g of %.3g", slices.Index(all, s), s.slot, pos, d, scale)
			}
			id = argmax(logits)
		}
		if id != top && !tie {
			t.Errorf("sequence %d (slot %d) at %d: argmax %d, solo %d", slices.Index(all, s), s.slot, pos, id, top)
		}
	}

	// join runs s's prompt but its last token into a free slot in padded
	// passes of 8 rows a slot, the active sequences' slots running zeros
	// from the position they write next.
	active := make([]*batchedSeq, slots)
	join := func(s *batchedSeq, slot int) {
		s.slot = slot
		active[slot] = s
		for pos := 0; pos < s.prompt-1; pos += 8 {
			rows := make([]Seq, slots)
			for i := range rows {
				rows[i] = Seq{Slot: i, Tokens: make([]int32, 8)}
				if o := active[i]; o != nil {
					rows[i].Pos = o.cached
				}
			}
			n := copy(rows[slot].Tokens, s.hist[pos:s.prompt-1])
			for j := n; j < 8; j++ {
				rows[slot].Tokens[j] = s.hist[pos+n-1]
			}
			rows[slot].Pos = pos
			if _, err := together.ForwardSeqs(ctx, rows); err != nil {
				t.Fatal(err)
			}
			s.cached = pos + n
		}
	}
	next := 0
	for ; next < slots; next++ {
		join(all[next], next)
	}
	done := 0
	for step := 0; done < seqs; step++ {
		width := widths[step%len(widths)]
		rows := make([]Seq, slots)
		for i := range rows {
			rows[i] = Seq{Slot: i, Tokens: make([]int32, width), Out: width}
			s := active[i]
			if s == nil {
				continue
			}
			rows[i].Pos = s.cached
			n := copy(rows[i].Tokens, s.hist[s.cached:])
			for j := n; j < width; j++ {
				rows[i].Tokens[j] = rows[i].Tokens[n-1]
			}
		}
		var logits []float32
		var ids []int32
		var err error
		if step%2 == 0 {
			logits, err = together.ForwardSeqs(ctx, rows)
		} else {
			ids, err = together.ForwardSeqsArgmax(ctx, rows)
		}
		if err != nil {
			t.Fatal(err)
		}
		for i, s := range active {
			if s == nil {
				continue
			}
			own := min(width, len(s.hist)-s.cached)
			for j := range own {
				r := i*width + j
				if logits != nil {
					check(s, s.cached+j, logits[r*vocab:(r+1)*vocab], 0)
				} else {
					check(s, s.cached+j, nil, ids[r])
				}
			}
			// Some rows are kept, the rest run again next pass.
			s.cached += 1 + rng.IntN(own)
			if s.cached == len(s.hist) {
				active[i] = nil
				done++
			}
		}
		// Between passes, as the engine's callers join.
		for i, s := range active {
			if s == nil && next < seqs && all[next].slot < 0 {
				join(all[next], i)
				next++
			}
		}
		if t.Failed() {
			t.Fatalf("step %d (%d rows a slot): mixed up", step, width)
		}
	}
	t.Logf("%s on %s: largest logit difference %.2e of the largest solo logit", file, *familyBackend, worst)
	if testing.Verbose() {
		fmt.Printf("PADDEDSOLO %s %s worst %.3e\n", file, *familyBackend, worst)
	}
}

// BenchmarkForwardSeqsPadded times the passes of a --parallel batch on a
// GPU (engine/batch.go's padded steps) on -model.backend's backend: the
// demo target's greedy pass over every one of 8 slots with 1 row each
// (an undrafted step) and 3 (verifying 2 drafted tokens), against one
// sequence's decode, so a GPU's step time tells its own share from the
// host's (serveload's aggregate over what 8 rows a step would give).
func BenchmarkForwardSeqsPadded(b *testing.B) {
	const slots, ctxLen = 8, 512
	f := openGGUF(b, sharedtest.Path(b, "models", "factory-target-Q4_K_M.gguf"))
	be := backendtest.Open(b, "model.backend", *familyBackend)
	defer be.Close()
	m, err := Load(context.Background(), f, be, Options{Context: ctxLen, KV: plan.SameKV(quant.F16), Parallel: slots})
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	ctx := context.Background()
	prompt := []int32{1, 7570, 203, 5139, 1372, 368, 280, 285}
	for _, width := range []int{0, 1, 3} { // 0: one sequence's decode (Forward)
		name := fmt.Sprintf("%d slots of %d rows", slots, width)
		if width == 0 {
			name = "one sequence"
		}
		b.Run(name, func(b *testing.B) {
			rows := make([]Seq, slots)
			for i := range rows {
				if _, err := m.ForwardSeqs(ctx, []Seq{{Slot: i, Tokens: prompt}}); err != nil {
					b.Fatal(err)
				}
				rows[i] = Seq{Slot: i, Tokens: make([]int32, max(1, width)), Out: max(1, width)}
			}
			if width == 0 {
				if _, err := m.Forward(ctx, prompt, 0, nil); err != nil {
					b.Fatal(err)
				}
				rows = rows[:1]
			}
			b.ResetTimer()
			for i := range b.N {
				if width == 0 {
					if _, err := m.ForwardArgmax(ctx, []int32{int32(i % 100)}, len(prompt)+i%256, nil); err != nil {
						b.Fatal(err)
					}
					continue
				}
				for s := range rows {
					rows[s].Pos = len(prompt) + i%256
					rows[s].Tokens[0] = int32(i % 100)
				}
				if _, err := m.ForwardSeqsArgmax(ctx, rows); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N), "us/pass")
			b.ReportMetric(float64(b.N*len(rows))/b.Elapsed().Seconds(), "seq-steps/s")
		})
	}
}
