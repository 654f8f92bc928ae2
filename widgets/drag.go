package widgets

import (
	"slices"

	"fyne.io/fyne/v2"
)

// dragMoved shows the ghost of chip c moved by the drag so far and lights
// up the zone under it.
func (g *GPUCanvas) dragMoved(c *Chip, d fyne.Delta) {
	if g.ghost == nil {
		g.ghost = newChip(c.info, c.zone, nil)
		g.ghost.Resize(c.Size())
		g.dragged = fyne.Delta{}
		g.layer.Add(g.ghost)
	}
	g.dragged.DX += d.DX
	g.dragged.DY += d.DY
	start := g.relative(c)
	g.ghost.Move(start.Add(g.dragged))
	over, _ := g.zoneAt(g.ghostCenter())
	for z, v := range g.zones {
		v.highlight(z == over)
	}
}

// dragEnded drops chip c where its ghost is: into the zone under the
// ghost's centre, at the slot nearest to it; dropped outside every zone, a
// chip that was in a zone leaves it.
func (g *GPUCanvas) dragEnded(c *Chip) {
	if g.ghost == nil {
		return
	}
	center := g.ghostCenter()
	g.layer.Remove(g.ghost)
	g.ghost = nil
	for _, v := range g.zones {
		v.highlight(false)
	}
	zone, at := g.zoneAt(center)
	if zone == "" && c.zone == ZonePool {
		return
	}
	g.userChange(func(p *Placement) {
		if c.zone != ZonePool && c.zone != zone {
			p.remove(c.zone, c.info.ID)
		}
		if zone != "" {
			p.insert(zone, c.info.ID, at)
		}
	})
}

// relative is o's position in the top layer's coordinates.
func (g *GPUCanvas) relative(o fyne.CanvasObject) fyne.Position {
	d := fyne.CurrentApp().Driver()
	return d.AbsolutePositionForObject(o).Subtract(d.AbsolutePositionForObject(g.layer))
}

// ghostCenter is the centre of the drag ghost in absolute coordinates.
func (g *GPUCanvas) ghostCenter() fyne.Position {
	d := fyne.CurrentApp().Driver()
	s := g.ghost.Size()
	return d.AbsolutePositionForObject(g.layer).Add(g.ghost.Position()).Add(fyne.NewPos(s.Width/2, s.Height/2))
}

// zoneAt hit-tests the zones at absolute position p and says before which
// slot of the zone p falls (slots are in reading order, rows wrapping).
func (g *GPUCanvas) zoneAt(p fyne.Position) (Zone, int) {
	d := fyne.CurrentApp().Driver()
	for _, z := range []Zone{ZoneTarget, ZoneDraft} {
		v := g.zones[z]
		if !contains(d.AbsolutePositionForObject(v.all), v.all.Size(), p) {
			continue
		}
		at := 0
		for _, s := range v.slots.Objects {
			o := d.AbsolutePositionForObject(s)
			sz := s.Size()
			rowAbove := p.Y >= o.Y+sz.Height
			leftInRow := p.Y >= o.Y && p.X >= o.X+sz.Width/2
			if rowAbove || leftInRow {
				at++
			}
		}
		return z, at
	}
	return "", 0
}

func contains(pos fyne.Position, size fyne.Size, p fyne.Position) bool {
	return p.X >= pos.X && p.Y >= pos.Y && p.X < pos.X+size.Width && p.Y < pos.Y+size.Height
}

// chipIn returns the chip of device id in zone, if it is shown there.
func (g *GPUCanvas) chipIn(zone Zone, id int) *Chip {
	if zone != ZonePool && !slices.Contains(*zoneList(&g.pl, zone), id) {
		return nil
	}
	return g.chips[zone][id]
}

// ChipOf is the chip showing device id in zone (ZonePool: every device);
// nil when the device is not in that zone.
func (g *GPUCanvas) ChipOf(zone Zone, id int) *Chip { return g.chipIn(zone, id) }

// ZoneArea is the object a chip is dropped on to join zone.
func (g *GPUCanvas) ZoneArea(zone Zone) fyne.CanvasObject {
	if v, ok := g.zones[zone]; ok {
		return v.all
	}
	return nil
}
