//go:build !headless

package app

import (
	"path/filepath"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/widget"

	"github.com/tandem-run/tandem/engine/gguf"
	"github.com/tandem-run/tandem/engine/plan"
	"github.com/tandem-run/tandem/widgets"
)

// pick asks for a model file for role ("target" or "draft").
func (m *mainWindow) pick(role string) {
	m.picker.openModel("Choose the "+role+" model", func(path string) {
		if path != "" {
			m.chooseModel(role, path)
		}
	})
}

// showRecent offers the recent files of role under the button.
func (m *mainWindow) showRecent(role string, under fyne.CanvasObject) {
	var items []*fyne.MenuItem
	for _, r := range recentFor(m.set.Recent, role) {
		items = append(items, fyne.NewMenuItem(filepath.Base(r.Path)+"  —  "+filepath.Dir(r.Path), func() { m.chooseModel(role, r.Path) }))
	}
	if len(items) == 0 {
		items = append(items, &fyne.MenuItem{Label: "No recent files", Disabled: true})
	}
	c := m.win.Canvas()
	pos := fyne.CurrentApp().Driver().AbsolutePositionForObject(under).Add(fyne.NewPos(0, under.Size().Height))
	widget.ShowPopUpMenuAtPosition(fyne.NewMenu("", items...), c, pos)
}

// dropped takes a file dropped on the window: on the draft's half of the
// models column it becomes the draft, anywhere else the target.
func (m *mainWindow) dropped(pos fyne.Position, uris []fyne.URI) {
	if len(uris) == 0 {
		return
	}
	role := "target"
	d := fyne.CurrentApp().Driver()
	at, size := d.AbsolutePositionForObject(m.draftBox), m.draftBox.Size()
	if pos.X >= at.X && pos.X < at.X+size.Width && pos.Y >= at.Y {
		role = "draft"
	}
	m.chooseModel(role, uris[0].Path())
}

// chooseModel opens path's header off the main goroutine and shows it.
func (m *mainWindow) chooseModel(role, path string) {
	if err := checkModelPath(path); err != nil {
		m.showError("That file cannot be used as the "+role+" model.", err)
		return
	}
	m.disk.add(func() {
		f, err := gguf.Open(path)
		m.post(func() {
			if err != nil {
				m.showError("The "+role+" model could not be opened.", err)
				return
			}
			m.errNotice.Hide()
			m.set.Recent = addRecent(m.set.Recent, RecentFile{Path: path, Used: m.store.now(), Role: role})
			m.setModel(role, f)
		})
	})
}

// setModel makes f (nil: none) the target or draft model.
func (m *mainWindow) setModel(role string, f *gguf.File) {
	old := &m.target
	if role == "draft" {
		old = &m.draft
	}
	if prev := *old; prev != nil {
		m.disk.add(func() {
			m.filesMu.Lock() // a plan may still read its header
			defer m.filesMu.Unlock()
			prev.Close()
		})
	}
	*old = f
	path := ""
	if f != nil {
		path = f.Path
	}
	if role == "draft" {
		m.set.Draft = path
	} else {
		m.set.Target = path
	}
	m.showModels()
	m.changed()
}

// showModels fills the model cards and their verdicts.
func (m *mainWindow) showModels() {
	target := modelInfo("Target model", m.target)
	if why := roleProblem("target", m.target); why != "" {
		target.Verdict, target.Bad = why, true
	}
	m.targetCard.Set(target)
	info := modelInfo("Draft model", m.draft)
	if m.draft == nil {
		info.File = "No draft: the target decodes alone (or with prompt lookup, in the chat settings)."
	}
	if row, ok := borrowRow(m.draft, m.draftBorrows); ok {
		info.Rows = append(info.Rows, row)
	}
	verdict, ok := draftVerdict(m.target, m.draft)
	info.Verdict, info.Bad = verdict, !ok
	m.draftCard.Set(info)
	m.refreshCtxHint()
}

// replan makes a plan for what is shown, on the planner worker; only the
// newest request's result is shown.
func (m *mainWindow) replan() {
	m.planSeq++
	seq := m.planSeq
	m.plan, m.planErr, m.repairs = nil, nil, nil
	if m.target == nil {
		m.preview.Set(widgets.Preview{Error: "Choose a target model to see what each device will hold."})
		m.refreshButtons()
		return
	}
	if why := roleProblem("target", m.target); why != "" {
		m.preview.Set(widgets.Preview{Error: why})
		m.refreshButtons()
		return
	}
	in, err := planInput(m.target, m.draft, m.set.Layout, m.inv)
	if err != nil {
		m.planErr = err
		m.preview.Set(m.previewOf(nil, err, nil))
		m.refreshButtons()
		return
	}
	m.refreshButtons() // Load waits for the plan
	m.planner.replace(func() {
		m.filesMu.Lock()
		p, err := plan.Make(in)
		var repairs []plan.Suggestion
		if err != nil {
			repairs = plan.Repairs(in, err)
		}
		m.filesMu.Unlock()
		m.post(func() {
			if seq == m.planSeq {
				m.showPlan(p, err, repairs)
			}
		})
	})
}

// showPlan shows a plan, or why there is none with the repairs that make
// one.
func (m *mainWindow) showPlan(p *plan.Plan, err error, repairs []plan.Suggestion) {
	if !m.planned {
		m.planned = true
		if m.frames != nil {
			m.frames.setPhase("idle") // the window is up and has its first plan
		}
		m.post(m.layOutChat) // a turn of its own, while the window is idle
	}
	m.plan, m.planErr, m.repairs = p, err, repairs
	m.preview.Set(m.previewOf(p, err, repairs))
	if p != nil && m.set.Layout.TargetRatios == nil && len(p.Target.Placement.Ratios) > 1 {
		var pct []float64
		for _, r := range p.Target.Placement.Ratios {
			pct = append(pct, float64(int(r*100+0.5)))
		}
		m.gpus.SetAutoRatios(pct)
	}
	m.refreshButtons()
}

// layOutChat lays the chat page out behind the page shown, at its size:
// its widgets' renderers are made and their text measured now, while the
// window is idle, rather than in the frame that first shows the page, the
// one that ends a load (the longest frame of a first start: 75-160 ms on
// the 2-core test machine under Xvfb, of which about 12 ms of the window
// thread's time went to making and laying out the chat page).
func (m *mainWindow) layOutChat() {
	shown := m.pages.Selected()
	if shown == nil || shown == m.chatTab {
		return
	}
	m.chatTab.Content.Resize(shown.Content.Size())
}

// switchBorrow re-plans with the way the preview's borrow option i uses
// the target tensors the draft borrows.
func (m *mainWindow) switchBorrow(i int) {
	if m.plan == nil || m.plan.Borrow == nil || i >= len(m.plan.Borrow.Options) {
		return
	}
	m.set.Layout.Borrow = string(m.plan.Borrow.Options[i].Mode)
	m.changed()
}

// applySuggestion applies the preview's fix i to the layout: a planner's
// suggestion, or a repair of a layout it refused.
func (m *mainWindow) applySuggestion(i int) {
	fixes := m.repairs
	if m.plan != nil {
		fixes = m.plan.Suggestions
	}
	if i < 0 || i >= len(fixes) {
		return
	}
	m.set.Layout = applyChange(m.set.Layout, fixes[i].Change)
	m.showLayout()
	m.changed()
}
