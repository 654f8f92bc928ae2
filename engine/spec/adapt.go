package spec

// Length adapts how many tokens to draft per step to the running acceptance
// rate: drafting is cheap but not free, so a draft that keeps being rejected
// should propose fewer tokens, and one that keeps being accepted more.
type Length struct {
	Min, Max int
	cur      int
	// rate is an exponential moving average of the accepted fraction.
	rate float64
}

// NewLength starts at max, the optimistic end, bounded by [min, max].
func NewLength(min, max int) *Length {
	if min < 1 {
		min = 1
	}
	if max < min {
		max = min
	}
	return &Length{Min: min, Max: max, cur: max, rate: 1}
}

// Next is how many tokens to draft in the next step.
func (l *Length) Next() int { return l.cur }

// Observe records a step in which drafted tokens were proposed and accepted
// of them were kept, and sets the next length: the expected number of
// accepted tokens plus one, so the draft reaches a little past where it has
// been right.
func (l *Length) Observe(drafted, accepted int) {
	if drafted == 0 {
		return
	}
	const alpha = 0.3
	l.rate = (1-alpha)*l.rate + alpha*float64(accepted)/float64(drafted)
	// With per-token acceptance a, the expected run of accepted tokens is
	// a/(1-a); draft one past it.
	a := min(l.rate, 0.95)
	next := int(a/(1-a)+0.5) + 1
	l.cur = max(l.Min, min(l.Max, next))
}
