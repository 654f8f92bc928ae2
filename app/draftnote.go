package app

import (
	"fmt"

	"github.com/tandem-run/tandem/engine"
)

// draftNote says how drafting goes, in the words the chat's per-answer
// statistics, its live meter and `tandem run` share: "drafting 5 tokens a
// step, 1.84x the target alone", "drafting off: drafting costs more than
// it saves on this pair", or "" where no draft is loaded. k, on, off and
// speedup are engine.Stats' DraftK, Drafting, DraftOff and Speedup.
func draftNote(k int, on bool, off string, speedup float64) string {
	var s string
	switch {
	case off != "":
		return "drafting off: " + off
	case !on:
		return ""
	case k == 0:
		s = "drafting, timing the target alone"
	case k == 1:
		s = "drafting 1 token a step"
	default:
		s = fmt.Sprintf("drafting %d tokens a step", k)
	}
	if speedup > 0 {
		s += fmt.Sprintf(", %.2fx the target alone", speedup)
	}
	return s
}

// draftNoteOf is draftNote of a generation's statistics.
func draftNoteOf(s engine.Stats) string {
	return draftNote(s.DraftK, s.Drafting, s.DraftOff, s.Speedup)
}

// setDraft keeps the draft length's state from s.
func (m *MessageStats) setDraft(s engine.Stats) {
	m.DraftK, m.Drafting, m.DraftOff, m.Speedup = s.DraftK, s.Drafting, s.DraftOff, s.Speedup
}
