//go:build !headless

package app

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/dustin/go-humanize"

	"github.com/tandem-run/tandem/engine/device"
	"github.com/tandem-run/tandem/engine/gguf"
	"github.com/tandem-run/tandem/engine/plan"
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
// chosen; a draft with no devices runs where the target's head is.
func planInput(target, draft *gguf.File, l Layout, inv device.Inventory) (plan.Input, error) {
	in := plan.Input{Target: target, Draft: draft, Devices: inv.Devices, Ctx: l.Ctx, Batch: defaultBatch}
	if in.Ctx == 0 {
		in.Ctx = defaultCtx
		if n, ok := target.ArchUint("context_length"); ok && n > 0 && n < defaultCtx {
			in.Ctx = int(n)
		}
	}
	in.Batch = min(in.Batch, in.Ctx)
	var err error
	if in.KVType, err = parseKVType(cmpOr(l.KVType, "f16")); err != nil {
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
	if draft != nil && len(l.DraftDevices) == 0 {
		in.DraftPlacement.Devices = l.TargetDevices[len(l.TargetDevices)-1:]
	}
	return in, nil
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
				{Category: widgets.Overhead, Bytes: c.Overhead},
			},
		})
		if !b.Fits() {
			over = append(over, fmt.Sprintf("%s is over by %s", deviceName(b.Device), ibytes(-b.Spare())))
		}
	}
	ctx := fmt.Sprintf("context %d tokens, KV cache %v", p.Ctx, p.KVType)
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
	return pv
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

// applyChanges applies a planner suggestion (flag names and values, as
// `tandem plan` prints them) to a layout.
func applyChanges(l Layout, changes map[string]string) (Layout, error) {
	for _, k := range slices.Sorted(maps.Keys(changes)) {
		v := changes[k]
		switch k {
		case "ratios":
			var r []float64
			for _, f := range strings.Split(v, ",") {
				x, err := strconv.ParseFloat(f, 64)
				if err != nil {
					return l, fmt.Errorf("app: suggestion ratios %q: %w", v, err)
				}
				r = append(r, x)
			}
			l.TargetRatios = r
		case "kv-type":
			l.KVType = v
		case "head":
			l.Head = v
		case "split":
			l.Split = v
			if v == string(plan.SplitLayer) {
				l.Head = ""
			}
		case "borrow":
			l.Borrow = v
		case "ctx":
			n, err := strconv.Atoi(v)
			if err != nil {
				return l, fmt.Errorf("app: suggestion ctx %q: %w", v, err)
			}
			l.Ctx = n
		case "draft-devices":
			ids, err := parseInts("draft-devices", v)
			if err != nil {
				return l, err
			}
			l.DraftDevices = ids
		default:
			return l, fmt.Errorf("app: suggestion changes %q, which the window does not know", k)
		}
	}
	return l, nil
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
	return capitalize(strings.TrimSuffix(s, ".")) + "."
}

func capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
