package plan

import (
	"fmt"
	"slices"
	"strings"

	"github.com/dustin/go-humanize"
	"github.com/tandem-run/tandem/engine/device"
)

// BorrowReport compares the two ways a draft can use the target tensors it
// borrows (an EAGLE-3 draft has no token embedding or head of its own).
type BorrowReport struct {
	Tensors []string
	Bytes   int64  // one copy of them
	Chosen  Borrow // the mode this plan uses
	Options []BorrowOption
}

// BorrowOption is one way, planned: the draft's bytes on each device.
type BorrowOption struct {
	Mode  Borrow
	Text  string
	Draft map[int]int64 // device index -> the draft's bytes there
	Fits  bool
}

// borrowReport plans the mode p did not choose and describes both.
func borrowReport(in Input, p *Plan) *BorrowReport {
	r := &BorrowReport{Tensors: p.Draft.Borrowed, Chosen: p.Draft.Placement.Borrow}
	for _, name := range r.Tensors {
		t, _ := in.Target.Tensor(name)
		r.Bytes += t.Bytes
	}
	for _, mode := range []Borrow{BorrowInPlace, BorrowCopy} {
		q := p
		if mode != r.Chosen {
			alt := in
			alt.DraftPlacement.Borrow = mode
			var err error
			if q, err = build(alt); err != nil {
				r.Options = append(r.Options, BorrowOption{Mode: mode, Text: fmt.Sprintf("%s: cannot be planned: %v", mode, err)})
				continue
			}
		}
		o := BorrowOption{Mode: mode, Fits: q.Fits, Draft: make(map[int]int64)}
		for _, b := range q.Devices {
			if n := b.Draft.Total(); n > 0 {
				o.Draft[b.Device.Index] = n
			}
		}
		o.Text = describeBorrow(in.Devices, q.Draft, r)
		r.Options = append(r.Options, o)
	}
	return r
}

func describeBorrow(inv []device.Device, d *ModelPlan, r *BorrowReport) string {
	names := strings.Join(r.Tensors, " and ")
	if d.BorrowInPlace {
		return fmt.Sprintf("use the target's %s where it keeps them (head on %s, lookups on %s): hidden states go there, logits come back",
			names, labels(inv, holderDevices(d.HeadRun)), labels(inv, holderDevices(d.EmbeddingRun)))
	}
	var devs []int
	for _, t := range d.Tensors {
		if t.File == Target {
			for _, s := range t.Shards {
				devs = appendNew(devs, s.Device)
			}
		}
	}
	return fmt.Sprintf("copy the target's %s (%s) to %s, beside the draft", names, humanize.IBytes(uint64(r.Bytes)), labels(inv, devs))
}

// labels names devices as people see them: "GPU 3, GPU 4".
func labels(inv []device.Device, idx []int) string {
	s := make([]string, 0, len(idx))
	for _, i := range appendNew(nil, idx...) {
		d, _ := findDevice(inv, i)
		s = append(s, d.Label())
	}
	return strings.Join(s, ", ")
}

// appendNew appends the ys not already in xs.
func appendNew(xs []int, ys ...int) []int {
	for _, y := range ys {
		if !slices.Contains(xs, y) {
			xs = append(xs, y)
		}
	}
	return xs
}
