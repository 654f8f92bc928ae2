package serve

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// TestStopFilterRandom streams random text in random pieces through random
// stop strings over a small alphabet (so that near misses are common). What
// comes out must be the text up to the stop string a byte-by-byte stream
// meets first, whatever the pieces, and at every
// moment what has come out must be a prefix of that: nothing past a stop,
// not even part of it, is ever passed on.
func TestStopFilterRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	word := func(n int) string {
		b := make([]byte, n)
		for i := range b {
			b[i] = "abc"[rng.IntN(3)]
		}
		return string(b)
	}
	for range 5000 {
		text := word(rng.IntN(40))
		var stops []string
		for range 1 + rng.IntN(3) {
			stops = append(stops, word(1+rng.IntN(4)))
		}
		want, hitWant := firstStop(text, stops)
		f := stopFilter{stops: stops}
		var got strings.Builder
		hit := false
		for rest := text; rest != "" && !hit; {
			n := 1 + rng.IntN(min(len(rest), 5))
			var out string
			out, hit = f.push(rest[:n])
			rest = rest[n:]
			got.WriteString(out)
			if !strings.HasPrefix(want, got.String()) {
				t.Fatalf("text %q, stops %q: passed on %q, past the answer %q", text, stops, got.String(), want)
			}
		}
		if !hit {
			got.WriteString(f.flush())
		}
		if got.String() != want || hit != hitWant {
			t.Fatalf("text %q, stops %q: got %q (hit %v), want %q", text, stops, got.String(), hit, want)
		}
	}
}

// firstStop feeds text one byte at a time and cuts it before the first
// stop string it completes (the longest, when several end at that byte).
func firstStop(text string, stops []string) (string, bool) {
	for end := 1; end <= len(text); end++ {
		best := ""
		for _, s := range stops {
			if strings.HasSuffix(text[:end], s) && len(s) > len(best) {
				best = s
			}
		}
		if best != "" {
			return text[:end-len(best)], true
		}
	}
	return text, false
}
