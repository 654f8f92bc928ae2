package plan

import (
	"errors"
	"fmt"
	"math"
	"slices"
)

// IdleDeviceError is a layer split that leaves one of a model's devices
// without a block: its share is too small for one (a one-block draft over
// two devices, a ratio typed too low). Make returns it rather than a plan
// with an idle device, since such a device still costs its overhead and a
// pipeline hop; Repairs turns it into changes a user can make.
type IdleDeviceError struct {
	Role   Role
	Device int     // the idle device's index
	Blocks int     // the model's blocks
	Share  float64 // the device's share of the model, 0 to 1
}

func (e *IdleDeviceError) Error() string {
	fix := "leave it out or raise its ratio"
	if e.Role == Draft {
		fix = "put the draft on fewer devices" // the draft is spread by free memory: it has no ratios to raise
	}
	return fmt.Sprintf("plan: %s: device %d gets none of the %d blocks (a %.1f%% share); %s",
		e.Role, e.Device, e.Blocks, 100*e.Share, fix)
}

// Repairs are the changes that let Make plan an input it refused with
// err, each with its plan; those whose plan fits come first. Only the
// errors a user makes by placing devices have repairs (an idle device);
// for others there are none. Unlike Plan.Suggestions, a repair's plan may
// not fit: it can be planned, and its own suggestions say what fits.
func Repairs(in Input, err error) []Suggestion {
	var idle *IdleDeviceError
	if !errors.As(err, &idle) {
		return nil
	}
	in = in.Resolve()
	var out []Suggestion
	try := func(text string, c Change) {
		q, err := Make(c.Apply(in))
		if err == nil {
			out = append(out, Suggestion{Text: text, Change: c, Plan: q})
		}
	}
	dev, _ := findDevice(in.Devices, idle.Device)
	name := dev.Label()
	switch idle.Role {
	case Draft:
		devs := in.DraftPlacement.Devices
		if len(devs) > 2 {
			try("leave "+name+" out of the draft's devices", Change{DraftDevices: without(devs, idle.Device)})
		}
		for _, d := range devs {
			alone, _ := findDevice(in.Devices, d)
			try("run the draft on "+alone.Label()+" only", Change{DraftDevices: []int{d}})
		}
	case Target:
		tp := in.TargetPlacement
		if ratios, blocks, ok := raiseShare(in, idle.Device); ok {
			try(fmt.Sprintf("give %s a %v%% share of the target (%d of its %d blocks)", name, ratios[slices.Index(tp.Devices, idle.Device)], blocks, idle.Blocks),
				Change{Ratios: ratios})
		}
		c := Change{TargetDevices: without(tp.Devices, idle.Device)}
		if i := slices.Index(tp.Devices, idle.Device); tp.Ratios != nil {
			c.Ratios = slices.Delete(slices.Clone(tp.Ratios), i, i+1)
		}
		try("leave "+name+" out of the target's devices", c)
	}
	slices.SortStableFunc(out, func(a, b Suggestion) int {
		switch {
		case a.Plan.Fits == b.Plan.Fits:
			return 0
		case a.Plan.Fits:
			return -1
		}
		return 1
	})
	return out
}

// raiseShare finds the smallest whole-percent share that gives device d at
// least one block of the target, the other devices keeping their weights
// to each other; it returns the ratios as percentages and the blocks d
// then holds.
func raiseShare(in Input, d int) ([]float64, int, bool) {
	tp, err := in.TargetPlacement.resolve(Target, in.Devices)
	if err != nil {
		return nil, 0, false
	}
	i := slices.Index(tp.Devices, d)
	if i < 0 || tp.Ratios[i] >= 1 {
		return nil, 0, false
	}
	rest := 1 - tp.Ratios[i]
	for share := math.Ceil(100 * tp.Ratios[i]); share < 100; share++ {
		ratios := make([]float64, len(tp.Ratios))
		for j, r := range tp.Ratios {
			ratios[j] = math.Round((100 - share) * r / rest)
		}
		ratios[i] = share
		if slices.Contains(ratios, 0) {
			return nil, 0, false
		}
		alt := in
		alt.TargetPlacement.Ratios = ratios
		q, err := build(alt)
		var idle *IdleDeviceError
		if errors.As(err, &idle) {
			continue // d, or another device, still has no block
		} else if err != nil {
			return nil, 0, false
		}
		return ratios, countOf(q.Target.BlockDevice, d), true
	}
	return nil, 0, false
}

func countOf(xs []int, x int) int {
	n := 0
	for _, v := range xs {
		if v == x {
			n++
		}
	}
	return n
}

func without(xs []int, x int) []int {
	return slices.DeleteFunc(slices.Clone(xs), func(v int) bool { return v == x })
}
