package workspace

import (
	"fmt"
	"testing"
)

// For is at least what any single pass with 1 to Rows rows and at most
// Heads heads needs on any GPU, counted op by op as the backend counts
// it, and no more than the worst of those.
func TestForBoundsEveryPass(t *testing.T) {
	for _, p := range []Pass{
		{Rows: 1, Keys: 256, Heads: 8, HeadDim: 64, Quantized: 1024},
		{Rows: 5, Keys: 4096, Heads: 32, HeadDim: 128, Quantized: 12288},
		{Rows: 64, Keys: 256, Heads: 4, HeadDim: 64, Quantized: 512},
		{Rows: 512, Keys: 32768, Heads: 40, HeadDim: 128},
		{Rows: 3, Keys: 100, Heads: 1, HeadDim: 256, Quantized: 96},
	} {
		t.Run(fmt.Sprintf("%+v", p), func(t *testing.T) {
			got := For(p)
			var worst Sizes
			for _, sm := range []int{1, 28, 132, 170, MaxMultiprocessors, 2 * MaxMultiprocessors} {
				for rows := 1; rows <= p.Rows; rows++ {
					for heads := 1; heads <= p.Heads; heads++ {
						var need Sizes
						if p.Quantized > 0 {
							_, q8 := Q8Layout(rows, p.Quantized)
							need[Q8] = q8
							if rows <= MaxVectorRows {
								// a fused gate/up product reading and writing copies of the widest
								need[Q8] = 2 * q8
							}
							need[Counters] = CounterBytes(p.Quantized / 32)
						}
						u := heads * rows
						if rows == 1 {
							need[Attention] = AttentionBytes(u, AttentionSplits(u, p.Keys, sm), p.HeadDim)
						} else {
							// the fewest blocks the several-row kernel can take
							blocks := (u + RowUnits - 1) / RowUnits
							need[Attention] = AttentionBytes(u, AttentionRowSplits(blocks, p.Keys, sm), p.HeadDim)
						}
						need[Counters] = max(need[Counters], CounterBytes(u))
						if !got.Covers(need) {
							t.Fatalf("%d rows, %d heads, %d multiprocessors need %v; For gives %v", rows, heads, sm, need, got)
						}
						worst = worst.Max(need)
					}
				}
			}
			if got != worst {
				t.Errorf("For gives %v, the worst pass needs %v", got, worst)
			}
		})
	}
}

// No attention and no integer products need no workspace.
func TestForEmpty(t *testing.T) {
	if s := For(Pass{Rows: 64, Keys: 4096}); s.Total() != 0 {
		t.Errorf("For of a pass with nothing to keep: %v", s)
	}
}

// Regions lie end to end, each aligned; Max and Covers go region by region.
func TestSizesLayout(t *testing.T) {
	s := Sizes{Q8: 512, Attention: 1024, Counters: 256}
	if s.Offset(Q8) != 0 || s.Offset(Aligned) != 512 || s.Offset(Attention) != 512 || s.Offset(Counters) != 1536 || s.Offset(TopK) != 1792 {
		t.Errorf("offsets of %v: %d %d %d %d %d", s, s.Offset(Q8), s.Offset(Aligned), s.Offset(Attention), s.Offset(Counters), s.Offset(TopK))
	}
	if s.Total() != 1792 {
		t.Errorf("total %d, want 1792", s.Total())
	}
	o := Sizes{Q8: 256, TopK: 768}
	m := s.Max(o)
	if m != (Sizes{Q8: 512, Attention: 1024, Counters: 256, TopK: 768}) || !m.Covers(s) || !m.Covers(o) || s.Covers(o) {
		t.Errorf("max of %v and %v: %v", s, o, m)
	}
	for _, n := range []int64{AlignedBytes(3, 33), TopKBytes(2, 100), CounterBytes(7)} {
		if n%Align != 0 {
			t.Errorf("%d bytes is not a multiple of %d", n, Align)
		}
	}
}

// A mixture-of-experts pass reserves its routing and pairs' scratch, and
// the layout's parts do not overlap.
func TestMoELayout(t *testing.T) {
	l := MoEFor(5, 8, 128, 2048, 768)
	parts := []struct{ off, bytes int64 }{
		{l.Logits, 4 * 5 * 128}, {l.IDs, 4 * 40}, {l.Weights, 4 * 40}, {l.Count, 4 * 128}, {l.First, 4 * 128}, {l.Active, 4 * 128},
		{l.NActive, 4}, {l.Order, 4 * 40}, {l.Slot, 4 * 40}, {l.Act, 4 * 40 * 768}, {l.Out, 4 * 40 * 2048},
	}
	end := int64(0)
	for i, p := range parts {
		if p.off < end || p.off%Align != 0 {
			t.Errorf("part %d at %d overlaps the one before (ending at %d) or is unaligned", i, p.off, end)
		}
		end = p.off + p.bytes
	}
	if l.Bytes < end {
		t.Errorf("region of %d bytes, parts end at %d", l.Bytes, end)
	}
	s := For(Pass{Rows: 5, Experts: 128, ExpertsUsed: 8, ExpertFF: 768, Embd: 2048})
	if s[MoE] != l.Bytes {
		t.Errorf("For reserves %d bytes of MoE scratch, the layout needs %d", s[MoE], l.Bytes)
	}
	if s := For(Pass{Rows: 5}); s[MoE] != 0 {
		t.Errorf("a dense pass reserves %d bytes of MoE scratch", s[MoE])
	}
}
