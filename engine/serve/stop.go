package serve

import "strings"

// stopFilter cuts streamed text at the first stop string. Text that could be
// the start of a stop string is held back until the next piece shows
// whether it is, so a client never sees part of a stop string.
type stopFilter struct {
	stops []string
	held  string
}

// push adds a piece of text and returns what is safe to pass on; hit
// reports that a stop string ended the text (out is then all there is).
func (f *stopFilter) push(piece string) (out string, hit bool) {
	if len(f.stops) == 0 {
		return piece, false
	}
	text := f.held + piece
	// The stop string that ends first is the one a byte-by-byte stream
	// would meet first (the longer one when two end together); choosing it
	// makes the answer independent of how the text was cut into tokens.
	cut, end := -1, -1
	for _, s := range f.stops {
		i := strings.Index(text, s)
		if i >= 0 && (end < 0 || i+len(s) < end || i+len(s) == end && i < cut) {
			cut, end = i, i+len(s)
		}
	}
	if cut >= 0 {
		f.held = ""
		return text[:cut], true
	}
	keep := 0 // longest tail of text that begins some stop string
	for _, s := range f.stops {
		for n := min(len(s)-1, len(text)); n > keep; n-- {
			if strings.HasSuffix(text, s[:n]) {
				keep = n
				break
			}
		}
	}
	f.held = text[len(text)-keep:]
	return text[:len(text)-keep], false
}

// flush returns the held-back text once the generation has ended without
// completing a stop string.
func (f *stopFilter) flush() string {
	out := f.held
	f.held = ""
	return out
}
