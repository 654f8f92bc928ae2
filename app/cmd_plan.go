package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/dustin/go-humanize"

	"github.com/tandem-run/tandem/engine/device"
	"github.com/tandem-run/tandem/engine/plan"
)

// exitNoFit is the exit status of a plan that does not fit.
const exitNoFit = 3

func runPlan(ctx context.Context, args []string, out, errOut io.Writer) error {
	fs := newFlags("plan", errOut)
	modelPath := fs.String("model", "", "target model `GGUF` (required), or a Hub model (hf://OWNER/NAME/FILE.gguf, OWNER/NAME:QUANT: its header only)")
	draftPath := fs.String("draft", "", "draft model `GGUF`, or a Hub model")
	devicesFile := fs.String("devices-file", "", "plan against this inventory `file` (tandem devices --json) instead of the GPUs here")
	virtual := fs.String("virtual-devices", "", "plan against virtual devices, e.g. `cuda0:12GiB,cuda0:12GiB,cpu:8GiB`")
	targetDevs := fs.String("target-devices", "", "target's device `indices`, in order (default: all)")
	draftDevs := fs.String("draft-devices", "", "draft's device `indices` (default: where the target runs its head)")
	split := fs.String("split", string(plan.SplitLayer), "how the target spreads over its devices: `layer` or tensor")
	ratios := fs.String("ratios", "", "weights of the target's devices, e.g. `3,1` (default: by free memory)")
	head := fs.String("head", "", "target's output head: `single` (on the last device), replicated or split (default: single for layer split, split for tensor split)")
	borrow := fs.String("borrow", string(plan.BorrowInPlace), "a draft that borrows the target's head and embedding uses them where the target keeps them (`target`) or copies them (copy)")
	ctxSize := fs.Int("ctx", 0, fmt.Sprintf("context size in `tokens` (default: %d, or less if the model was trained shorter)", plan.DefaultCtx))
	batch := fs.Int("batch", 0, fmt.Sprintf("most `tokens` per forward pass (prefill chunk, verification batch; default: %d, at most the context)", plan.DefaultBatch))
	kvType := fs.String("kv-type", plan.KVTypeName(plan.DefaultKVType), "KV cache `type` of K and V: f16, q8_0, q4_0 or f32 (llama.cpp's -ctk)")
	kvTypeV := fs.String("kv-type-v", "", "the V cache's `type` when it differs from --kv-type (llama.cpp's -ctv)")
	parallel := fs.Int("parallel", 1, "sequences the target decodes together (tandem serve --parallel): a KV cache of the context for `each`")
	asJSON := fs.Bool("json", false, "print the plan as JSON, every number in bytes")
	var cpuMoE, cpuMoEDraft bool
	registerCPUMoE(fs, &cpuMoE, &cpuMoEDraft)
	fs.Usage = func() {
		fmt.Fprintln(errOut, "Usage: tandem plan --model M [--draft D] [flags]\n\n"+
			"Shows what each device would hold, before anything loads; only the GGUF headers are read.\n"+
			"Exit status: 0 when the plan fits, 3 when it does not.")
		fs.PrintDefaults()
	}
	if rest, err := parseFlags(fs, args); err != nil {
		return err
	} else if len(rest) > 0 || *modelPath == "" {
		fs.Usage()
		return errUsage
	}
	inv, err := loadInventory(*devicesFile, *virtual)
	if err != nil {
		return err
	}
	in := plan.Input{Batch: *batch, Ctx: *ctxSize, Parallel: *parallel}
	target, err := openModelHeader(ctx, *modelPath)
	if err != nil {
		return err
	}
	defer target.Close()
	in.Target, in.Devices = target, inv.Devices
	if *draftPath != "" {
		draft, err := openModelHeader(ctx, *draftPath)
		if err != nil {
			return err
		}
		defer draft.Close()
		in.Draft = draft
	}
	if in.KV, err = plan.ParseKVTypes(*kvType, *kvTypeV); err != nil {
		return usageError(errOut, fmt.Errorf("--kv-type: %w", err))
	}
	if in.TargetPlacement, err = parsePlacement(*targetDevs, *split, *ratios, *head, inv); err != nil {
		return usageError(errOut, err)
	}
	if in.DraftPlacement, err = parseDraftPlacement(*draftDevs, *borrow); err != nil {
		return usageError(errOut, err)
	}
	inv = hostExperts(inv, &in.TargetPlacement, &in.DraftPlacement, cpuMoE, cpuMoEDraft, device.Host)
	in.Devices = inv.Devices
	p, err := plan.Make(in)
	if err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		if err := enc.Encode(p.Report()); err != nil {
			return err
		}
	} else {
		printPlan(out, p, inv)
	}
	if !p.Fits {
		return &exitError{exitNoFit, errors.New("the plan does not fit")}
	}
	return nil
}

// loadInventory reads the devices a plan is for: a file, virtual devices,
// or the GPUs of this machine.
func loadInventory(file, virtual string) (device.Inventory, error) {
	var inv device.Inventory
	var err error
	switch {
	case file != "" && virtual != "":
		return inv, errors.New("--devices-file and --virtual-devices exclude each other")
	case file != "":
		inv, err = device.ReadFile(file)
	case virtual != "":
		inv, err = device.ParseVirtual(virtual)
	default:
		inv = device.Probe()
	}
	if err == nil && len(inv.Devices) == 0 {
		err = fmt.Errorf("no devices to plan for (%s); describe some with --devices-file or --virtual-devices", inv.Reason)
	}
	return inv, err
}

func usageError(errOut io.Writer, err error) error {
	fmt.Fprintf(errOut, "tandem plan: %v\n", err)
	return errUsage
}

// parsePlacement reads the target's placement flags; no device list means
// every device of the inventory (plan.Input.Resolve).
func parsePlacement(devs, split, ratios, head string, inv device.Inventory) (plan.Placement, error) {
	var p plan.Placement
	var err error
	if p.Devices, err = parseInts("--target-devices", devs); err != nil {
		return p, err
	}
	if head == string(plan.HeadSingle) && p.Devices == nil {
		// The head's device is the last of the resolved list.
		p.Devices = plan.Input{Devices: inv.Devices}.Resolve().TargetPlacement.Devices
	}
	switch split {
	case "layer", "tensor":
		p.Split = plan.Split(split)
	default:
		return p, fmt.Errorf("--split %q: want layer or tensor", split)
	}
	switch head {
	case "", "single", "replicated", "split":
		p.Head = plan.HeadMode(head)
	default:
		return p, fmt.Errorf("--head %q: want single, replicated or split", head)
	}
	if p.Head == plan.HeadSingle && len(p.Devices) > 0 {
		p.HeadDevice = p.Devices[len(p.Devices)-1]
	}
	if ratios != "" {
		for _, f := range strings.Split(ratios, ",") {
			r, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
			if err != nil {
				return p, fmt.Errorf("--ratios %q: %w", ratios, err)
			}
			p.Ratios = append(p.Ratios, r)
		}
	}
	return p, nil
}

// parseDraftPlacement reads the draft's flags; no device list means the
// target's last device (plan.Input.Resolve).
func parseDraftPlacement(devs, borrow string) (plan.Placement, error) {
	p := plan.Placement{Borrow: plan.Borrow(borrow)}
	if borrow != string(plan.BorrowInPlace) && borrow != string(plan.BorrowCopy) {
		return p, fmt.Errorf("--borrow %q: want target or copy", borrow)
	}
	var err error
	p.Devices, err = parseInts("--draft-devices", devs)
	return p, err
}

func parseInts(flag, s string) ([]int, error) {
	if s == "" {
		return nil, nil
	}
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 0 {
			return nil, fmt.Errorf("%s %q: want device indices like 0,1", flag, s)
		}
		out = append(out, n)
	}
	return out, nil
}

// printPlan writes the per-device table, the head-sharing options and the
// suggestions.
func printPlan(out io.Writer, p *plan.Plan, inv device.Inventory) {
	describeModel(out, &p.Target, inv)
	if p.Draft != nil {
		describeModel(out, p.Draft, inv)
	}
	fmt.Fprintf(out, "context %d tokens, batch %d, KV cache %v", p.Ctx, p.Batch, p.KV)
	if p.Parallel > 1 {
		fmt.Fprintf(out, ", %d parallel sequences (the target's KV, and a draft model's, is %d caches of the context)", p.Parallel, p.Parallel)
	}
	fmt.Fprint(out, "\n\n")

	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	b := func(n int64) string {
		if n == 0 {
			return "-"
		}
		return humanize.IBytes(uint64(n))
	}
	// The experts' column is there when experts are kept apart (--cpu-moe).
	var ram []string
	for _, d := range p.Devices {
		if n := d.Categories().Experts + d.Draft.Experts; n > 0 {
			ram = append(ram, fmt.Sprintf("%s of experts in %s (%s)", b(n), d.Device.Label(), d.Device.Name))
		}
	}
	experts := func(c plan.Categories) string {
		if len(ram) == 0 {
			return ""
		}
		return b(c.Experts) + "\t"
	}
	head := "DEVICE\tROLE\tWEIGHTS\t"
	if len(ram) > 0 {
		head += "EXPERTS\t"
	}
	fmt.Fprintln(tw, head+"EMBEDDING\tHEAD\tKV\tSCRATCH\tDRAFT\tOVERHEAD\tTOTAL\tCAPACITY\t\tVERDICT\t")
	for _, d := range p.Devices {
		c := d.Categories()
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\t%s\t\n", d.Device.Label(), d.Role(),
			b(c.Weights), experts(c), b(c.Embedding), b(c.Head), b(c.KV), b(c.Scratch), b(c.Draft), b(c.Overhead),
			b(d.Total()), b(d.Capacity), d.Verdict())
	}
	tw.Flush()
	if len(ram) > 0 {
		fmt.Fprintf(out, "\nSystem RAM: %s.\n", strings.Join(ram, "; "))
	}
	names := make(map[int]string)
	for _, d := range p.Devices {
		names[d.Device.Index] = d.Device.Name
	}
	fmt.Fprintln(out)
	for _, i := range slices.Sorted(maps.Keys(names)) {
		d, _ := inv.Device(i)
		fmt.Fprintf(out, "  %s: %s\n", d.Label(), names[i])
	}

	if len(p.Heads) > 0 {
		fmt.Fprintln(out, "\nThe target's head, three ways (total per device):")
		for _, h := range p.Heads {
			mark := " "
			if h.Mode == p.Target.Placement.Head {
				mark = "*"
			}
			fmt.Fprintf(out, " %s --head %-10s  %s; %s\n", mark, h.Mode, perDevice(h.Totals, inv), fitsWord(h.Fits))
		}
	}

	if p.Borrow != nil {
		fmt.Fprintf(out, "\nThe draft borrows the target's %s. Two ways to run it:\n", strings.Join(p.Borrow.Tensors, " and "))
		for _, o := range p.Borrow.Options {
			mark := " "
			if o.Mode == p.Borrow.Chosen {
				mark = "*"
			}
			fmt.Fprintf(out, " %s --borrow %s: %s\n     draft memory: %s; %s\n", mark, o.Mode, o.Text, perDevice(o.Draft, inv), fitsWord(o.Fits))
		}
	}

	fmt.Fprintln(out)
	if p.Fits {
		fmt.Fprintln(out, "The plan fits.")
		return
	}
	fmt.Fprintln(out, "The plan does not fit.")
	if len(p.Suggestions) == 0 {
		fmt.Fprintln(out, "No single change found that fits: try more devices, a smaller model or a smaller context.")
		return
	}
	fmt.Fprintln(out, "Each of these fits:")
	for _, s := range p.Suggestions {
		fmt.Fprintf(out, "  %s (%s)\n", s.Text, strings.Join(changeFlags(s.Change), " "))
	}
}

// changeFlags are the command-line flags that make a planner's change.
func changeFlags(c plan.Change) []string {
	var flags []string
	if c.Ratios != nil {
		flags = append(flags, "--ratios "+floats(c.Ratios))
	}
	if c.KV != nil {
		flags = append(flags, "--kv-type "+plan.KVTypeName(c.KV.K))
		if c.KV.V != c.KV.K {
			flags = append(flags, "--kv-type-v "+plan.KVTypeName(c.KV.V))
		}
	}
	if c.Head != "" {
		flags = append(flags, "--head "+string(c.Head))
	}
	if c.Split != "" {
		flags = append(flags, "--split "+string(c.Split))
	}
	if c.Borrow != "" {
		flags = append(flags, "--borrow "+string(c.Borrow))
	}
	if c.Ctx > 0 {
		flags = append(flags, "--ctx "+strconv.Itoa(c.Ctx))
	}
	if c.DraftDevices != nil {
		var ids []string
		for _, d := range c.DraftDevices {
			ids = append(ids, strconv.Itoa(d))
		}
		flags = append(flags, "--draft-devices "+strings.Join(ids, ","))
	}
	if c.ExpertsDevice != nil {
		flags = append(flags, "--cpu-moe")
	}
	return flags
}

// floats writes numbers as a flag value: "62,38".
func floats(xs []float64) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = strconv.FormatFloat(x, 'f', -1, 64)
	}
	return strings.Join(s, ",")
}

// perDevice writes bytes per device: "GPU 0 1.2 GiB, GPU 1 900 MiB".
func perDevice(bytes map[int]int64, inv device.Inventory) string {
	var per []string
	for _, i := range slices.Sorted(maps.Keys(bytes)) {
		d, _ := inv.Device(i)
		per = append(per, fmt.Sprintf("%s %s", d.Label(), humanize.IBytes(uint64(bytes[i]))))
	}
	return strings.Join(per, ", ")
}

func fitsWord(fits bool) string {
	if fits {
		return "fits"
	}
	return "does not fit"
}

// describeModel is one line on a model and where it goes.
func describeModel(out io.Writer, m *plan.ModelPlan, inv device.Inventory) {
	s, pl := m.Shape, m.Placement
	var where []string
	for _, i := range pl.Devices {
		d, _ := inv.Device(i)
		where = append(where, d.Label())
	}
	spread := strings.Join(where, ", ")
	if len(where) > 1 {
		var pct []string
		for _, r := range pl.Ratios {
			pct = append(pct, strconv.FormatFloat(math.Round(r*1000)/10, 'f', -1, 64))
		}
		spread = fmt.Sprintf("%s split over %s (%s%%)", pl.Split, spread, strings.Join(pct, ":"))
	}
	head := "head " + string(pl.Head)
	if pl.Head == plan.HeadSingle {
		d, _ := inv.Device(pl.HeadDevice)
		head = "head on " + d.Label()
	}
	if len(m.Borrowed) > 0 {
		head = "borrows the target's head"
	}
	fmt.Fprintf(out, "%-6s %s: %s, %d blocks, width %d, vocabulary %d; %s, %s\n",
		m.Role, m.Path, s.Arch, s.Blocks, s.Embd, s.Vocab, spread, head)
}
