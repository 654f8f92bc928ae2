//go:build !headless

package app

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/dustin/go-humanize"

	"github.com/tandem-run/tandem/engine/device"
	"github.com/tandem-run/tandem/engine/gguf"
	"github.com/tandem-run/tandem/engine/plan"
	"github.com/tandem-run/tandem/kernels/quant"
	"github.com/tandem-run/tandem/widgets"
)

func ibytes(n int64) string { return humanize.IBytes(uint64(max(0, n))) }

// canvasPlacement is the layout as the GPU canvas shows it.
func canvasPlacement(l Layout) widgets.Placement {
	return widgets.Placement{Target: l.TargetDevices, Ratios: l.TargetRatios, Draft: l.DraftDevices, Split: l.Split, Head: l.Head}
}

// withCanvas takes the canvas's placement into the layout.
func (l Layout) withCanvas(p widgets.Placement) Layout {
	l.TargetDevices, l.TargetRatios, l.DraftDevices, l.Split, l.Head = p.Target, p.Ratios, p.Draft, p.Split, p.Head
	return l
}

// defaultLayout puts both models on the first GPU, or on the CPU when
// there is none.
func defaultLayout(l Layout, inv device.Inventory) Layout {
	if len(l.TargetDevices) > 0 || len(inv.Devices) == 0 {
		return l
	}
	first := inv.Devices[0].Index
	l.TargetDevices, l.DraftDevices = []int{first}, []int{first}
	return l
}

// planInput is the planner's input for a layout. Files are nil when not
// chosen; the planner fills in what the layout leaves open (the context,
// the batch, the draft's device: plan.Input.Resolve).
func planInput(target, draft *gguf.File, l Layout, inv device.Inventory) (plan.Input, error) {
	in := plan.Input{Target: target, Draft: draft, Devices: inv.Devices, Ctx: boundCtx(l, target), Parallel: l.Parallel}
	var err error
	if in.KV, err = plan.ParseKVTypes(l.KVType, ""); err != nil {
		return in, err
	}
	if len(l.TargetDevices) == 0 {
		return in, errors.New("Drag a device into the Target zone to place the target model.")
	}
	in.TargetPlacement = plan.Placement{Devices: l.TargetDevices, Ratios: l.TargetRatios,
		Split: plan.Split(l.Split), Head: plan.HeadMode(l.Head)}
	if len(in.TargetPlacement.Ratios) != len(l.TargetDevices) {
		in.TargetPlacement.Ratios = nil
	}
	in.DraftPlacement = plan.Placement{Devices: l.DraftDevices, Borrow: plan.Borrow(l.Borrow)}
	if l.TargetCPUMoE || l.DraftCPUMoE {
		cpu := slices.IndexFunc(inv.Devices, func(d device.Device) bool { return d.Kind == device.CPU })
		if cpu < 0 {
			return in, errors.New("These devices have no CPU to keep the experts in system RAM: turn that off, or choose this machine's devices.")
		}
		for _, on := range []struct {
			p  *plan.Placement
			on bool
		}{{&in.TargetPlacement, l.TargetCPUMoE}, {&in.DraftPlacement, l.DraftCPUMoE}} {
			if on.on {
				on.p.Experts, on.p.ExpertDevice = plan.ExpertsOnDevice, inv.Devices[cpu].Index
			}
		}
	}
	return in, nil
}

// expertsView offers, for each model with routed experts, to keep them in
// system RAM (--cpu-moe), with their size.
func expertsView(p *plan.Plan) []widgets.ExpertsOption {
	var out []widgets.ExpertsOption
	for _, m := range []struct {
		mp   *plan.ModelPlan
		name string
	}{{&p.Target, "target"}, {p.Draft, "draft"}} {
		if m.mp == nil {
			continue
		}
		if n := m.mp.ExpertBytes(); n > 0 {
			out = append(out, widgets.ExpertsOption{
				Text: fmt.Sprintf("Keep the %s's experts in system RAM (%s, llama.cpp's --cpu-moe)", m.name, ibytes(n)),
				On:   m.mp.Placement.Experts == plan.ExpertsOnDevice, Draft: m.name == "draft",
			})
		}
	}
	return out
}

// switchExperts turns keeping a model's experts in system RAM on or off.
func (m *mainWindow) switchExperts(draft, on bool) {
	if draft {
		m.set.Layout.DraftCPUMoE = on
	} else {
		m.set.Layout.TargetCPUMoE = on
	}
	m.changed()
}

// kvChoices are the KV cache types the window offers for a layout: those
// every device of it runs.
func kvChoices(l Layout, inv device.Inventory) []string {
	var devs []device.Device
	for _, d := range inv.Devices {
		if slices.Contains(l.TargetDevices, d.Index) || slices.Contains(l.DraftDevices, d.Index) {
			devs = append(devs, d)
		}
	}
	var names []string
	for _, t := range plan.KVChoices(devs) {
		names = append(names, plan.KVTypeName(t))
	}
	return names
}

// kvTypeOf is the layout's KV cache type: the planner's default where it
// names none, or none the planner knows.
func kvTypeOf(l Layout) quant.Type {
	t, err := plan.ParseKVType(l.KVType)
	if err != nil {
		return plan.DefaultKVType
	}
	return t
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// remoteHint offers a remote engine when no local layout fits.
const remoteHint = "Or run it on an engine that spans machines (vLLM, SGLang, llama.cpp's RPC servers): " +
	"the chat can talk to any OpenAI-compatible server instead of the local models."

// previewOf turns a plan (or the reason there is none) into what the memory
// preview shows.
func previewOf(p *plan.Plan, err error) widgets.Preview {
	if err != nil {
		return widgets.Preview{Error: sentence(err)}
	}
	var pv widgets.Preview
	pv.Fits = p.Fits
	var over []string
	for _, b := range p.Devices {
		c := b.Categories()
		pv.Devices = append(pv.Devices, widgets.DeviceMemory{
			Label: deviceName(b.Device) + " · " + b.Device.Name, Role: b.Role(), Capacity: b.Capacity,
			Segments: []widgets.Segment{
				{Category: widgets.Weights, Bytes: c.Weights}, {Category: widgets.Embedding, Bytes: c.Embedding},
				{Category: widgets.Head, Bytes: c.Head}, {Category: widgets.KV, Bytes: c.KV},
				{Category: widgets.Scratch, Bytes: c.Scratch}, {Category: widgets.Draft, Bytes: c.Draft},
				{Category: widgets.Overhead, Bytes: c.Overhead}, {Category: widgets.Experts, Bytes: c.Experts},
			},
		})
		if !b.Fits() {
			over = append(over, fmt.Sprintf("%s is over by %s", deviceName(b.Device), ibytes(-b.Spare())))
		}
	}
	ctx := fmt.Sprintf("context %d tokens, KV cache %v", p.Ctx, p.KV)
	if p.Fits {
		pv.Summary = "Fits (" + ctx + ")."
	} else {
		pv.Summary = "Does not fit: " + strings.Join(over, ", ") + " (" + ctx + ")."
		if len(p.Suggestions) == 0 {
			pv.Summary += " No single change makes it fit: add devices, or choose a smaller model or context."
			pv.Remote = remoteHint
		}
	}
	for _, s := range p.Suggestions {
		pv.Suggestions = append(pv.Suggestions, capitalize(s.Text)+".")
	}
	pv.Borrow = borrowView(p)
	pv.Experts = expertsView(p)
	return pv
}

// previewOf is previewOf with a refused layout's problem told in the
// window's words (device names, zones) and its repairs offered as fixes.
func (m *mainWindow) previewOf(p *plan.Plan, err error, repairs []plan.Suggestion) widgets.Preview {
	if err == nil {
		return previewOf(p, nil)
	}
	pv := widgets.Preview{Error: planProblem(err, m.inv)}
	if len(repairs) > 0 {
		pv.FixesTitle = "One click changes the layout:"
	}
	for _, r := range repairs {
		text := capitalize(r.Text) + "."
		if !r.Plan.Fits {
			text += " It can then be planned, but does not fit yet."
		}
		pv.Suggestions = append(pv.Suggestions, text)
	}
	return pv
}

// planProblem says why the planner refused a layout, in the words of the
// window: the device's name as on its chip, and what to do in the zones.
// A draft is spread by free memory, so its zone has no ratio to raise.
func planProblem(err error, inv device.Inventory) string {
	var idle *plan.IdleDeviceError
	if !errors.As(err, &idle) {
		return sentence(err)
	}
	name := fmt.Sprintf("device %d", idle.Device)
	if d, ok := inv.Device(idle.Device); ok {
		name = deviceName(d)
	}
	if idle.Role == plan.Draft {
		return fmt.Sprintf("The draft model has %s: too few to share between the devices in the Draft zone, and %s would hold none of them. "+
			"Run the draft on fewer devices.", plural(idle.Blocks, "block"), name)
	}
	return fmt.Sprintf("At its ratio (%.1f%% of the model), %s would hold none of the target model's %s. "+
		"Raise its ratio under its chip in the Target zone, or take it out of the zone.", 100*idle.Share, name, plural(idle.Blocks, "block"))
}

// borrowView is the plan's borrow report as the preview shows it: what a
// head-sharing draft borrows, and each way to use it with what the draft
// then holds on each device.
func borrowView(p *plan.Plan) *widgets.Borrow {
	r := p.Borrow
	if r == nil {
		return nil
	}
	b := &widgets.Borrow{Text: fmt.Sprintf("The draft borrows the target's %s (%s; a copy costs %s).",
		tensorWords(r.Tensors), strings.Join(r.Tensors, ", "), ibytes(r.Bytes))}
	for _, o := range r.Options {
		text := capitalize(o.Text) + "."
		if len(o.Draft) > 0 {
			var held []string
			for _, i := range slices.Sorted(maps.Keys(o.Draft)) {
				held = append(held, ibytes(o.Draft[i])+" on "+planDeviceName(p, i))
			}
			text += " The draft holds " + strings.Join(held, ", ") + "."
		}
		if !o.Fits {
			text += " Does not fit."
		}
		b.Options = append(b.Options, widgets.BorrowOption{Text: text, Chosen: o.Mode == r.Chosen, Fits: o.Fits})
	}
	return b
}

// tensorWords names borrowed tensors as people say them.
func tensorWords(names []string) string {
	var w []string
	for _, n := range names {
		switch n {
		case "token_embd.weight":
			w = append(w, "token embedding")
		case "output.weight":
			w = append(w, "output head")
		default:
			w = append(w, n)
		}
	}
	return strings.Join(w, " and ")
}

// planDeviceName names device index i of the plan's inventory.
func planDeviceName(p *plan.Plan, i int) string {
	for _, b := range p.Devices {
		if b.Device.Index == i {
			return deviceName(b.Device)
		}
	}
	return fmt.Sprintf("device %d", i)
}

// applyChange makes a planner suggestion's change in a layout.
func applyChange(l Layout, c plan.Change) Layout {
	if c.Ratios != nil || c.TargetDevices != nil {
		l.TargetRatios = slices.Clone(c.Ratios)
	}
	if c.TargetDevices != nil {
		l.TargetDevices = slices.Clone(c.TargetDevices)
	}
	if c.KV != nil {
		l.KVType = plan.KVTypeName(c.KV.K)
	}
	if c.Head != "" {
		l.Head = string(c.Head)
	}
	if c.Split != "" {
		l.Split = string(c.Split)
	}
	if c.Borrow != "" {
		l.Borrow = string(c.Borrow)
	}
	if c.Ctx > 0 {
		l.Ctx = c.Ctx
	}
	if c.DraftDevices != nil {
		l.DraftDevices = slices.Clone(c.DraftDevices)
	}
	if c.ExpertsDevice != nil {
		l.TargetCPUMoE = true // the layout's CPU device, as planInput finds it
	}
	return l
}

// sentence is an error as a person reads it: the package prefixes the
// wrapping adds are for logs, the last part says what is wrong.
func sentence(err error) string {
	s := err.Error()
	for {
		head, rest, ok := strings.Cut(s, ": ")
		if !ok || strings.ContainsAny(head, " /.") {
			break
		}
		s = rest
	}
	if strings.HasSuffix(s, "…") {
		return capitalize(s)
	}
	return capitalize(strings.TrimSuffix(s, ".")) + "."
}

func capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
