//go:build !headless

package app

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/tandem-run/tandem/engine"
)

// Simulated GPUs: the window plans for them, a device over its memory
// turns red with a fix that applies, the layout is saved beside this
// machine's (which it never replaces), and Load is refused however it is
// asked for. Back on this machine's devices, its own layout returns.
func TestSimulatedDevicesArePlannedNotLoaded(t *testing.T) {
	refuse := func(context.Context, engine.Config, func(engine.Progress)) (loadedModel, error) {
		t.Error("a simulated layout reached the loader")
		return nil, context.Canceled
	}
	h := newHarness(t, func(s *Settings) { s.Layout.TargetDevices, s.Layout.DraftDevices = []int{2}, []int{2} }, refuse)
	m := h.m
	m.chooseModel("target", h.demo.Target)
	m.chooseModel("draft", h.demo.Draft)
	h.settle()
	real := m.set.Layout

	// Three 600 MiB GPUs, 73 MiB each past the CUDA context: the demo pair
	// needs 86 MiB on one.
	m.simulate("cuda:600MiB,cuda:600MiB,cuda:600MiB")
	h.settle()
	if len(m.inv.Devices) != 3 || !m.simulating() || !strings.Contains(m.notice.Text(), "Simulated devices: GPU 0") {
		t.Fatalf("devices %+v, notes %q", m.inv.Devices, m.notice.Text())
	}
	if l := m.set.Layout; !slices.Equal(l.TargetDevices, []int{0}) || !slices.Equal(l.DraftDevices, []int{0}) {
		t.Errorf("layout on the simulation %+v, want both models on GPU 0", l)
	}
	pv := m.preview.Preview()
	if pv.Fits || len(pv.Devices) != 1 || pv.Devices[0].Over() == 0 {
		t.Fatalf("preview %+v: want GPU 0 over", pv)
	}
	fix := slices.IndexFunc(pv.Suggestions, func(s string) bool { return strings.HasPrefix(s, "Put the draft on GPU") })
	if fix < 0 {
		t.Fatalf("suggestions %q, preview %+v", pv.Suggestions, pv)
	}
	m.preview.Apply(fix)
	h.settle()
	if !m.preview.Preview().Fits || !m.loadBtn.Disabled() || !strings.HasPrefix(m.status.Text, "Simulated devices") {
		t.Errorf("after the fix: fits %v, Load disabled %v, status %q", m.preview.Preview().Fits, m.loadBtn.Disabled(), m.status.Text)
	}
	m.startLoad() // Ctrl+L
	h.settle()
	if m.model != nil || m.cancelLoad != nil {
		t.Error("a simulated layout is loading")
	}
	saved, _, _ := m.store.loadSettings()
	if !slices.Equal(saved.Layout.TargetDevices, real.TargetDevices) || saved.Simulation == nil ||
		saved.Simulation.Spec != "cuda:600MiB,cuda:600MiB,cuda:600MiB" || len(saved.Simulation.Layout.DraftDevices) != 1 || saved.Simulation.Layout.DraftDevices[0] == 0 {
		t.Errorf("saved layout %+v, simulation %+v", saved.Layout, saved.Simulation)
	}

	m.useHostDevices()
	h.settle()
	if m.simulating() || !slices.Equal(m.set.Layout.TargetDevices, []int{2}) || strings.Contains(m.notice.Text(), "Simulated") {
		t.Errorf("back home: layout %+v, notes %q", m.set.Layout, m.notice.Text())
	}
	// The same simulation again finds its layout with the fix.
	m.simulate("cuda:600MiB,cuda:600MiB,cuda:600MiB")
	h.settle()
	if !m.preview.Preview().Fits {
		t.Errorf("the simulation's saved layout was not kept: %+v", m.set.Layout)
	}
	m.simulate("rtx9999")
	h.settle()
	if !m.errNotice.Visible() || !strings.Contains(m.errNotice.Text(), "rtx4090") {
		t.Errorf("an unknown card: %q", m.errNotice.Text())
	}
}
