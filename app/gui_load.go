//go:build !headless

package app

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/tandem-run/tandem/engine"
	"github.com/tandem-run/tandem/engine/plan"
)

// frameInterval is how often streamed text and progress reach the widgets:
// about two frames at 60 Hz.
const frameInterval = 33 * time.Millisecond

// canLoad says why Load is not possible now (nil: it is). A layout the
// planner rejected cannot be loaded.
func (m *mainWindow) canLoad() error {
	switch {
	case m.simulating():
		return errors.New("Simulated devices: this layout can be planned and saved, not loaded (Devices ▸ This machine's devices).")
	case m.target == nil:
		return errors.New("Choose a target model.")
	case roleProblem("target", m.target) != "":
		return errors.New("The target model cannot run as a target: see its card.")
	case len(m.set.Layout.TargetDevices) == 0:
		return errors.New("Drag a device into the Target zone.")
	case m.draft != nil && !draftOK(m):
		return errors.New("The draft cannot draft for this target: choose another draft or None.")
	case m.planErr != nil:
		return errors.New("This layout cannot be planned: see Memory per device.")
	case m.plan == nil:
		return errors.New("Planning…")
	case !m.plan.Fits:
		return errors.New("The layout does not fit: apply a suggestion or change it.")
	}
	return nil
}

func draftOK(m *mainWindow) bool {
	_, ok := draftVerdict(m.target, m.draft)
	return ok
}

// engineConfig is what Load loads for the current choices: the plan the
// preview shows, so the engine allocates exactly that (an EAGLE-3 draft
// included: its device, and its borrowed embedding and head used in place
// or copied, as the plan chose).
func (m *mainWindow) engineConfig() engine.Config {
	// One core is left to the window, so it keeps drawing while the CPU
	// backend loads and decodes.
	return engine.Config{Target: m.set.Target, Draft: m.set.Draft, Lookup: m.set.Chat.Lookup,
		Threads: max(1, runtime.NumCPU()-1), Plan: m.plan}
}

// describeConfig is one line on what is loaded.
func describeConfig(c engine.Config) string {
	s := filepath.Base(c.Target)
	switch {
	case c.Draft != "":
		s += " with draft " + filepath.Base(c.Draft)
	case c.Lookup:
		s += " with prompt lookup"
	}
	p := c.Plan
	if p == nil {
		return s + "."
	}
	where := placedOn(p, p.Target.Placement.Devices)
	if p.Draft != nil && !slices.Equal(p.Draft.Placement.Devices, p.Target.Placement.Devices) {
		where += " (draft on " + placedOn(p, p.Draft.Placement.Devices) + ")"
	}
	return fmt.Sprintf("%s on %s, context %d tokens, KV cache %v.", s, where, p.Ctx, p.KV)
}

// placedOn names the devices idx of p: "GPU 0 + GPU 1".
func placedOn(p *plan.Plan, idx []int) string {
	var names []string
	for _, i := range idx {
		for _, b := range p.Devices {
			if b.Device.Index == i {
				names = append(names, deviceName(b.Device))
			}
		}
	}
	return strings.Join(names, " + ")
}

// startLoad loads the models on a goroutine, showing progress.
func (m *mainWindow) startLoad() {
	if m.cancelLoad != nil || m.canLoad() != nil {
		return
	}
	if m.model != nil {
		m.unload()
	}
	cfg := m.engineConfig()
	ctx, cancel := context.WithCancel(context.Background())
	m.cancelLoad = cancel
	m.progress = map[string]engine.Progress{}
	m.bar.SetValue(0)
	m.status.SetText("Loading " + describeConfig(cfg))
	m.errNotice.Hide()
	m.frames.setPhase("loading")
	m.refreshButtons()
	prog := newThrottle(frameInterval, m.post,
		func(acc, v []engine.Progress) []engine.Progress { return append(acc, v...) },
		m.showProgress)
	load := m.load
	go func() {
		model, err := load(ctx, cfg, func(p engine.Progress) { prog.push([]engine.Progress{p}) })
		prog.flush()
		m.post(func() { m.loaded(model, cfg, err) })
	}()
}

func (m *mainWindow) showProgress(ps []engine.Progress) {
	if m.cancelLoad == nil {
		return
	}
	for _, p := range ps {
		m.progress[p.Model] = p
	}
	var done, total int64
	for _, p := range m.progress {
		done, total = done+p.BytesDone, total+p.BytesTotal
	}
	if total > 0 {
		m.bar.SetValue(float64(done) / float64(total))
	}
}

// loaded ends a load.
func (m *mainWindow) loaded(model loadedModel, cfg engine.Config, err error) {
	m.cancelLoad = nil
	m.frames.setPhase("idle")
	if err == nil {
		m.model, m.loadedCfg = model, cfg
		m.bar.SetValue(1)
		if r, ok := model.(interface{ Info() engine.Info }); ok {
			m.draftBorrows = r.Info().DraftBorrows
			m.showModels()
		}
	}
	m.refreshButtons()
	switch {
	case errors.Is(err, context.Canceled):
		m.status.SetText("Loading cancelled.")
	case err != nil:
		m.status.SetText("Loading failed.")
		m.showError("Loading failed.", err)
	default:
		// The note on the demo pair said what was chosen; it is loaded now.
		// Dropped on a later turn of the main loop: laying the Models page
		// out again need not lengthen the frame that shows the chat.
		m.post(func() { m.notice.Drop(demoNotice) })
		m.chat.useLocal(m.model, m.loadedCfg)
		m.openChat()
	}
}

func (m *mainWindow) cancel() {
	if m.cancelLoad != nil {
		m.cancelLoad()
		m.status.SetText("Cancelling…")
	}
}

// unload closes the loaded models (on the disk worker: freeing takes time).
func (m *mainWindow) unload() {
	model := m.model
	if model == nil {
		return
	}
	m.model = nil
	if m.draftBorrows != nil {
		m.draftBorrows = nil
		m.showModels()
	}
	m.chat.stopGenerating()
	m.chat.useLocal(nil, engine.Config{})
	served := m.stopServe()
	m.disk.add(func() {
		<-served // the server lets go of the models first
		if err := model.Close(); err != nil {
			m.post(func() { m.showError("Unloading reported a problem.", err) })
		}
	})
	m.refreshButtons()
}

// openChat shows the chat page with the cursor in the prompt.
func (m *mainWindow) openChat() {
	m.pages.Select(m.chatTab)
	m.win.Canvas().Focus(m.chat.input)
}

// useRemote takes up the preview's remote-engine hint: the chat page with
// its Engine settings open.
func (m *mainWindow) useRemote() {
	m.openChat()
	m.chat.showEngineSettings()
}
