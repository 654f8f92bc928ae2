package engine

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/tandem-run/tandem/engine/sample"
)

// A draft with a reduced vocabulary samples over its rows (pickRows) what
// pick samples over the target's ids with -Inf outside the map: the same
// token from the same randomness, the same top probability, and the same
// distribution spread over the target's ids, under each kind of sampler
// setting (the draw is an ascending walk; d2t is ascending, as real maps
// are).
func TestPickRowsIsPickOverTargetIDs(t *testing.T) {
	const vocab, rows = 5000, 1200
	rng := rand.New(rand.NewPCG(7, 11))
	d2t := make([]int32, 0, rows)
	for _, id := range rng.Perm(vocab)[:rows] {
		d2t = append(d2t, int32(id))
	}
	slices.Sort(d2t)
	small := make([]float32, rows)
	full := make([]float32, vocab)
	for _, p := range []sample.Params{
		{Temperature: 0.7},
		{Temperature: 1, TopK: 40},
		{Temperature: 0.8, TopP: 0.9},
		{Temperature: 1.2, MinP: 0.05},
		{}, // greedy
	} {
		var rowDist []float32
		a := sample.New(p, rand.New(rand.NewPCG(1, 2)))
		b := sample.New(p, rand.New(rand.NewPCG(1, 2)))
		for round := range 20 {
			for i := range full {
				full[i] = float32(math.Inf(-1))
			}
			for r, id := range d2t {
				small[r] = float32(3 * rng.NormFloat64())
				full[id] = small[r]
			}
			var got, want [][]float32
			if !p.Greedy() {
				got, want = make([][]float32, 1), make([][]float32, 1)
			}
			tr, topR, dist, err := pickRows(a, slices.Clone(small), d2t, vocab, rowDist, got, 0)
			if err != nil {
				t.Fatal(err)
			}
			rowDist = dist
			tf, topF, err := pick(b, slices.Clone(full), nil, want, 0)
			if err != nil {
				t.Fatal(err)
			}
			if tr != tf || math.Abs(topR-topF) > 1e-6 {
				t.Fatalf("%+v, round %d: token %d (top %v), over the target's ids %d (%v)", p, round, tr, topR, tf, topF)
			}
			if got == nil {
				continue
			}
			if len(got[0]) != vocab {
				t.Fatalf("%+v: distribution over %d ids, want %d", p, len(got[0]), vocab)
			}
			for id := range vocab {
				if math.Abs(float64(got[0][id]-want[0][id])) > 1e-6 {
					t.Fatalf("%+v, round %d, id %d: q %v, over the target's ids %v", p, round, id, got[0][id], want[0][id])
				}
			}
		}
	}
}
