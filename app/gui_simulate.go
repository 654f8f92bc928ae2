//go:build !headless

package app

import (
	"fmt"
	"slices"
	"strings"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/dialog"
	"fyne.io/fyne/v2/widget"

	"github.com/tandem-run/tandem/engine/device"
	"github.com/tandem-run/tandem/widgets"
)

// Simulated devices let a user plan for GPUs they do not have (issue 26):
// the window swaps its inventory for them, keeps this machine's layout
// aside (settings.json's layout stays the real one; the simulation's is
// saved beside it), and refuses Load until this machine's devices are back.

// simulations are the Devices menu's ready-made machines.
var simulations = []struct{ label, spec string }{
	{"2 × RTX 4090 (24 GiB each)", "rtx4090,rtx4090"},
	{"3 × RTX 3090 (24 GiB each)", "rtx3090,rtx3090,rtx3090"},
	{"RTX 4060 Ti 16 GB + RTX 3060 12 GB", "rtx4060ti,rtx3060"},
	{"RTX 5090 (32 GiB)", "rtx5090"},
	{"2 × A100 80 GB", "a100-80,a100-80"},
	{"H200 (141 GB)", "h200"},
}

// simulating reports a simulated inventory.
func (m *mainWindow) simulating() bool {
	return slices.ContainsFunc(m.inv.Devices, func(d device.Device) bool { return d.Simulated })
}

// devicesMenu switches between this machine's devices and simulated ones.
func (m *mainWindow) devicesMenu() *fyne.Menu {
	items := []*fyne.MenuItem{
		fyne.NewMenuItem("This machine's devices", m.useHostDevices),
		fyne.NewMenuItemSeparator(),
	}
	for _, s := range simulations {
		items = append(items, fyne.NewMenuItem("Simulate "+s.label, func() { m.simulate(s.spec) }))
	}
	items = append(items, fyne.NewMenuItem("Simulated devices…", m.askSimulation))
	return fyne.NewMenu("Devices", items...)
}

// askSimulation asks for a list of cards or sizes to simulate.
func (m *mainWindow) askSimulation() {
	var keys []string
	for _, c := range device.Cards() {
		keys = append(keys, c.Key)
	}
	entry := widget.NewEntry()
	entry.SetPlaceHolder("rtx4090,rtx4090,cuda:12GiB")
	entry.Validator = func(s string) error {
		_, err := device.ParseSimulated(s)
		return err
	}
	help := widget.NewLabel("GPUs separated by commas: cards (" + strings.Join(keys, ", ") +
		") or sizes such as cuda:12GiB. Layouts for them can be planned and saved, not loaded.")
	help.Wrapping = fyne.TextWrapWord
	d := dialog.NewForm("Simulated devices", "Simulate", "Cancel",
		[]*widget.FormItem{widget.NewFormItem("GPUs", entry), widget.NewFormItem("", help)},
		func(ok bool) {
			if ok {
				m.simulate(entry.Text)
			}
		}, m.win)
	d.Resize(fyne.NewSize(560, 260))
	d.Show()
}

// simulate plans for the simulated GPUs of spec (device.ParseSimulated).
func (m *mainWindow) simulate(spec string) {
	inv, err := device.ParseSimulated(spec)
	if err != nil {
		m.showError("Those devices cannot be simulated.", err)
		return
	}
	m.useDevices(inv, spec)
}

// useHostDevices goes back to this machine's devices and its layout.
func (m *mainWindow) useHostDevices() {
	if m.simulating() {
		m.useDevices(m.hostInventory(), "")
	}
}

// useDevices makes inv the window's devices: simulated ones under spec,
// or ("" spec) this machine's. The layout of the devices left is kept for
// them; the one shown is the one last saved for inv, or a default.
func (m *mainWindow) useDevices(inv device.Inventory, spec string) {
	if m.simulating() {
		m.set.Simulation = &Simulation{Spec: m.simSpec, Layout: m.set.Layout.withDeviceIDs(m.inv)}
	} else {
		m.realLayout = m.set.Layout.withDeviceIDs(m.inv)
	}
	m.inv, m.simSpec = inv, spec
	m.set.Layout = m.layoutFor(inv, spec)
	m.showSimulation()
	m.showLayout()
	m.changed()
}

// layoutFor is the layout to show on inv: this machine's (spec ""), the
// one last saved for the simulation spec, or for a new simulation this
// machine's settings with both models on the first GPU.
func (m *mainWindow) layoutFor(inv device.Inventory, spec string) Layout {
	var l Layout
	switch {
	case spec == "":
		l = m.realLayout.onInventory(inv)
	case m.set.Simulation != nil && m.set.Simulation.Spec == spec:
		l = m.set.Simulation.Layout.onInventory(inv)
	default:
		l = m.realLayout
		l.TargetDevices, l.TargetRatios, l.DraftDevices, l.DeviceIDs = nil, nil, nil, nil
	}
	return defaultLayout(l, inv)
}

// showSimulation says, above the Models page, which devices are simulated.
func (m *mainWindow) showSimulation() {
	if m.simNote != "" {
		m.notice.Drop(m.simNote)
		m.simNote = ""
	}
	if !m.simulating() {
		return
	}
	var names []string
	for _, d := range m.inv.Devices {
		names = append(names, fmt.Sprintf("%s %s (%s)", d.Label(), d.Name, ibytes(int64(d.MemoryTotal))))
	}
	m.simNote = "Simulated devices: " + strings.Join(names, ", ") +
		". Layouts for them can be planned and saved, not loaded; Devices ▸ This machine's devices goes back."
	m.notice.Set(widgets.NoticeWarning, m.simNote, "")
}
