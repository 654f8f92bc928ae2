package app

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/tandem-run/tandem/engine/spec"
	"github.com/tandem-run/tandem/kernels/sharedtest"
)

func TestDraftNote(t *testing.T) {
	for _, c := range []struct {
		k       int
		on      bool
		off     string
		speedup float64
		want    string
	}{
		{0, false, "", 0, ""}, // no draft loaded
		{5, true, "", 1.8412, "drafting 5 tokens a step, 1.84x the target alone"},
		{1, true, "", 0, "drafting 1 token a step"},
		{0, true, "", 1, "drafting, timing the target alone, 1.00x the target alone"},
		{0, false, spec.ReasonCosts, 0.97, "drafting off: " + spec.ReasonCosts},
	} {
		if got := draftNote(c.k, c.on, c.off, c.speedup); got != c.want {
			t.Errorf("draftNote(%d, %v, %q, %g) = %q, want %q", c.k, c.on, c.off, c.speedup, got, c.want)
		}
	}
	m := MessageStats{Tokens: 9, TokS: 120, DraftOff: spec.ReasonCosts}
	if got := m.summary(); !strings.HasSuffix(got, " · drafting off: "+spec.ReasonCosts) {
		t.Errorf("summary %q", got)
	}
}

// `tandem run --json` reports the draft length: a fixed one with a draft,
// nothing drafting without one.
func TestRunJSONDrafting(t *testing.T) {
	target := sharedtest.Path(t, "models", "factory-target-Q8_0.gguf")
	draft := sharedtest.Path(t, "models", "factory-draft-Q8_0.gguf")
	for _, c := range []struct {
		args     []string
		k        int
		drafting bool
	}{
		{[]string{"--draft", draft, "--draft-max", "3", "--draft-min", "3"}, 3, true},
		{nil, 0, false},
	} {
		args := append([]string{"run", "--model", target, "--prompt", "In the beginning", "-n", "8", "--json"}, c.args...)
		code, out, errOut := runWithin(t, args...)
		var res runResult
		if err := json.Unmarshal([]byte(out), &res); code != 0 || err != nil {
			t.Fatalf("%q: exit %d, %v\n%s\n%s", c.args, code, err, out, errOut)
		}
		if res.DraftK != c.k || res.Drafting != c.drafting || res.DraftOff != "" {
			t.Errorf("%q: draft_k %d, drafting %v, off %q", c.args, res.DraftK, res.Drafting, res.DraftOff)
		}
		if !strings.Contains(out, `"draft_k"`) || !strings.Contains(out, `"drafting"`) {
			t.Errorf("%q: %s", c.args, out)
		}
	}
}
