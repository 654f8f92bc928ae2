package spec

import "github.com/tandem-run/tandem/engine/sample"

// Accept reports whether drafted token x, drawn from q, is kept against the
// target distribution p, given u uniform in [0, 1): it is kept with
// probability min(1, p[x]/q[x]). A token the draft could not have drawn
// (q[x] = 0) is kept only when the target would have chosen it for sure.
//
// q may be shorter than p: a draft's vocabulary can end where the target's
// goes on in padding (Compatible allows it), and the draft gives those
// tokens no mass.
func Accept(p, q []float32, x int32, u float64) bool {
	px, qx := float64(p[x]), at(q, int(x))
	if qx <= 0 {
		return px >= 1
	}
	return u*qx < px
}

// Residual draws from normalize(max(0, p - q)) with u uniform in [0, 1): the
// distribution of the target's token given that the draft's was rejected.
// When p - q has no positive mass (p == q, so a rejection cannot happen in
// exact arithmetic) it draws from p. q may be shorter than p, as for
// Accept.
func Residual(p, q []float32, u float64) int32 {
	if t, ok := sample.DrawExcess(p, q, u); ok {
		return t
	}
	return sample.Draw(p, u)
}

// at is q[i], or 0 past q's end.
func at(q []float32, i int) float64 {
	if i >= len(q) {
		return 0
	}
	return float64(q[i])
}

// GreedyAccepted is the number of drafted tokens greedy verification keeps:
// the length of the prefix where each drafted token equals the target's
// argmax at its position. targetArgmax has one more entry than drafted (the
// target's choice after the last drafted token).
func GreedyAccepted(drafted, targetArgmax []int32) int {
	n := 0
	for n < len(drafted) && drafted[n] == targetArgmax[n] {
		n++
	}
	return n
}
