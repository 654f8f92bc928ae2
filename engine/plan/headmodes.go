package plan

// HeadOption is the whole plan under one head mode for the target, as
// totals per device, so people see what replicating or splitting the head
// costs on each GPU before choosing.
type HeadOption struct {
	Mode   HeadMode
	Totals map[int]int64 // device index -> total bytes (everything, both models)
	Fits   bool
}

// headOptions plans the target under each head mode; only for a target on
// several devices, where the modes differ. A mode that cannot be planned is
// left out.
func headOptions(in Input, p *Plan) []HeadOption {
	tp := p.Target.Placement
	if len(tp.Devices) < 2 {
		return nil
	}
	var out []HeadOption
	for _, mode := range []HeadMode{HeadSingle, HeadReplicated, HeadSplit} {
		q := p
		if mode != tp.Head {
			alt := in
			alt.TargetPlacement.Head = mode
			alt.TargetPlacement.HeadDevice = tp.Devices[len(tp.Devices)-1]
			var err error
			if q, err = build(alt); err != nil {
				continue
			}
		}
		o := HeadOption{Mode: mode, Fits: q.Fits, Totals: make(map[int]int64)}
		for _, b := range q.Devices {
			o.Totals[b.Device.Index] = b.Total()
		}
		out = append(out, o)
	}
	return out
}
