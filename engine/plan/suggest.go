package plan

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/tandem-run/tandem/kernels/quant"
)

// Suggestion is a change that makes a plan fit. Changes are command-line
// flags (without the dashes) and their values: {"kv-type": "q8_0"}.
type Suggestion struct {
	Text    string
	Changes map[string]string
	Plan    *Plan // the plan with the change; it fits
}

// minSuggestedCtx is the smallest context worth suggesting.
const minSuggestedCtx = 512

// suggest tries the usual fixes for a plan that does not fit, one at a time
// (and a smaller context with a q8_0 cache together), and keeps those that
// fit.
func suggest(in Input, p *Plan) []Suggestion {
	var out []Suggestion
	try := func(text string, changes map[string]string, alt Input) bool {
		q, err := build(alt)
		if err != nil || !q.Fits {
			return false
		}
		out = append(out, Suggestion{Text: text, Changes: changes, Plan: q})
		return true
	}
	tp := p.Target.Placement

	if len(tp.Devices) > 1 {
		if ratios, ok := fittingRatios(in, p); ok {
			alt := in
			alt.TargetPlacement.Ratios = ratios
			s := intString(ratios)
			try("spread the target "+strings.ReplaceAll(s, ",", ":")+" over its devices", map[string]string{"ratios": s}, alt)
		}
	}
	if in.KVType != quant.Q8_0 {
		alt := in
		alt.KVType = quant.Q8_0
		try("store the KV cache as q8_0", map[string]string{"kv-type": "q8_0"}, alt)
	}
	if len(tp.Devices) > 1 && tp.Head != HeadSplit {
		alt := in
		alt.TargetPlacement.Head = HeadSplit
		try("split the head by vocabulary across the target's devices", map[string]string{"head": string(HeadSplit)}, alt)
	}
	if tp.Split == SplitTensor {
		alt := in
		alt.TargetPlacement.Split = SplitLayer
		try("split the target by layers (no mirrored norms or per-block exchange buffers)", map[string]string{"split": string(SplitLayer)}, alt)
	}
	if p.Draft != nil {
		if p.Draft.Placement.Borrow == BorrowCopy && len(p.Draft.Borrowed) > 0 {
			alt := in
			alt.DraftPlacement.Borrow = BorrowInPlace
			try("let the draft use the target's head where it is instead of a copy", map[string]string{"borrow": string(BorrowInPlace)}, alt)
		}
		for _, d := range draftMoves(in, p) {
			alt := in
			alt.DraftPlacement = Placement{Devices: []int{d}, Borrow: in.DraftPlacement.Borrow}
			dev, _ := findDevice(in.Devices, d)
			if try("put the draft on "+dev.Label(), map[string]string{"draft-devices": strconv.Itoa(d)}, alt) {
				break
			}
		}
	}
	if !smallerContext(in, "", try) && in.KVType != quant.Q8_0 {
		alt := in
		alt.KVType = quant.Q8_0
		smallerContext(alt, "q8_0", try)
	}
	return out
}

// smallerContext suggests the largest halved context that fits.
func smallerContext(in Input, kv string, try func(string, map[string]string, Input) bool) bool {
	for ctx := in.Ctx / 2; ctx >= max(minSuggestedCtx, in.Batch); ctx /= 2 {
		alt := in
		alt.Ctx = ctx
		changes := map[string]string{"ctx": strconv.Itoa(ctx)}
		text := fmt.Sprintf("use a context of %d tokens", ctx)
		if kv != "" {
			changes["kv-type"] = kv
			text += " with a " + kv + " KV cache"
		}
		if try(text, changes, alt) {
			return true
		}
	}
	return false
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
