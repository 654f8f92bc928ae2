package plan

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/dustin/go-humanize"
	"github.com/tandem-run/tandem/engine/device"
	"github.com/tandem-run/tandem/kernels/quant"
)

// Suggestion is a change that makes a plan fit.
type Suggestion struct {
	Text   string
	Change Change
	Plan   *Plan // the plan with the change; it fits
}

// Change is what a suggestion changes in the planner's Input; the fields
// left at their zero value stay as they were. The window applies it to its
// layout and the command line names the flags that make it.
type Change struct {
	Ratios []float64 `json:"ratios,omitempty"` // the target's device weights
	// TargetDevices puts the target on these devices, with Ratios as its
	// ratios (nil: by free memory).
	TargetDevices []int    `json:"target_devices,omitempty"`
	KV            *KVTypes `json:"kv_type,omitempty"`
	Head          HeadMode `json:"head,omitempty"`
	Split         Split    `json:"split,omitempty"`
	Borrow        Borrow   `json:"borrow,omitempty"`
	Ctx           int      `json:"ctx,omitempty"`
	DraftDevices  []int    `json:"draft_devices,omitempty"` // the draft alone on these
	// ExpertsDevice keeps the target's routed experts on this device, the
	// CPU's memory (--cpu-moe).
	ExpertsDevice *int `json:"experts_device,omitempty"`
}

// Apply is in with the change made; a suggestion's plan is Make of it.
func (c Change) Apply(in Input) Input {
	if c.Ratios != nil || c.TargetDevices != nil {
		in.TargetPlacement.Ratios = slices.Clone(c.Ratios)
	}
	if c.TargetDevices != nil {
		in.TargetPlacement.Devices = slices.Clone(c.TargetDevices)
	}
	if c.KV != nil {
		in.KV = *c.KV
	}
	if c.Head != "" {
		in.TargetPlacement.Head = c.Head
	}
	if c.Split != "" {
		in.TargetPlacement.Split = c.Split
	}
	if c.Borrow != "" {
		in.DraftPlacement.Borrow = c.Borrow
	}
	if c.Ctx > 0 {
		in.Ctx = c.Ctx
	}
	if c.DraftDevices != nil {
		in.DraftPlacement = Placement{Devices: slices.Clone(c.DraftDevices), Borrow: in.DraftPlacement.Borrow}
	}
	if c.ExpertsDevice != nil {
		in.TargetPlacement.Experts, in.TargetPlacement.ExpertDevice = ExpertsOnDevice, *c.ExpertsDevice
	}
	return in
}

// expertsToCPU is the CPU device of in's inventory (its last) that the
// target's routed experts could move to: there is one, the target's experts
// are with its blocks, and it does not run the target.
func expertsToCPU(in Input, p *Plan) (int, bool) {
	tp := p.Target.Placement
	if tp.Experts == ExpertsOnDevice || p.Target.ExpertBytes() == 0 {
		return 0, false
	}
	cpu := -1
	for _, d := range in.Devices {
		if d.Kind == device.CPU {
			cpu = d.Index
		}
	}
	return cpu, cpu >= 0 && !slices.Contains(tp.Devices, cpu)
}

// minSuggestedCtx is the smallest context worth suggesting.
const minSuggestedCtx = 512

// suggest tries the usual fixes for a plan that does not fit, one at a time
// (and a smaller context with a q8_0 cache together), and keeps those that
// fit. A KV type is suggested only where every device of the models runs it.
func suggest(in Input, p *Plan) []Suggestion {
	var out []Suggestion
	try := func(text string, c Change) bool {
		q, err := build(c.Apply(in))
		if err != nil || !q.Fits {
			return false
		}
		out = append(out, Suggestion{Text: text, Change: c, Plan: q})
		return true
	}
	tp := p.Target.Placement
	q8 := SameKV(quant.Q8_0)
	smallerKV := in.KV != q8 && q8.RunsOnAll(in.modelDevices())

	if cpu, ok := expertsToCPU(in, p); ok {
		// The trick people use for a big MoE on small GPUs: nothing of the
		// model's quality is given up, only the experts' speed.
		dev, _ := findDevice(in.Devices, cpu)
		try(fmt.Sprintf("keep the target's experts (%s) in system RAM, on %s (llama.cpp's --cpu-moe)", humanize.IBytes(uint64(p.Target.ExpertBytes())), dev.Label()),
			Change{ExpertsDevice: &cpu})
	}
	if len(tp.Devices) > 1 {
		if ratios, ok := fittingRatios(in, p); ok {
			try("spread the target "+strings.ReplaceAll(intString(ratios), ",", ":")+" over its devices", Change{Ratios: ratios})
		}
	}
	if smallerKV {
		try("store the KV cache as q8_0", Change{KV: &q8})
	}
	if len(tp.Devices) > 1 && tp.Head != HeadSplit {
		try("split the head by vocabulary across the target's devices", Change{Head: HeadSplit})
	}
	if tp.Split == SplitTensor {
		try("split the target by layers (no mirrored norms or per-block exchange buffers)", Change{Split: SplitLayer})
	}
	if p.Draft != nil {
		if p.Draft.Placement.Borrow == BorrowCopy && len(p.Draft.Borrowed) > 0 {
			try("let the draft use the target's head where it is instead of a copy", Change{Borrow: BorrowInPlace})
		}
		for _, d := range draftMoves(in, p) {
			dev, _ := findDevice(in.Devices, d)
			if !in.KV.RunsOn(dev.Kind) {
				continue
			}
			if try("put the draft on "+dev.Label(), Change{DraftDevices: []int{d}}) {
				break
			}
		}
	}
	if !smallerContext(in, nil, try) && smallerKV {
		smallerContext(in, &q8, try)
	}
	return out
}

// smallerContext suggests the largest smaller context that fits, with kv
// as the cache type when not nil. It tries the target's trained length
// when the context is past it, then powers of two below both: never a
// context the model was not trained for, nor an odd one such as half of
// a number typed by hand.
func smallerContext(in Input, kv *KVTypes, try func(string, Change) bool) bool {
	for _, ctx := range contextSteps(in.Ctx, TrainedCtx(in.Target), max(minSuggestedCtx, in.Batch)) {
		text := fmt.Sprintf("use a context of %d tokens", ctx)
		if kv != nil {
			text += fmt.Sprintf(" with a %v KV cache", *kv)
		}
		if try(text, Change{Ctx: ctx, KV: kv}) {
			return true
		}
	}
	return false
}

// contextSteps are the contexts below ctx worth suggesting, largest
// first: trained (when known and below ctx), then the powers of two below
// both, down to least.
func contextSteps(ctx, trained, least int) []int {
	top := ctx
	var out []int
	if trained > 0 && trained < ctx {
		top = trained
		if trained >= least {
			out = append(out, trained)
		}
	}
	p := 1
	for p*2 < top {
		p *= 2
	}
	for ; p >= least && p < top; p /= 2 {
		out = append(out, p)
	}
	return out
}

// fittingRatios weighs the target's devices by the room each has for the
// parts of the target that follow the ratios (blocks, KV, split head), after
// what stays put (overhead, scratch, the draft). Discrete blocks make this
// approximate, so it is refined on the resulting plan a few times. The
// ratios are whole percentages, as a user would type them.
func fittingRatios(in Input, p *Plan) ([]float64, bool) {
	devs := p.Target.Placement.Devices
	q := p
	for range 3 {
		var ratios []float64
		for _, d := range devs {
			b, _ := budgetOf(q, d)
			moving := sum(b.Target.Weights, b.Target.KV)
			if q.Target.Placement.Head == HeadSplit {
				moving += b.Target.Head
			}
			room := float64(b.Capacity - (b.Total() - moving))
			if room <= 0 {
				return nil, false
			}
			ratios = append(ratios, room)
		}
		ratios = percentages(ratios)
		alt := in
		alt.TargetPlacement.Ratios = ratios
		next, err := build(alt)
		if err != nil {
			return nil, false
		}
		if next.Fits {
			return ratios, true
		}
		q = next
	}
	return nil, false
}

// draftMoves lists devices the draft could move to: those the target does
// not use first, then those with the most spare memory.
func draftMoves(in Input, p *Plan) []int {
	type option struct {
		d      int
		shared bool
		spare  int64
	}
	var opts []option
	for _, dev := range in.Devices {
		if slices.Contains(p.Draft.Placement.Devices, dev.Index) {
			continue
		}
		b, used := budgetOf(p, dev.Index)
		spare := int64(dev.Capacity()) - Overhead(dev)
		if used {
			spare = b.Spare() + b.Draft.Total()
		}
		opts = append(opts, option{dev.Index, used && b.Target.Total() > 0, spare})
	}
	slices.SortStableFunc(opts, func(a, b option) int {
		if a.shared != b.shared {
			if a.shared {
				return 1
			}
			return -1
		}
		return cmp.Compare(b.spare, a.spare)
	})
	out := make([]int, len(opts))
	for i, o := range opts {
		out[i] = o.d
	}
	return out
}

func budgetOf(p *Plan, d int) (Budget, bool) {
	for _, b := range p.Devices {
		if b.Device.Index == d {
			return b, true
		}
	}
	return Budget{}, false
}

// percentages rounds weights to whole percentages, none below 1.
func percentages(w []float64) []float64 {
	var sum float64
	for _, x := range w {
		sum += x
	}
	out := make([]float64, len(w))
	for i, x := range w {
		out[i] = max(1, math.Round(100*x/sum))
	}
	return out
}

// intString writes whole numbers as a flag value: "62,38".
func intString[T int | float64](xs []T) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = strconv.FormatFloat(float64(x), 'f', -1, 64)
	}
	return strings.Join(s, ",")
}
