//go:build !headless

package app

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/widget"

	"github.com/tandem-run/tandem/engine/gguf"
	"github.com/tandem-run/tandem/engine/plan"
)

// The context field is bounded by the target's trained length: past it a
// model has seen no positions and its answers usually fall apart, so a
// larger number is taken only with the box below the field ticked (issue
// 26, item 4: 99999 was accepted while the hint said 4096 and the model
// knew 2048).

var (
	errCtxNotNumber   = errors.New("not a whole number of tokens")
	errCtxPastTrained = errors.New("past the model's trained length")
)

// buildCtx makes the context field, its override box and its hint.
func (m *mainWindow) buildCtx() {
	m.ctxEntry = widget.NewEntry()
	m.ctxEntry.OnChanged = func(string) { m.ctxEdited() }
	m.ctxOver = widget.NewCheck("Allow more than the model was trained on", func(on bool) {
		if on != m.set.Layout.CtxOverride {
			m.set.Layout.CtxOverride = on
			if !m.ctxEdited() {
				m.changed() // the bound moved, the number did not
			}
		}
	})
	m.ctxHint = widget.NewLabel("")
	m.ctxHint.Wrapping = fyne.TextWrapWord
	m.ctxUnit = widget.NewLabel("tokens")
}

// ctxValue reads the context field: 0 for empty (the planner's default).
func ctxValue(s string, trained int, override bool) (int, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(s)
	switch {
	case err != nil || n <= 0:
		return 0, errCtxNotNumber
	case trained > 0 && n > trained && !override:
		return 0, errCtxPastTrained
	}
	return n, nil
}

// ctxEdited takes a valid context into the layout and says what bounds it;
// it reports whether the layout changed.
func (m *mainWindow) ctxEdited() bool {
	n, err := ctxValue(m.ctxEntry.Text, plan.TrainedCtx(m.target), m.set.Layout.CtxOverride)
	edit := err == nil && n != m.set.Layout.Ctx
	if edit {
		m.set.Layout.Ctx = n
	}
	m.showCtxHint(err)
	if edit {
		m.changed()
	}
	return edit
}

// refreshCtxHint shows the hint for the field as it is, for the target
// shown (the bound moves with the target).
func (m *mainWindow) refreshCtxHint() {
	_, err := ctxValue(m.ctxEntry.Text, plan.TrainedCtx(m.target), m.set.Layout.CtxOverride)
	m.showCtxHint(err)
}

// showCtxHint says what the context field takes for the target shown.
func (m *mainWindow) showCtxHint(err error) {
	trained := plan.TrainedCtx(m.target)
	m.ctxEntry.SetPlaceHolder(fmt.Sprintf("auto: %d", autoCtx(m.target)))
	unit := "tokens"
	if trained > 0 {
		unit = fmt.Sprintf("tokens (trained on %d)", trained)
	}
	if m.ctxUnit.Text != unit {
		m.ctxUnit.SetText(unit)
	}
	// The box and the hint take rows only while they have something to
	// say, so the memory preview stays near the top of the page.
	text, imp := "", widget.MediumImportance
	switch {
	case errors.Is(err, errCtxPastTrained):
		text, imp = fmt.Sprintf("At most %d: the model was trained on %d tokens. Tick the box to go past that; its answers usually fall apart there.", trained, trained), widget.DangerImportance
	case err != nil:
		text, imp = "Type a whole number of tokens, or leave it empty for the model's own.", widget.DangerImportance
	case trained > 0 && m.set.Layout.Ctx > trained:
		text, imp = fmt.Sprintf("Past the %d tokens the model was trained on: expect its answers to fall apart beyond them.", trained), widget.WarningImportance
	}
	over := trained > 0 && (errors.Is(err, errCtxPastTrained) || m.set.Layout.CtxOverride)
	if m.ctxOver.Hidden == over {
		m.ctxOver.Hidden = !over
		m.ctxOver.Refresh()
	}
	if m.ctxHint.Text != text || m.ctxHint.Importance != imp {
		m.ctxHint.Importance = imp
		m.ctxHint.SetText(text)
	}
	m.ctxHint.Hidden = text == ""
}

// autoCtx is the context the planner takes when none is typed.
func autoCtx(target *gguf.File) int {
	return plan.Input{Target: target}.Resolve().Ctx
}

// boundCtx is the context a layout plans with: the typed one, but no more
// than the target's trained length unless the layout allows it (settings
// saved for another model may hold a larger one).
func boundCtx(l Layout, target *gguf.File) int {
	if t := plan.TrainedCtx(target); t > 0 && l.Ctx > t && !l.CtxOverride {
		return t
	}
	return l.Ctx
}
