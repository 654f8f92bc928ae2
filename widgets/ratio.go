package widgets

import (
	"errors"
	"slices"
	"strconv"
	"strings"

	"fyne.io/fyne/v2/widget"
)

// ratioField is the numeric field under a target chip that weighs it.
func (g *GPUCanvas) ratioField(i, id int) *widget.Entry {
	e, ok := g.ratios[id]
	if !ok {
		e = widget.NewEntry()
		e.OnChanged = func(string) { g.ratiosEdited() }
		e.Validator = func(s string) error {
			if s == "" {
				return nil
			}
			_, err := parseRatio(s)
			return err
		}
		g.ratios[id] = e
	}
	e.PlaceHolder = "ratio"
	if g.pl.Ratios == nil && i < len(g.autoRatios) && len(g.autoRatios) == len(g.pl.Target) {
		e.PlaceHolder = "auto " + formatRatio(g.autoRatios[i])
	}
	want := ""
	if g.pl.Ratios != nil {
		want = formatRatio(g.pl.Ratios[i])
	}
	// Leave what the user typed when it already says the same number ("3.0").
	if r, err := parseRatio(e.Text); e.Text != want && (err != nil || formatRatio(r) != want) {
		e.SetText(want)
	}
	e.Refresh()
	return e
}

// ratiosEdited takes the ratio fields' numbers once all of them are valid
// (all empty: automatic).
func (g *GPUCanvas) ratiosEdited() {
	if g.quiet {
		return
	}
	var ratios []float64
	empty := 0
	for _, id := range g.pl.Target {
		s := strings.TrimSpace(g.ratios[id].Text)
		if s == "" {
			empty++
			continue
		}
		r, err := parseRatio(s)
		if err != nil {
			return
		}
		ratios = append(ratios, r)
	}
	switch empty {
	case 0:
	case len(g.pl.Target):
		ratios = nil
	default:
		return // some fields still empty
	}
	if slices.Equal(ratios, g.pl.Ratios) {
		return
	}
	g.userChange(func(p *Placement) { p.Ratios = ratios })
}

func parseRatio(s string) (float64, error) {
	r, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(s), "%"), 64)
	if err != nil || !(r > 0) || r > 1e6 {
		return 0, errRatio
	}
	return r, nil
}

var errRatio = errors.New("widgets: a ratio is a positive number")

func formatRatio(r float64) string { return strconv.FormatFloat(r, 'g', 4, 64) }
