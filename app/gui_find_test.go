//go:build !headless

package app

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"

	"github.com/tandem-run/tandem/engine/gguf"
	"github.com/tandem-run/tandem/engine/hub"
	"github.com/tandem-run/tandem/engine/hub/hubtest"
	"github.com/tandem-run/tandem/engine/plan"
	"github.com/tandem-run/tandem/kernels/quant"
)

// findHarness is the window against a fake Hub.
func findHarness(t *testing.T) (*guiHarness, *hubtest.Hub, string) {
	t.Helper()
	h, models := fakeHub(t)
	g := newHarness(t, nil, nil)
	t.Cleanup(g.m.find.close)
	return g, h, models
}

func (g *guiHarness) card(key string, suggestion bool) *fileCard {
	for _, c := range g.m.find.cards[key] {
		if c.suggestion == suggestion {
			return c
		}
	}
	return nil
}

// fitLines are a card's verdict lines and whether each is green.
func fitLines(c *fileCard) (lines []string, green []bool) {
	for _, o := range c.fits.Objects {
		rt, ok := o.(*widget.RichText)
		if !ok {
			continue
		}
		for _, s := range rt.Segments {
			ts := s.(*widget.TextSegment)
			switch ts.Style.ColorName {
			case theme.ColorNameSuccess, theme.ColorNameError:
				lines = append(lines, ts.Text)
				green = append(green, ts.Style.ColorName == theme.ColorNameSuccess)
			}
		}
	}
	return lines, green
}

const targetQ4 = hubtest.TargetRepo + "/factory-target-Q4_K_M.gguf"

// A search opens the first repository; each file's card says, from its
// remote header, which devices it fits, as planning the local copy does.
func TestFindSearchShowsFitVerdicts(t *testing.T) {
	g, _, models := findHarness(t)
	p := g.m.find
	p.query.SetText("factory")
	p.search()
	g.waitFor("the cards", func() bool { return len(p.files.Objects) > 0 })
	if len(p.results.Objects) != 3 || p.shownRepo != hubtest.TargetRepo || len(p.files.Objects) != 3 {
		t.Fatalf("%d results, shown %q, %d cards", len(p.results.Objects), p.shownRepo, len(p.files.Objects))
	}
	for _, name := range []string{"factory-target-Q4_K_M.gguf", "factory-target-F16.gguf"} {
		c := g.card(hubtest.TargetRepo+"/"+name, false)
		g.waitFor(name+"'s verdicts", func() bool { l, _ := fitLines(c); return len(l) > 0 })
		lines, green := fitLines(c)
		if len(lines) != len(g.m.inv.Devices)+1 {
			t.Fatalf("%s: lines %q", name, lines)
		}
		local, err := gguf.Open(filepath.Join(models, name))
		if err != nil {
			t.Fatal(err)
		}
		for i, d := range g.m.inv.Devices {
			pl, err := plan.Make(plan.Input{Target: local, Devices: g.m.inv.Devices, Ctx: 2048, Batch: 512, KV: plan.SameKV(quant.F16),
				TargetPlacement: plan.Placement{Devices: []int{d.Index}}})
			if err != nil {
				t.Fatal(err)
			}
			if green[i] != pl.Fits || !strings.HasPrefix(lines[i], d.Label()) {
				t.Errorf("%s: %q green %v, the local plan fits %v", name, lines[i], green[i], pl.Fits)
			}
		}
		local.Close()
	}
	if _, green := fitLines(g.card(hubtest.TargetRepo+"/factory-target-F16.gguf", false)); green[0] {
		t.Error("the F16 target fits a 64 MiB GPU: the test devices no longer tell files apart")
	}
}

// Download, pause (the partial file stays), resume (from where it was),
// then use the file as the target.
func TestFindDownloadPauseResumeUse(t *testing.T) {
	g, h, _ := findHarness(t)
	p := g.m.find
	p.openRepo(hubtest.TargetRepo)
	g.waitFor("the cards", func() bool { return g.card(targetQ4, false) != nil })
	c := g.card(targetQ4, false)
	h.SetFaults(hubtest.Faults{BytesPerSecond: 2 << 20})
	c.startDownload()
	g.waitFor("progress", func() bool { d := p.downloads[targetQ4]; return d.progress.Done > 1<<20 })
	if c.pause.Hidden || !c.download.Hidden || c.bar.Hidden {
		t.Error("a running download shows no Pause, or shows Download")
	}
	c.pauseDownload()
	g.waitFor("the pause", func() bool { return p.downloads[targetQ4].stop == nil })
	if c.download.Hidden || c.download.Text != "Resume" || !strings.Contains(c.note.Text, "Paused") {
		t.Errorf("paused: button %q hidden %v, note %q", c.download.Text, c.download.Hidden, c.note.Text)
	}
	partials, _ := filepath.Glob(filepath.Join(os.Getenv("HF_HOME"), "hub", "*", "blobs", "*.incomplete"))
	if len(partials) != 1 {
		t.Fatalf("partial files %v", partials)
	}
	h.SetFaults(hubtest.Faults{})
	c.startDownload()
	g.waitFor("the download", func() bool { return c.path() != "" || p.downloads[targetQ4].err != nil })
	if err := p.downloads[targetQ4].err; err != nil {
		t.Fatal(err)
	}
	// Header reads ask for bytes=A-B; the download for everything, then the rest.
	ranges := h.Ranges()
	last := ranges[len(ranges)-1]
	if !slices.Contains(ranges, "") || !strings.HasPrefix(last, "bytes=") || !strings.HasSuffix(last, "-") || last == "bytes=0-" {
		t.Errorf("the resumed download did not ask for the rest: %q", ranges)
	}
	if c.useTarget.Hidden || c.useDraft.Hidden || !c.pause.Hidden || !c.download.Hidden {
		t.Error("a finished download does not offer Use as target/draft")
	}
	c.useTarget.OnTapped()
	g.settle()
	if g.m.target == nil || g.m.target.Path != c.path() || g.m.pages.SelectedIndex() != 0 {
		t.Errorf("target %v, page %d", g.m.target, g.m.pages.SelectedIndex())
	}
}

// Cancel stops a download and deletes its partial file.
func TestFindCancelDeletesPartial(t *testing.T) {
	g, h, _ := findHarness(t)
	p := g.m.find
	p.openRepo(hubtest.TargetRepo)
	g.waitFor("the cards", func() bool { return g.card(targetQ4, false) != nil })
	c := g.card(targetQ4, false)
	h.SetFaults(hubtest.Faults{BytesPerSecond: 1 << 20})
	c.startDownload()
	g.waitFor("progress", func() bool { return p.downloads[targetQ4].progress.Done > 0 })
	c.cancelDownload()
	g.waitFor("the cancel", func() bool {
		d := p.downloads[targetQ4]
		return d.stop == nil && !d.cancelled
	})
	partials, _ := filepath.Glob(filepath.Join(os.Getenv("HF_HOME"), "hub", "*", "blobs", "*.incomplete"))
	if len(partials) != 0 || c.download.Text != "Download" || !c.cancel.Hidden || !c.bar.Hidden {
		t.Errorf("after cancel: partials %v, button %q", partials, c.download.Text)
	}
}

// The drafts the Hub has for the Models page's target: the draft model and
// the EAGLE-3 head, smallest first; one downloads and becomes the draft.
func TestFindSuggestedDrafts(t *testing.T) {
	g, _, _ := findHarness(t)
	g.m.openModels()
	g.settle()
	p := g.m.find
	p.focus()
	g.waitFor("the suggestions", func() bool { return len(p.drafts.Objects) > 0 })
	if len(p.drafts.Objects) != 2 {
		t.Fatalf("%d suggestions: %q", len(p.drafts.Objects), p.draftsNote.Text)
	}
	first := p.drafts.Objects[0].(*widget.Card)
	second := p.drafts.Objects[1].(*widget.Card)
	if first.Title != "factory-draft-Q8_0.gguf" || second.Title != "factory-eagle3-F16.gguf" {
		t.Errorf("suggestions %q, %q", first.Title, second.Title)
	}
	c := g.card(hubtest.Eagle3Repo+"/factory-eagle3-F16.gguf", true)
	if c == nil || !strings.Contains(c.fits.Objects[0].(*widget.Label).Text, "EAGLE-3") {
		t.Fatal("the EAGLE-3 suggestion does not say what it is")
	}
	c.startDownload()
	g.waitFor("the download", func() bool { return c.path() != "" })
	c.useDraft.OnTapped()
	g.settle()
	if g.m.draft == nil || g.m.draft.Path != c.path() || g.m.draftCard.Info().Bad {
		t.Errorf("draft %v, verdict %+v", g.m.draft, g.m.draftCard.Info())
	}
}

// Errors show on the page: an unreachable Hub, a repository with no GGUF.
func TestFindErrors(t *testing.T) {
	g, _, _ := findHarness(t)
	p := g.m.find
	p.openRepo("tandem-demo/no-gguf")
	g.waitFor("the listing", func() bool { return strings.Contains(p.repoTitle.Text, "GGUF") })
	if !strings.Contains(p.repoTitle.Text, "no GGUF files") {
		t.Errorf("no-GGUF repo: %q", p.repoTitle.Text)
	}
	cfg := p.client.Config()
	cfg.Endpoint = "http://127.0.0.1:1"
	p.client = hub.New(cfg, hub.WithRetries(0))
	p.query.SetText("x")
	p.search()
	g.waitFor("the error", func() bool { return p.status.Importance == widget.DangerImportance })
	if !strings.Contains(p.status.Text, "cannot be reached") {
		t.Errorf("unreachable: %q", p.status.Text)
	}
}
