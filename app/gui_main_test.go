//go:build !headless

package app

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/storage"
	"fyne.io/fyne/v2/test"

	"github.com/tandem-run/tandem/kernels/sharedtest"
	"github.com/tandem-run/tandem/widgets"
)

func center(o fyne.CanvasObject) fyne.Position {
	p := fyne.CurrentApp().Driver().AbsolutePositionForObject(o)
	return p.Add(fyne.NewPos(o.Size().Width/2, o.Size().Height/2))
}

// A first start selects the demo pair, says so, and plans it.
func TestFirstStartSelectsDemoPair(t *testing.T) {
	h := newHarness(t, nil, nil)
	h.m.openModels()
	h.settle()
	m := h.m
	if m.target == nil || m.target.Path != h.demo.Target || m.draft == nil || m.draft.Path != h.demo.Draft {
		t.Fatalf("models %v %v, want the demo pair", m.target, m.draft)
	}
	if !m.notice.Visible() || !strings.Contains(m.notice.Text(), "demo pair") {
		t.Errorf("notice %q", m.notice.Text())
	}
	if m.plan == nil || len(m.preview.Preview().Devices) == 0 {
		t.Error("no plan shown for the demo pair")
	}
	if !strings.Contains(m.draftCard.Info().Verdict, "Can draft") || m.draftCard.Info().Bad {
		t.Errorf("draft verdict %+v", m.draftCard.Info())
	}
}

// Cleared cache: the demo pair is written again and still opens.
func TestDemoPairAfterCacheCleared(t *testing.T) {
	h := newHarness(t, nil, nil)
	os.RemoveAll(filepath.Dir(h.demo.Target))
	h.m.set.Target = h.demo.Target // the last run used the demo pair
	h.m.openModels()
	h.settle()
	if h.m.target == nil || h.m.errNotice.Visible() {
		t.Fatalf("target %v, error %q", h.m.target, h.m.errNotice.Text())
	}
}

// Dragging a GPU into the Target zone changes the placement and the preview.
func TestDragChipChangesPlacementAndPreview(t *testing.T) {
	h := newHarness(t, func(s *Settings) { s.Layout.TargetDevices, s.Layout.DraftDevices = []int{0}, nil }, nil)
	m := h.m
	m.chooseModel("target", h.demo.Target)
	h.settle()
	if got := len(m.preview.Preview().Devices); got != 1 {
		t.Fatalf("preview has %d devices before the drag, want 1", got)
	}
	chip := m.gpus.ChipOf(widgets.ZonePool, 1)
	from, to := center(chip), center(m.gpus.ZoneArea(widgets.ZoneTarget))
	test.Drag(h.win.Canvas(), from, to.X-from.X, to.Y-from.Y)
	h.settle()
	if !slices.Equal(m.set.Layout.TargetDevices, []int{0, 1}) {
		t.Fatalf("target devices %v after dragging GPU 1 in, want [0 1]", m.set.Layout.TargetDevices)
	}
	pv := m.preview.Preview()
	if len(pv.Devices) != 2 || !pv.Fits {
		t.Fatalf("preview after the drag: %+v", pv)
	}
	for _, d := range pv.Devices {
		if d.Total() == 0 || d.Role != "target" {
			t.Errorf("device %s holds %d bytes as %q", d.Label, d.Total(), d.Role)
		}
	}
	// The saved settings follow.
	h.settle()
	saved, _, _ := m.store.loadSettings()
	if !slices.Equal(saved.Layout.TargetDevices, []int{0, 1}) {
		t.Errorf("saved target devices %v", saved.Layout.TargetDevices)
	}
}

// Both models on one small GPU: the preview turns red with the amount, Load
// is refused, and the planner's fix makes it fit.
func TestOverBudgetOffersFix(t *testing.T) {
	h := newHarness(t, func(s *Settings) { s.Layout.TargetDevices, s.Layout.DraftDevices = []int{0}, []int{0} }, nil)
	m := h.m
	m.chooseModel("target", h.demo.Target)
	m.chooseModel("draft", h.demo.Draft)
	h.settle()
	pv := m.preview.Preview()
	if pv.Fits || !strings.Contains(pv.Summary, "over by") {
		t.Fatalf("preview %+v, want over budget", pv)
	}
	if len(pv.Devices) != 1 || pv.Devices[0].Over() == 0 {
		t.Errorf("no device shown over budget: %+v", pv.Devices)
	}
	if !m.loadBtn.Disabled() {
		t.Error("Load is enabled for a layout that does not fit")
	}
	fix := slices.IndexFunc(pv.Suggestions, func(s string) bool { return strings.HasPrefix(s, "Put the draft on") })
	if fix < 0 {
		t.Fatalf("suggestions %q: none moves the draft", pv.Suggestions)
	}
	m.preview.Apply(fix)
	h.settle()
	if !m.preview.Preview().Fits || m.loadBtn.Disabled() {
		t.Fatalf("after the fix: %+v, Load disabled %v", m.preview.Preview(), m.loadBtn.Disabled())
	}
	if d := m.set.Layout.DraftDevices; len(d) != 1 || d[0] == 0 || !slices.Equal(m.gpus.Placement().Draft, d) {
		t.Errorf("draft devices %v, canvas %v: the draft did not move", d, m.gpus.Placement().Draft)
	}
}

func TestIncompatibleDraftBlocksLoad(t *testing.T) {
	h := newHarness(t, func(s *Settings) { s.Layout.TargetDevices, s.Layout.DraftDevices = []int{2}, []int{2} }, nil)
	m := h.m
	m.chooseModel("target", h.demo.Target)
	m.chooseModel("draft", sharedtest.Path(t, "models", "factory-eagle3-F16.gguf"))
	h.settle()
	if m.draftCard.Info().Bad {
		t.Fatalf("EAGLE-3 draft judged incompatible: %q", m.draftCard.Info().Verdict)
	}
	m.chooseModel("target", h.demo.Draft) // a llama target for an EAGLE-3 draft of a qwen3
	h.settle()
	if info := m.draftCard.Info(); !info.Bad || !strings.HasPrefix(info.Verdict, "Cannot draft") {
		t.Errorf("verdict %+v", info)
	}
	if !m.loadBtn.Disabled() {
		t.Error("Load enabled with an incompatible draft")
	}
}

func TestChoosingAWrongFileSaysWhy(t *testing.T) {
	h := newHarness(t, nil, nil)
	bad := filepath.Join(t.TempDir(), "notes.txt")
	os.WriteFile(bad, []byte("hello"), 0o644)
	h.m.chooseModel("target", bad)
	h.settle()
	if !h.m.errNotice.Visible() || !strings.Contains(h.m.errNotice.Text(), "not a .gguf file") {
		t.Errorf("error notice %q", h.m.errNotice.Text())
	}
	corrupt := filepath.Join(t.TempDir(), "broken.gguf")
	os.WriteFile(corrupt, []byte("GGUF but not really"), 0o644)
	h.m.chooseModel("target", corrupt)
	h.settle()
	if !strings.Contains(h.m.errNotice.Text(), "could not be opened") || h.m.target != nil {
		t.Errorf("error notice %q, target %v", h.m.errNotice.Text(), h.m.target)
	}
}

// A settings file that cannot be read is reported in the window.
func TestCorruptSettingsReported(t *testing.T) {
	h := newHarness(t, func(s *Settings) {}, nil)
	h.settle() // the window's own first save goes before the garbage
	os.WriteFile(filepath.Join(h.m.store.dir, settingsFile), []byte("{garbage"), 0o600)
	m, err := newMainWindow(h.m.app, h.m.store, testInventory(t), nil, h.q.post)
	if err != nil {
		t.Fatal(err)
	}
	if !m.notice.Visible() || !strings.Contains(m.notice.Text(), "default settings") {
		t.Errorf("notice %q", m.notice.Text())
	}
}

// A .gguf dropped on the draft's part of the models column becomes the
// draft; anywhere else, the target.
func TestDroppedFiles(t *testing.T) {
	h := newHarness(t, nil, nil)
	m := h.m
	m.dropped(center(m.draftBox), []fyne.URI{storage.NewFileURI(h.demo.Draft)})
	h.settle()
	m.dropped(fyne.NewPos(5, 5), []fyne.URI{storage.NewFileURI(h.demo.Target)})
	h.settle()
	if m.draft == nil || m.draft.Path != h.demo.Draft || m.target == nil || m.target.Path != h.demo.Target {
		t.Fatalf("after the drops: target %v, draft %v", m.target, m.draft)
	}
	if len(m.set.Recent) != 2 || m.set.Recent[0].Path != h.demo.Target {
		t.Errorf("recent files %v", m.set.Recent)
	}
}

// A settings file set aside at start is still reported once the demo pair
// is chosen: the second notice does not replace the first.
func TestSettingsNoticeSurvivesDemoNotice(t *testing.T) {
	h := newHarness(t, func(s *Settings) {}, nil)
	h.settle()
	os.WriteFile(filepath.Join(h.m.store.dir, settingsFile), []byte("{garbage"), 0o600)
	m, err := newMainWindow(h.m.app, h.m.store, testInventory(t), nil, h.q.post)
	if err != nil {
		t.Fatal(err)
	}
	h.m = m // settle waits for this window's workers
	m.openModels()
	h.settle()
	if m.target == nil || !strings.Contains(m.notice.Text(), "demo pair") || !strings.Contains(m.notice.Text(), "default settings") {
		t.Errorf("target chosen %v, notices %q", m.target != nil, m.notice.Text())
	}
}

// A file that cannot be a target says so in plain words on its card (no
// planner or draft-check errors about its tensors), and Load is refused;
// the recent files keep the role each was opened as. Issue 26, item 5.
func TestTargetRoleVerdictsAndRecents(t *testing.T) {
	h := newHarness(t, func(s *Settings) { s.Layout.TargetDevices, s.Layout.DraftDevices = []int{2}, []int{2} }, nil)
	m := h.m
	eagle := sharedtest.Path(t, "models", "factory-eagle3-F16.gguf")
	vocab := sharedtest.Path(t, "testdata", "vocab", "vocab-qwen3.gguf")
	m.chooseModel("draft", h.demo.Draft)
	m.chooseModel("target", eagle)
	h.settle()
	target, draft := m.targetCard.Info(), m.draftCard.Info()
	if !target.Bad || !strings.HasPrefix(target.Verdict, "An EAGLE-3 draft") || !strings.Contains(target.Verdict, "Choose it as the draft") {
		t.Errorf("EAGLE-3 file as the target: %+v", target)
	}
	if strings.Contains(draft.Verdict, "token_embd") || draft.Bad {
		t.Errorf("the draft's card speaks of the target's tensors: %+v", draft)
	}
	if pv := m.preview.Preview(); !strings.HasPrefix(pv.Error, "An EAGLE-3 draft") {
		t.Errorf("preview %+v", pv)
	}
	if !m.loadBtn.Disabled() || !strings.Contains(m.status.Text, "cannot run as a target") {
		t.Errorf("Load disabled %v, status %q", m.loadBtn.Disabled(), m.status.Text)
	}
	m.chooseModel("target", vocab)
	h.settle()
	if v := m.targetCard.Info().Verdict; !strings.HasPrefix(v, "A vocabulary-only file: no weights to run") {
		t.Errorf("vocabulary file as the target: %q", v)
	}
	m.chooseModel("draft", vocab)
	h.settle()
	if v := m.draftCard.Info(); !v.Bad || !strings.HasPrefix(v.Verdict, "A vocabulary-only file") {
		t.Errorf("vocabulary file as the draft: %+v", v)
	}
	m.chooseModel("draft", eagle)
	m.chooseModel("target", h.demo.Target)
	h.settle()
	if m.targetCard.Info().Bad || m.draftCard.Info().Bad {
		t.Errorf("the demo target with its EAGLE-3 draft: %+v / %+v", m.targetCard.Info(), m.draftCard.Info())
	}
	if rows := m.draftCard.Info().Rows; !slices.ContainsFunc(rows, func(r [2]string) bool { return r[1] == "2.2 M, 1 layer, width 384" }) {
		t.Errorf("EAGLE-3 card rows %v", rows)
	}
	paths := func(role string) (out []string) {
		for _, r := range recentFor(m.set.Recent, role) {
			out = append(out, filepath.Base(r.Path))
		}
		return out
	}
	if got := paths("target"); !slices.Equal(got, []string{"factory-target-Q4_K_M.gguf", "vocab-qwen3.gguf", "factory-eagle3-F16.gguf"}) {
		t.Errorf("target's recent files %v", got)
	}
	if got := paths("draft"); !slices.Equal(got, []string{"factory-eagle3-F16.gguf", "vocab-qwen3.gguf", "factory-draft-Q8_0.gguf"}) {
		t.Errorf("draft's recent files %v", got)
	}
}

// The planner's words name the host's CPU as its chip does: "CPU", never
// "CPU 2" after the GPUs' numbers. Issue 26, item 10.
func TestSuggestionsNameTheCPULikeItsChip(t *testing.T) {
	h := newHarness(t, func(s *Settings) { s.Layout.TargetDevices, s.Layout.DraftDevices = []int{0}, []int{0} }, nil)
	h.m.chooseModel("target", h.demo.Target)
	h.m.chooseModel("draft", h.demo.Draft)
	h.settle()
	all := strings.Join(h.m.preview.Preview().Suggestions, "\n")
	if !strings.Contains(all, "Put the draft on CPU") || strings.Contains(all, "CPU 2") {
		t.Errorf("suggestions %q", all)
	}
}

// The first start's note on the demo pair goes once the pair is loaded;
// other notes stay. Issue 26, item 10.
func TestDemoNoticeGoesWhenLoaded(t *testing.T) {
	h := newHarnessOn(t, cpuOnly(), nil, loadReturning(&fakeModel{}))
	m := h.m
	m.openModels()
	h.settle()
	if !strings.Contains(m.notice.Text(), "demo pair is selected") {
		t.Fatalf("notes %q", m.notice.Text())
	}
	m.startLoad()
	h.waitFor("the load", func() bool { return m.cancelLoad == nil })
	if got := m.notice.Text(); strings.Contains(got, "demo pair is selected") || !strings.Contains(got, "No GPUs listed") {
		t.Errorf("notes after loading: %q", got)
	}
}

// The window opens at its default size on a large screen and inside a
// small one (it opened 1280x820 on an 800-pixel-high screen, cutting off
// the bottom row); its content's minimum fits 800x600 with every page.
// Issue 26, item 9.
func TestWindowFitsTheScreen(t *testing.T) {
	for _, tc := range []struct {
		screen screenPixels
		scale  float32
		want   fyne.Size
	}{
		{screenPixels{1920, 1080}, 1, fyne.NewSize(1280, 820)},
		{screenPixels{1280, 800}, 1, fyne.NewSize(1264, 736)},
		{screenPixels{800, 600}, 1, fyne.NewSize(784, 536)},
		{screenPixels{1920, 1080}, 2, fyne.NewSize(944, 476)},
		{screenPixels{}, 1, fyne.NewSize(1280, 820)}, // not known
	} {
		if got := fitWindow(tc.screen, tc.scale); got != tc.want {
			t.Errorf("screen %v at scale %v: %v, want %v", tc.screen, tc.scale, got, tc.want)
		}
	}
	h := newHarness(t, nil, nil)
	h.m.openModels()
	h.settle()
	if min := h.m.win.Content().MinSize(); min.Width > 784 || min.Height > 536 {
		t.Errorf("the window's content needs %v: more than an 800x600 screen gives", min)
	}
}

// Once the window has its first plan, the chat page is laid out behind the
// Models page at the size it will show at, so the frame that ends a load
// (and shows the chat) has no page to build and measure.
func TestChatPageLaidOutBeforeShown(t *testing.T) {
	h := newHarness(t, nil, loadReturning(&fakeModel{}))
	h.m.openModels()
	h.settle()
	m := h.m
	if m.plan == nil {
		t.Fatal("no first plan")
	}
	if m.pages.Selected() == m.chatTab {
		t.Fatal("the window opened on the chat page")
	}
	want := m.pages.Selected().Content.Size()
	if got := m.chatTab.Content.Size(); want.IsZero() || got != want {
		t.Errorf("before it is shown the chat page is %v, want the Models page's %v", got, want)
	}
}
