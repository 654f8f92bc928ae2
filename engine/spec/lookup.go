package spec

// Lookup drafts by prompt lookup: it finds the most recent earlier place in
// the context where the last n tokens occurred, for n from MaxN down to
// MinN, and proposes the tokens that followed there. Code, quotations and
// documents that repeat their input are drafted well at no model cost.
type Lookup struct {
	MinN, MaxN int
}

// NewLookup returns a drafter matching n-grams of 2 to 4 tokens, which
// prompt-lookup decoding finds a good default.
func NewLookup() Lookup { return Lookup{MinN: 2, MaxN: 4} }

// Draft proposes up to k tokens to follow history.
func (l Lookup) Draft(history []int32, k int) []int32 {
	n := len(history)
	for size := min(l.MaxN, n-1); size >= max(l.MinN, 1); size-- {
		suffix := history[n-size:]
		// Search backwards for the most recent earlier occurrence.
		for start := n - size - 1; start >= 0; start-- {
			if !equal(history[start:start+size], suffix) {
				continue
			}
			follow := history[start+size : min(n, start+size+k)]
			if len(follow) > 0 {
				return append([]int32(nil), follow...)
			}
		}
	}
	return nil
}

func equal(a, b []int32) bool {
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
