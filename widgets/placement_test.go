package widgets

import (
	"slices"
	"testing"
)

func TestPlacementOps(t *testing.T) {
	base := func() Placement {
		return Placement{Target: []int{0, 1, 2}, Ratios: []float64{5, 3, 2}, Draft: []int{1}}
	}
	for _, tc := range []struct {
		name   string
		op     func(*Placement)
		target []int
		ratios []float64
		draft  []int
	}{
		{"move first to end", func(p *Placement) { p.insert(ZoneTarget, 0, 3) }, []int{1, 2, 0}, []float64{3, 2, 5}, []int{1}},
		{"move last to front", func(p *Placement) { p.insert(ZoneTarget, 2, 0) }, []int{2, 0, 1}, []float64{2, 5, 3}, []int{1}},
		{"new device keeps ratios", func(p *Placement) { p.insert(ZoneTarget, 7, 1) }, []int{0, 7, 1, 2}, []float64{5, 3.3, 3, 2}, []int{1}},
		{"append to draft", func(p *Placement) { p.insert(ZoneDraft, 2, -1) }, []int{0, 1, 2}, []float64{5, 3, 2}, []int{1, 2}},
		{"remove keeps ratios in step", func(p *Placement) { p.remove(ZoneTarget, 1) }, []int{0, 2}, []float64{5, 2}, []int{1}},
		{"remove absent", func(p *Placement) { p.remove(ZoneDraft, 9) }, []int{0, 1, 2}, []float64{5, 3, 2}, []int{1}},
		{"shift right", func(p *Placement) { p.shift(ZoneTarget, 0, 1) }, []int{1, 0, 2}, []float64{3, 5, 2}, []int{1}},
		{"shift past the end", func(p *Placement) { p.shift(ZoneTarget, 2, 1) }, []int{0, 1, 2}, []float64{5, 3, 2}, []int{1}},
	} {
		p := base()
		tc.op(&p)
		if !slices.Equal(p.Target, tc.target) || !slices.Equal(p.Ratios, tc.ratios) || !slices.Equal(p.Draft, tc.draft) {
			t.Errorf("%s: got %v %v %v, want %v %v %v", tc.name, p.Target, p.Ratios, p.Draft, tc.target, tc.ratios, tc.draft)
		}
	}
}

func TestParseRatio(t *testing.T) {
	for s, ok := range map[string]bool{"3": true, "62.5": true, "40%": true, " 2 ": true, "0": false, "-1": false, "x": false, "NaN": false, "1e9": false} {
		if _, err := parseRatio(s); (err == nil) != ok {
			t.Errorf("parseRatio(%q): err %v", s, err)
		}
	}
}
