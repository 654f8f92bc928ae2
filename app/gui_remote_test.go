//go:build !headless

package app

import (
	"testing"

	"github.com/tandem-run/tandem/engine/plan"
	"github.com/tandem-run/tandem/kernels/quant"
)

// A layout with no fix offers the remote engine in words; taking it opens
// the chat page at its Engine settings, with the remote address focused.
func TestNoFitOffersRemoteEngine(t *testing.T) {
	h := newHarness(t, nil, nil)
	m := h.m
	over := &plan.Plan{Ctx: 4096, Devices: []plan.Budget{{Device: m.inv.Devices[0], Capacity: 64 * mib}}}
	over.Devices[0].Target.Weights = 100 * mib
	fixable := *over
	q8 := plan.SameKV(quant.Q8_0)
	fixable.Suggestions = []plan.Suggestion{{Text: "store the KV cache as q8_0", Change: plan.Change{KV: &q8}}}
	if pv := previewOf(&fixable, nil); pv.Remote != "" {
		t.Errorf("a layout with a fix offers a remote engine: %q", pv.Remote)
	}
	pv := previewOf(over, nil)
	if pv.Fits || pv.Remote == "" {
		t.Fatalf("no fix and no remote hint: %+v", pv)
	}
	m.preview.Set(pv)
	m.preview.UseRemote()
	h.settle()
	c := m.chat
	open := false
	for _, it := range c.settings.Items {
		open = open || it.Title == engineSettings && it.Open
	}
	focused := m.win.Canvas().Focused()
	if m.pages.Selected() != m.chatTab || !open || focused != c.remoteURL {
		t.Errorf("the chat's Engine settings are not open at the remote address (page %q, open %v, focused %v)", m.pages.Selected().Text, open, focused)
	}
}
