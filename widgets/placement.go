package widgets

import (
	"math"
	"slices"
)

// Placement is what the canvas edits: which devices each model runs on, in
// order, and how the target spreads over its devices.
type Placement struct {
	Target []int     // device IDs in pipeline order
	Ratios []float64 // one positive weight per Target device; nil = automatic
	Draft  []int
	Split  string // "layer" or "tensor"
	Head   string // "" (automatic), "replicated" or "split"
}

func clonePlacement(p Placement) Placement {
	p.Target, p.Draft, p.Ratios = slices.Clone(p.Target), slices.Clone(p.Draft), slices.Clone(p.Ratios)
	return p
}

// insert puts device id into zone at index at (-1: the end), counting the
// zone's slots as they are; it moves there if it is already in the zone.
func (p *Placement) insert(zone Zone, id, at int) {
	list := zoneList(p, zone)
	ratio, moved := 0.0, false
	if i := slices.Index(*list, id); i >= 0 {
		*list = slices.Delete(*list, i, i+1)
		if zone == ZoneTarget && p.Ratios != nil {
			ratio, moved = p.Ratios[i], true
			p.Ratios = slices.Delete(p.Ratios, i, i+1)
		}
		if at > i {
			at--
		}
	} else if zone == ZoneTarget && p.Ratios != nil {
		// A new device: the ratios typed for the others stay (they were
		// reset to automatic once: issue 26, item 7), and it gets their
		// mean, to be typed over.
		var sum float64
		for _, r := range p.Ratios {
			sum += r
		}
		ratio, moved = math.Round(10*sum/float64(len(p.Ratios)))/10, true
		if ratio <= 0 {
			ratio = slices.Min(p.Ratios)
		}
	}
	if at < 0 || at > len(*list) {
		at = len(*list)
	}
	*list = slices.Insert(*list, at, id)
	if moved {
		p.Ratios = slices.Insert(p.Ratios, at, ratio)
	}
}

// remove takes device id out of zone.
func (p *Placement) remove(zone Zone, id int) {
	list := zoneList(p, zone)
	i := slices.Index(*list, id)
	if i < 0 {
		return
	}
	*list = slices.Delete(*list, i, i+1)
	if zone == ZoneTarget && p.Ratios != nil {
		p.Ratios = slices.Delete(p.Ratios, i, i+1)
	}
}

// shift moves device id by places within zone.
func (p *Placement) shift(zone Zone, id, by int) {
	list := zoneList(p, zone)
	i := slices.Index(*list, id)
	j := i + by
	if i < 0 || j < 0 || j >= len(*list) {
		return
	}
	(*list)[i], (*list)[j] = (*list)[j], (*list)[i]
	if zone == ZoneTarget && p.Ratios != nil {
		p.Ratios[i], p.Ratios[j] = p.Ratios[j], p.Ratios[i]
	}
}

func zoneList(p *Placement, z Zone) *[]int {
	if z == ZoneDraft {
		return &p.Draft
	}
	return &p.Target
}
