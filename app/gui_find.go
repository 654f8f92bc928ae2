//go:build !headless

package app

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"
	"github.com/dustin/go-humanize"

	"github.com/tandem-run/tandem/engine/gguf"
	"github.com/tandem-run/tandem/engine/hub"
)

// findPage is the window's Find page: a Hugging Face Hub search, a
// repository's GGUF models as cards with each device's fit verdict from
// the file's remote header, downloads (pause, resume, cancel), and the
// drafts the Hub has for a target. Network work runs on goroutines of its
// own and comes back through post; the fields are touched on the main
// goroutine only.
type findPage struct {
	m       *mainWindow
	client  *hub.Client
	content fyne.CanvasObject
	ctx     context.Context // all of the page's work; cancelled by close
	stop    context.CancelFunc
	jobs    sync.WaitGroup

	query       *widget.Entry
	sortSel     *widget.Select
	status      *widget.Label
	results     *fyne.Container
	repoTitle   *widget.Label
	files       *fyne.Container
	draftsTitle *widget.Label
	draftsNote  *widget.Label
	drafts      *fyne.Container

	searchSeq, listSeq, suggestSeq int
	stopList                       context.CancelFunc // the shown listing's header reads
	shownRepo                      string
	autoFor                        string // the Models page's target the drafts were last found for
	cards                          map[string][]*fileCard
	downloads                      map[string]*download
}

var sortNames = []string{"downloads", "likes", "updated", "trending"}

func newFindPage(m *mainWindow, client *hub.Client) *findPage {
	p := &findPage{m: m, client: client, cards: map[string][]*fileCard{}, downloads: map[string]*download{}}
	p.ctx, p.stop = context.WithCancel(context.Background())
	p.query = widget.NewEntry()
	p.query.SetPlaceHolder("Search the Hugging Face Hub for GGUF models, e.g. Qwen3 8B")
	p.query.OnSubmitted = func(string) { p.search() }
	p.sortSel = widget.NewSelect(sortNames, func(string) {
		if p.query.Text != "" {
			p.search()
		}
	})
	p.sortSel.SetSelected("downloads")
	searchBtn := widget.NewButtonWithIcon("Search", theme.SearchIcon(), p.search)
	p.status = widget.NewLabel(p.where())
	p.status.Wrapping = fyne.TextWrapWord
	p.results = container.NewVBox()
	p.repoTitle = widget.NewLabelWithStyle("Choose a repository to see its files.", fyne.TextAlignLeading, fyne.TextStyle{Bold: true})
	p.repoTitle.Wrapping = fyne.TextWrapWord
	p.files = container.NewVBox()
	p.draftsTitle = widget.NewLabelWithStyle("Suggested drafts", fyne.TextAlignLeading, fyne.TextStyle{Bold: true})
	p.draftsTitle.Wrapping = fyne.TextWrapWord
	p.draftsNote = widget.NewLabel("Choose a target on the Models page, or press Drafts on a file, to see which drafts on the Hub share its vocabulary.")
	p.draftsNote.Wrapping = fyne.TextWrapWord
	p.drafts = container.NewVBox()

	bar := container.NewBorder(nil, nil, nil, container.NewHBox(p.sortSel, searchBtn), p.query)
	left := container.NewBorder(nil, nil, nil, nil, container.NewVScroll(p.results))
	middle := container.NewBorder(p.repoTitle, nil, nil, nil, container.NewVScroll(p.files))
	right := container.NewBorder(container.NewVBox(p.draftsTitle, p.draftsNote), nil, nil, nil, container.NewVScroll(p.drafts))
	inner := container.NewHSplit(middle, right)
	inner.Offset = 0.6
	split := container.NewHSplit(left, inner)
	split.Offset = 0.24
	p.content = container.NewBorder(container.NewVBox(bar, p.status), nil, nil, nil, split)
	return p
}

// where says which Hub the page talks to and how.
func (p *findPage) where() string {
	cfg := p.client.Config()
	s := "Hub: " + cfg.Endpoint + "; downloads go to " + cfg.Cache + " (shared with the Hub's own tools)"
	if cfg.Token != "" {
		s += "; token from " + cfg.TokenFrom
	}
	if cfg.Offline {
		s = "Offline (HF_HUB_OFFLINE is set): only models already in " + cfg.Cache + " can be used."
	}
	return s
}

// close stops the page's work and waits for it (the window is closing).
func (p *findPage) close() {
	p.stop()
	p.jobs.Wait()
}

// goWork runs work on a goroutine of its own that close waits for.
func (p *findPage) goWork(work func()) {
	p.jobs.Add(1)
	go func() {
		defer p.jobs.Done()
		work()
	}()
}

// focus shows the page with the cursor in the search box.
func (p *findPage) focus() {
	p.m.pages.Select(p.m.findTab)
	p.m.win.Canvas().Focus(p.query)
	p.shown()
}

// shown refreshes what depends on the rest of the window: the drafts of
// the Models page's target, when it changed since they were found (a
// file's Drafts button shows others until then).
func (p *findPage) shown() {
	if t := p.m.target; t != nil && t.Path != p.autoFor {
		p.autoFor = t.Path
		p.suggest(t, "", "the target on the Models page ("+baseName(t.Path)+")")
	}
}

func (p *findPage) search() {
	s, err := hub.ParseSort(p.sortSel.Selected)
	if err != nil {
		s = hub.SortDownloads
	}
	text := strings.TrimSpace(p.query.Text)
	p.searchSeq++
	seq := p.searchSeq
	p.status.SetText("Searching for " + fmt.Sprintf("%q", text) + "…")
	p.goWork(func() {
		repos, err := p.client.Search(p.ctx, hub.Query{Text: text, Sort: s, Limit: 30})
		p.m.post(func() {
			if seq == p.searchSeq {
				p.showResults(text, repos, err)
			}
		})
	})
}

func (p *findPage) showResults(text string, repos []hub.Repo, err error) {
	p.results.RemoveAll()
	if err != nil {
		p.status.SetText(sentence(err))
		p.status.Importance = widget.DangerImportance
		p.status.Refresh()
		return
	}
	p.status.Importance = widget.MediumImportance
	p.status.SetText(fmt.Sprintf("%d repositories with GGUF files match %q.", len(repos), text))
	for _, r := range repos {
		label := fmt.Sprintf("%s\n↓ %s   ♥ %d", r.ID, humanize.SIWithDigits(float64(r.Downloads), 1, ""), r.Likes)
		if r.Gated != "" {
			label += "   gated"
		}
		b := widget.NewButton(label, func() { p.openRepo(r.ID) })
		b.Alignment = widget.ButtonAlignLeading
		p.results.Add(b)
	}
	if len(repos) > 0 {
		p.openRepo(repos[0].ID)
	}
}

// openRepo lists a repository's models and reads their headers for the
// fit verdicts, a few at a time.
func (p *findPage) openRepo(id string) {
	if p.stopList != nil {
		p.stopList()
	}
	ctx, cancel := context.WithCancel(p.ctx)
	p.stopList = cancel
	p.listSeq++
	seq := p.listSeq
	p.shownRepo = id
	p.repoTitle.SetText(id + ": reading the file list…")
	p.files.RemoveAll()
	p.dropCards(func(c *fileCard) bool { return !c.suggestion })
	p.goWork(func() {
		rf, err := p.client.Files(ctx, id, "")
		var states []cacheState
		if err == nil {
			for _, m := range rf.Models {
				states = append(states, p.cacheState(rf, m))
			}
		}
		p.m.post(func() {
			if seq != p.listSeq {
				return
			}
			if err != nil {
				p.repoTitle.SetText(id + ": " + sentence(err))
				return
			}
			p.showFiles(ctx, rf, states)
		})
	})
}

// cacheState is what the cache holds of a model: all of it (path) or part.
type cacheState struct {
	path    string
	partial int64
}

func (p *findPage) cacheState(rf *hub.RepoFiles, m hub.Model) cacheState {
	if path, err := p.client.Cached(hub.Ref{Repo: rf.Repo, Revision: rf.Commit, File: m.Name}); err == nil {
		return cacheState{path: path}
	}
	return cacheState{partial: p.client.Partial(rf.Repo, m)}
}

func (p *findPage) showFiles(ctx context.Context, rf *hub.RepoFiles, states []cacheState) {
	var total int64
	for _, m := range rf.Models {
		total += m.Size
	}
	title := fmt.Sprintf("%s: %d models, %s in all", rf.Repo, len(rf.Models), humanize.IBytes(uint64(total)))
	if rf.Gated != "" {
		title += " (gated: downloads need a token)"
	}
	p.repoTitle.SetText(title)
	sem := make(chan struct{}, 3)
	inv := p.m.inv
	for i, m := range rf.Models {
		c := p.newCard(rf, m, states[i], false)
		p.files.Add(c.content)
		p.goWork(func() {
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				return
			}
			defer func() { <-sem }()
			f, st, err := p.client.Header(ctx, rf.Repo, rf.Commit, m)
			var fits []fit
			if err == nil {
				fits = fitsOf(f, inv, 0)
			}
			p.m.post(func() {
				if ctx.Err() == nil {
					c.setHeader(f, fits, st, err)
				}
			})
		})
	}
}

// dropCards forgets the cards drop says.
func (p *findPage) dropCards(drop func(*fileCard) bool) {
	for k, cs := range p.cards {
		var keep []*fileCard
		for _, c := range cs {
			if !drop(c) {
				keep = append(keep, c)
			}
		}
		p.cards[k] = keep
	}
}

// use selects a downloaded model on the Models page.
func (p *findPage) use(role, path string) {
	p.m.chooseModel(role, path)
	p.m.pages.SelectIndex(0)
}

func baseName(path string) string {
	if i := strings.LastIndexAny(path, `/\`); i >= 0 {
		return path[i+1:]
	}
	return path
}

// suggest looks for drafts of target on the Hub (targetRepo "" for a local
// file) and shows them, smallest first.
func (p *findPage) suggest(target *gguf.File, targetRepo, what string) {
	p.suggestSeq++
	seq := p.suggestSeq
	p.draftsTitle.SetText("Suggested drafts for " + what)
	p.draftsNote.SetText("Reading the headers of candidate drafts…")
	p.drafts.RemoveAll()
	p.dropCards(func(c *fileCard) bool { return c.suggestion })
	p.goWork(func() {
		found, err := p.client.SuggestDrafts(p.ctx, target, targetRepo)
		states := make([]cacheState, len(found))
		for i, s := range found {
			states[i] = p.cacheState(s.Repo, s.Model)
		}
		p.m.post(func() {
			if seq != p.suggestSeq {
				return
			}
			switch {
			case err != nil && !errors.Is(err, context.Canceled):
				p.draftsNote.SetText(sentence(err))
			case len(found) == 0:
				p.draftsNote.SetText("No draft on the Hub passed the vocabulary check for it.")
			default:
				p.draftsNote.SetText(fmt.Sprintf("%d found whose vocabulary and special tokens match the target's, smallest first.", len(found)))
			}
			for i, s := range found {
				c := p.newCard(s.Repo, s.Model, states[i], true)
				c.setKind(s)
				p.drafts.Add(c.content)
			}
		})
	})
}
