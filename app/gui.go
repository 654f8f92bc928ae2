//go:build !headless

package app

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"

	"fyne.io/fyne/v2"
	fyneapp "fyne.io/fyne/v2/app"

	"github.com/tandem-run/tandem/assets"
	"github.com/tandem-run/tandem/engine/device"
	"github.com/tandem-run/tandem/widgets"
)

// appID is the application's reverse-DNS id (FyneApp.toml, the .desktop
// file and the AppStream metadata use the same).
const appID = "run.tandem.app"

// guiOptions are the window's command-line options (tandem gui).
type guiOptions struct {
	frameStats string // write main-goroutine frame gaps here on exit
	// Plan for these devices instead of the host's (simulated: layouts
	// for them are never loaded): device.ParseSimulated's cards and
	// sizes, device.ParseVirtual's spec, or an inventory file.
	simulate, virtual, devicesFile string
	// cpuMoE and cpuMoEDraft turn on keeping the models' experts in
	// system RAM (--cpu-moe, --cpu-moe-draft) in the saved layout.
	cpuMoE, cpuMoEDraft bool
}

// runGUI opens the window (tandem with no arguments).
func runGUI(errOut io.Writer) int {
	if err := openWindow(guiOptions{}); err != nil {
		fmt.Fprintf(errOut, "tandem: %v\n", err)
		return 1
	}
	return 0
}

// errNoDisplay and errBadDisplay are a window asked for where none can be
// shown (checkDisplay): GLFW would panic.
var (
	errNoDisplay  = errors.New("no display (DISPLAY is not set); the commands need none, see tandem help")
	errBadDisplay = errors.New("cannot open the display")
)

// openWindow shows the main window and blocks until the app quits.
func openWindow(opt guiOptions) error {
	screen, err := checkDisplay()
	if err != nil {
		return err
	}
	st, err := openStore("", time.Now)
	if err != nil {
		return err
	}
	// One more P than the default, for the window's thread: Fyne's main
	// goroutine is locked to it and makes a cgo call for every GL call; when
	// sysmon hands its P to the engine's goroutines during such a call, the
	// thread waits for a P on return, up to a preemption slice each time,
	// while a model computes (166 ms of such waits in one answer of the
	// demo pair on 2 cores, perf sched; none with the extra P).
	runtime.GOMAXPROCS(runtime.GOMAXPROCS(0) + 1)
	// This goroutine is the window's (Fyne locks it to the main thread):
	// the model's workers and the rest of the runtime yield to its frames.
	if err := lowerOtherThreads(computeNice); err != nil {
		fmt.Fprintln(os.Stderr, "tandem:", err) // the window works, only less smoothly
	}
	a := fyneapp.NewWithID(appID)
	fyneapp.SetMetadata(withFyneDo(a.Metadata()))
	a.SetIcon(fyne.NewStaticResource("tandem.png", assets.Icon()))
	post := fyne.Do
	var frames *frameMonitor
	if opt.frameStats != "" {
		// A probe every 20 ms: at every 5 ms the probes alone doubled the
		// idle window's CPU time (26 to 54 ms a second, under Xvfb).
		frames = newFrameMonitor(20*time.Millisecond, time.Now, fyne.Do)
		post = frames.timed(fyne.Do)
	}
	inv, spec, err := startDevices(opt)
	if err != nil {
		return err
	}
	m, err := newMainWindowOn(a, st, inv, spec, engineLoad, post)
	if err != nil {
		return err
	}
	m.hostInventory = hostInventory
	m.frames = frames
	m.set.Layout.TargetCPUMoE = m.set.Layout.TargetCPUMoE || opt.cpuMoE
	m.set.Layout.DraftCPUMoE = m.set.Layout.DraftCPUMoE || opt.cpuMoEDraft
	m.openModels()

	// SIGINT/SIGTERM close the window like its close button, so settings are
	// flushed and the frame report written; a wedged close still ends.
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sig)
	closed := make(chan struct{}) // the window's loop has returned
	go quitOnSignal(sig, closed, func() {
		fyne.Do(func() {
			if frames != nil {
				frames.close() // the window's teardown is no frame
			}
			a.Quit()
		})
	}, func() { fyne.Do(func() {}) }, raiseDefault, time.After, quitGrace)
	m.win.SetMaster()
	m.win.Resize(fitWindow(screen, 1))
	a.Lifecycle().SetOnStarted(func() {
		// Fyne's scale (the screen's DPI, FYNE_SCALE) is known once the
		// window is up; the size above assumed 1.
		if s := m.win.Canvas().Scale(); s > 1 {
			m.win.Resize(fitWindow(screen, s))
		}
		m.win.CenterOnScreen()
		if frames != nil {
			frames.start()
			// Fyne ticks animations once per pass of its loop, on the
			// main goroutine: this one only times the passes.
			loop := fyne.NewAnimation(time.Second, func(float32) { frames.tick() })
			loop.RepeatCount = fyne.AnimationRepeatForever
			loop.Start()
		}
	})
	m.win.ShowAndRun()
	close(closed)

	if m.cancelLoad != nil {
		m.cancelLoad()
	}
	m.chat.stopGenerating()
	m.chat.commitDelete() // the window's Undo ends with it
	m.find.close()
	if m.server != nil {
		m.server.cancel()
		<-m.server.done
	}
	if m.serverStopping != nil {
		<-m.serverStopping.done
	}
	m.disk.wait()
	if m.model != nil {
		m.model.Close()
	}
	if m.frames != nil {
		m.frames.close()
		return m.frames.writeReport(opt.frameStats)
	}
	return nil
}

// withFyneDo is md declaring Fyne's "fyneDo" migration: the app touches
// widgets only on the main goroutine (through fyne.Do, or in Fyne's own
// callbacks), so Fyne need not check the calling goroutine on every
// Refresh. That check reads the goroutine's id from a runtime.Stack
// trace: 15 of the 124 ms that the window's thread computed for the chat
// page's first frame after a load (perf, the 2-core test machine under
// Xvfb). The name and id keep Fyne from reading FyneApp.toml over it
// later (it does while both are empty).
func withFyneDo(md fyne.AppMetadata) fyne.AppMetadata {
	md.Migrations = maps.Clone(md.Migrations)
	if md.Migrations == nil {
		md.Migrations = map[string]bool{}
	}
	md.Migrations["fyneDo"] = true
	md.ID = cmp.Or(md.ID, appID)
	md.Name = cmp.Or(md.Name, "Tandem")
	return md
}

// startDevices are the devices the window opens on: this machine's, or
// the simulated ones the options name, with their spec.
func startDevices(opt guiOptions) (device.Inventory, string, error) {
	var inv device.Inventory
	var err error
	switch {
	case opt.simulate != "":
		inv, err = device.ParseSimulated(opt.simulate)
		return inv, opt.simulate, err
	case opt.virtual != "":
		inv, err = device.ParseVirtual(opt.virtual)
		return device.Simulate(inv), "virtual " + opt.virtual, err
	case opt.devicesFile != "":
		inv, err = device.ReadFile(opt.devicesFile)
		return device.Simulate(inv), "file " + opt.devicesFile, err
	}
	return hostInventory(), "", nil
}

// screenPixels is a screen's size in pixels; zero when not known.
type screenPixels struct{ width, height int }

// The window's size where the screen allows: room for both columns of the
// Models page and a transcript beside the chat's side panels.
const windowWidth, windowHeight = 1280, 820

// fitWindow is the window's first size on a screen of that many pixels at
// Fyne's scale: the default size, shrunk to leave a margin for the desktop's
// panels and the window's frame on a smaller screen (an 800-pixel-high
// screen cut off the bottom row: issue 26, item 9). Fyne does not go below
// the content's minimum, which fits 800x600.
func fitWindow(screen screenPixels, scale float32) fyne.Size {
	size := fyne.NewSize(windowWidth, windowHeight)
	if screen.width <= 0 || screen.height <= 0 || scale <= 0 {
		return size
	}
	w := float32(screen.width)/scale - 16
	h := float32(screen.height)/scale - 64
	return fyne.NewSize(min(size.Width, w), min(size.Height, h))
}

// newMainWindow reads the settings and builds the window (shown by the
// caller) with both its pages; a settings file that had to be kept aside is
// reported in the window.
func newMainWindow(a fyne.App, st *store, inv device.Inventory, load loadFunc, post func(func())) (*mainWindow, error) {
	return newMainWindowOn(a, st, inv, "", load, post)
}

// newMainWindowOn is newMainWindow on devices simulated under spec (""
// for this machine's): the layout the settings hold is this machine's,
// kept aside meanwhile.
func newMainWindowOn(a fyne.App, st *store, inv device.Inventory, spec string, load loadFunc, post func(func())) (*mainWindow, error) {
	set, note, err := st.loadSettings()
	if err != nil {
		return nil, err
	}
	m := &mainWindow{app: a, win: a.NewWindow("Tandem"), post: post, store: st, set: set, load: load, inv: inv,
		hostInventory: func() device.Inventory { return inv }, realLayout: set.Layout, simSpec: spec}
	m.picker = &nativePicker{win: m.win, post: post}
	m.set.Layout = m.layoutFor(inv, spec)
	m.build()
	m.showSimulation()
	if note != "" {
		m.notice.Set(widgets.NoticeWarning, note, "")
	}
	if m.inv.Reason != "" {
		m.notice.Set(widgets.NoticeInfo, noGPUNote(m.inv), "")
	}
	return m, nil
}

// noGPUNote says why no GPU is listed and what to install; it stays
// above the Models page until closed.
func noGPUNote(inv device.Inventory) string {
	where := "Models run on the CPU."
	if slices.ContainsFunc(inv.Devices, func(d device.Device) bool { return d.Kind != device.CPU }) {
		where = "Models run on the devices listed."
	}
	return "No GPUs listed: " + inv.Reason + ". " + where + " For NVIDIA GPUs, install the NVIDIA driver " +
		"(Debian 12: the nvidia-driver package from the non-free component; it brings libnvidia-ml.so.1), " +
		"reboot and start Tandem again; no CUDA toolkit is needed."
}

// openModels opens the models of the last run; on a first start (or when
// they were the demo pair) it selects the bundled demo pair, written to
// the cache directory again if it was cleared.
func (m *mainWindow) openModels() {
	if m.set.Target != "" && !isDemoPath(m.set.Target) {
		m.chooseModel("target", m.set.Target)
		if m.set.Draft != "" {
			m.chooseModel("draft", m.set.Draft)
		}
		return
	}
	m.disk.add(func() {
		p, err := demoPair()
		m.post(func() {
			if err != nil {
				m.showError("The bundled demo models could not be written to the cache directory.", err)
				return
			}
			m.notice.Set(widgets.NoticeInfo, demoNotice, "")
			m.chooseModel("target", p.Target)
			m.chooseModel("draft", p.Draft)
		})
	})
}

// demoNotice says the demo pair was chosen for the user, until it is loaded.
const demoNotice = "No models chosen yet, so the bundled demo pair is selected. " + assets.DemoNote

// isDemoPath reports a path inside the demo pair's cache folder.
func isDemoPath(path string) bool {
	dir, err := cacheDir()
	return err == nil && strings.HasPrefix(path, filepath.Join(dir, "demo")+string(filepath.Separator))
}
