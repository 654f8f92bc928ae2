//go:build !headless

package app

import (
	"context"
	"strconv"
	"sync"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/driver/desktop"
	"fyne.io/fyne/v2/layout"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"

	"github.com/tandem-run/tandem/engine"
	"github.com/tandem-run/tandem/engine/device"
	"github.com/tandem-run/tandem/engine/gguf"
	"github.com/tandem-run/tandem/engine/plan"
	"github.com/tandem-run/tandem/widgets"
)

// mainWindow is the app's one window. Its Models page holds the two models,
// the devices they go on and what each device will hold; its Chat page is
// the chat (chatPage); errors show above both pages, and Load, its
// progress and the API server below them. Its fields are touched on the
// main goroutine only; work that takes time runs on workers and comes back
// through post.
type mainWindow struct {
	app    fyne.App
	win    fyne.Window
	post   func(func()) // fyne.Do in the app
	store  *store
	set    Settings
	load   loadFunc
	picker filePicker
	frames *frameMonitor    // nil unless measuring
	inv    device.Inventory // the devices shown: this machine's, or simulated ones
	// hostInventory lists this machine's devices (hostInventory; tests
	// give their own).
	hostInventory func() device.Inventory
	realLayout    Layout // this machine's layout, kept while simulating
	simSpec       string // the simulated devices' spec; "": none
	simNote       string // the simulation's notice; "": none

	target, draft *gguf.File // headers of the chosen models; nil: none
	filesMu       sync.Mutex // held while a plan reads the headers
	planner       worker     // plans, newest first
	disk          worker     // settings and conversation writes, in order
	planSeq       int
	plan          *plan.Plan        // the plan of what is shown; nil: none
	planErr       error             // why the layout shown has no plan; nil: it has one, or is being planned
	repairs       []plan.Suggestion // the changes that give a refused layout a plan

	model     loadedModel // loaded local models; nil: none
	loadedCfg engine.Config
	// draftBorrows are the target tensors the loaded draft uses (the
	// engine's word, once loaded); nil: none, or nothing loaded.
	draftBorrows []string
	cancelLoad   context.CancelFunc // non-nil while loading
	progress     map[string]engine.Progress

	chat    *chatPage
	pages   *container.AppTabs
	chatTab *container.TabItem
	planned bool      // the first plan was shown (the window's start is over)
	find    *findPage // models on the Hugging Face Hub
	findTab *container.TabItem

	server         *guiServer // the API server; nil: none
	serverStopping *guiServer // a stopped server still finishing; nil: none

	notice     *notices // notes on the Models page (demo pair, settings kept aside)
	errNotice  *notices // errors, above both pages
	targetCard *widgets.ModelCard
	draftCard  *widgets.ModelCard
	draftBox   fyne.CanvasObject // drop zone for a dragged-in draft file
	gpus       *widgets.GPUCanvas
	preview    *widgets.MemoryPreview
	ctxEntry   *widget.Entry
	ctxOver    *widget.Check // a context past the target's trained length
	ctxHint    *widget.Label // what bounds the context
	ctxUnit    *widget.Label // "tokens", with the trained length
	kvSelect   *widget.Select
	loadBtn    *widget.Button
	cancelBtn  *widget.Button
	unloadBtn  *widget.Button
	serveCtl   *widgets.ServeControl
	bar        *widget.ProgressBar
	status     *widget.Label
}

// build makes the window's widgets.
func (m *mainWindow) build() {
	m.notice, m.errNotice = newNotices(), newNotices()
	m.notice.compact = true
	m.targetCard = widgets.NewModelCard(modelInfo("Target model", nil))
	m.draftCard = widgets.NewModelCard(modelInfo("Draft model", nil))
	m.gpus = widgets.NewGPUCanvas()
	m.gpus.OnChanged = func(p widgets.Placement) {
		m.set.Layout = m.set.Layout.withCanvas(p)
		m.changed()
	}
	m.preview = widgets.NewMemoryPreview()
	m.preview.OnApply = m.applySuggestion
	m.preview.OnBorrow = m.switchBorrow
	m.preview.OnExperts = m.switchExperts
	m.preview.OnRemote = m.useRemote

	m.buildCtx()
	m.kvSelect = widget.NewSelect(kvChoices(m.set.Layout, m.inv), func(s string) {
		if s != m.set.Layout.KVType {
			m.set.Layout.KVType = s
			m.changed()
		}
	})

	chooseTarget := widget.NewButtonWithIcon("Choose…", theme.FolderOpenIcon(), func() { m.pick("target") })
	chooseDraft := widget.NewButtonWithIcon("Choose…", theme.FolderOpenIcon(), func() { m.pick("draft") })
	noDraft := widget.NewButtonWithIcon("None", theme.ContentClearIcon(), func() { m.setModel("draft", nil) })
	var recentTarget, recentDraft *widget.Button
	recentTarget = widget.NewButtonWithIcon("Recent", theme.HistoryIcon(), func() { m.showRecent("target", recentTarget) })
	recentDraft = widget.NewButtonWithIcon("Recent", theme.HistoryIcon(), func() { m.showRecent("draft", recentDraft) })
	// Each model's buttons stay in view above its card, which scrolls in
	// its half of the column; the context and KV cache rows sit under the
	// models (what is loaded, then how).
	dropHint := widget.NewLabelWithStyle("Drop a .gguf file on the window to choose it; dropped on the draft section, it becomes the draft.",
		fyne.TextAlignLeading, fyne.TextStyle{Italic: true})
	dropHint.Wrapping = fyne.TextWrapWord // else its one line sets the window's narrowest width
	m.draftBox = container.NewBorder(container.NewHBox(chooseDraft, recentDraft, noDraft), nil, nil, nil,
		container.NewVScroll(container.NewVBox(m.draftCard, dropHint)))
	targetBox := container.NewBorder(container.NewHBox(chooseTarget, recentTarget), nil, nil, nil, container.NewVScroll(m.targetCard))
	ctxRow := container.New(layout.NewFormLayout(),
		widget.NewLabel("Context"), container.NewVBox( // the box and hint hidden take no room
			container.NewBorder(nil, nil, container.NewGridWrap(fyne.NewSize(90, m.ctxEntry.MinSize().Height), m.ctxEntry), nil, m.ctxUnit),
			m.ctxOver, m.ctxHint),
		widget.NewLabel("KV cache"), container.NewHBox(m.kvSelect))
	models := container.NewBorder(nil, container.NewVBox(widget.NewSeparator(), ctxRow), nil, nil,
		container.NewGridWithRows(2, targetBox, m.draftBox))
	// The memory preview beside the devices, as the Load settings of other
	// runners keep what fits next to where it goes: both in view on an
	// 800x600 screen and above the fold at the default size.
	devices := container.NewHSplit(container.NewVScroll(m.gpus), container.NewVScroll(m.preview))
	devices.Offset = 0.55
	split := container.NewHSplit(models, devices)
	split.Offset = 0.3

	m.loadBtn = widget.NewButtonWithIcon("Load", theme.MediaPlayIcon(), m.startLoad)
	m.loadBtn.Importance = widget.HighImportance
	m.cancelBtn = widget.NewButtonWithIcon("Cancel", theme.CancelIcon(), m.cancel)
	m.unloadBtn = widget.NewButtonWithIcon("Unload", theme.MediaStopIcon(), m.unload)
	m.serveCtl = widgets.NewServeControl()
	m.serveCtl.OnStart = m.startServe
	m.serveCtl.OnStop = func() { m.stopServe() }
	m.bar = widget.NewProgressBar()
	m.status = widget.NewLabel("")
	m.status.Truncation = fyne.TextTruncateEllipsis
	bottom := container.NewVBox(
		container.NewBorder(nil, nil, container.NewHBox(m.loadBtn, m.cancelBtn, m.unloadBtn), nil,
			container.NewVBox(m.bar, m.status)),
		m.serveCtl)

	m.chat = newChatPage(m)
	m.chatTab = container.NewTabItemWithIcon("Chat", theme.MailComposeIcon(), newPage(m.chat.content))
	m.find = newFindPage(m, newHubClient())
	m.findTab = container.NewTabItemWithIcon("Find", theme.SearchIcon(), newPage(m.find.content))
	modelsPage := container.NewBorder(m.notice.box, nil, nil, nil, split)
	m.notice.in(modelsPage)
	m.pages = container.NewAppTabs(container.NewTabItemWithIcon("Models", theme.StorageIcon(), newPage(modelsPage)), m.chatTab, m.findTab)
	m.pages.OnSelected = func(t *container.TabItem) {
		if t == m.findTab {
			m.find.shown()
		}
	}
	content := container.NewBorder(m.errNotice.box, container.NewPadded(bottom), nil, nil, m.pages)
	m.errNotice.in(content)
	m.win.SetContent(content)
	m.win.SetOnDropped(m.dropped)
	m.win.SetMainMenu(fyne.NewMainMenu(fyne.NewMenu("Models",
		&fyne.MenuItem{Label: "Choose target…", Action: func() { m.pick("target") }, Shortcut: &desktop.CustomShortcut{KeyName: fyne.KeyO, Modifier: fyne.KeyModifierShortcutDefault}},
		&fyne.MenuItem{Label: "Choose draft…", Action: func() { m.pick("draft") }},
		&fyne.MenuItem{Label: "Find models on the Hub…", Action: func() { m.find.focus() }, Shortcut: &desktop.CustomShortcut{KeyName: fyne.KeyF, Modifier: fyne.KeyModifierShortcutDefault}},
		fyne.NewMenuItemSeparator(),
		&fyne.MenuItem{Label: "Load", Action: m.startLoad, Shortcut: &desktop.CustomShortcut{KeyName: fyne.KeyL, Modifier: fyne.KeyModifierShortcutDefault}},
		&fyne.MenuItem{Label: "Unload", Action: m.unload},
		&fyne.MenuItem{Label: "Chat", Action: m.openChat, Shortcut: &desktop.CustomShortcut{KeyName: fyne.KeyT, Modifier: fyne.KeyModifierShortcutDefault}},
	), m.devicesMenu(), m.chat.menu()))
	m.showLayout()
	m.refreshButtons()
}

// showLayout puts the settings' layout into the widgets.
func (m *mainWindow) showLayout() {
	l := m.set.Layout
	m.gpus.SetDevices(chipsFor(m.inv))
	m.gpus.SetPlacement(canvasPlacement(l))
	m.ctxOver.SetChecked(l.CtxOverride)
	if l.Ctx > 0 {
		m.ctxEntry.SetText(strconv.Itoa(l.Ctx))
	} else {
		m.ctxEntry.SetText("")
	}
	m.refreshCtxHint()
	m.showKVChoices()
}

// showKVChoices offers the KV cache types the layout's devices run.
func (m *mainWindow) showKVChoices() {
	m.kvSelect.Options = kvChoices(m.set.Layout, m.inv)
	m.kvSelect.SetSelected(plan.KVTypeName(kvTypeOf(m.set.Layout)))
	m.kvSelect.Refresh()
}

// changed replans and remembers the settings after any edit.
func (m *mainWindow) changed() {
	m.showKVChoices()
	m.replan()
	m.saveSettings()
}

// saveSettings writes a copy of the settings on the disk worker. Each copy
// is the whole state, so a burst of edits (typing a system prompt) writes
// only the newest one.
func (m *mainWindow) saveSettings() {
	set := cloneSettings(m.set)
	set.Layout = set.Layout.withDeviceIDs(m.inv)
	if m.simulating() {
		// The simulation's layout is saved beside this machine's, which
		// it never replaces.
		set.Simulation = &Simulation{Spec: m.simSpec, Layout: set.Layout}
		set.Layout = m.realLayout
	}
	m.disk.replace(func() {
		if err := m.store.saveSettings(set); err != nil {
			m.post(func() { m.showError("Settings could not be saved.", err) })
		}
	})
}

func cloneSettings(s Settings) Settings {
	s.Recent = append([]RecentFile(nil), s.Recent...)
	l := &s.Layout
	l.TargetDevices = append([]int(nil), l.TargetDevices...)
	l.TargetRatios = append([]float64(nil), l.TargetRatios...)
	l.DraftDevices = append([]int(nil), l.DraftDevices...)
	return s
}

// showError shows a readable message with the error's full text one click
// away.
func (m *mainWindow) showError(text string, err error) {
	m.errNotice.Set(widgets.NoticeError, text+" "+sentence(err), err.Error())
}

func (m *mainWindow) refreshButtons() {
	loading := m.cancelLoad != nil
	enable(m.loadBtn, !loading && m.canLoad() == nil)
	enable(m.cancelBtn, loading)
	enable(m.unloadBtn, !loading && m.model != nil)
	m.bar.Hidden = !loading
	m.bar.Refresh()
	m.showServer()
	switch {
	case loading:
	case m.model != nil:
		m.status.SetText("Loaded: " + describeConfig(m.loadedCfg))
	default:
		if err := m.canLoad(); err != nil {
			m.status.SetText(sentence(err))
		} else {
			m.status.SetText("Ready to load.")
		}
	}
}

func enable(w fyne.Disableable, on bool) {
	if on {
		w.Enable()
	} else {
		w.Disable()
	}
}
