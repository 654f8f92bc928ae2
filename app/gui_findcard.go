//go:build !headless

package app

import (
	"context"
	"fmt"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"
	"github.com/dustin/go-humanize"

	"github.com/tandem-run/tandem/engine/gguf"
	"github.com/tandem-run/tandem/engine/hub"
	"github.com/tandem-run/tandem/engine/spec"
)

// fileCard is one model of a repository on the Find page: what it is,
// whether it fits each device, and its download.
type fileCard struct {
	p          *findPage
	rf         *hub.RepoFiles
	model      hub.Model
	key        string
	suggestion bool // in the suggested drafts
	header     *gguf.File
	cache      cacheState

	content                     *widget.Card
	facts                       *widget.Label
	fits                        *fyne.Container
	bar                         *widget.ProgressBar
	note                        *widget.Label
	download, pause, cancel     *widget.Button
	useTarget, useDraft, drafts *widget.Button
}

// download is one model's download, shared by the cards that show it.
type download struct {
	stop      context.CancelFunc // nil when not running
	progress  hub.Progress
	path      string // when done
	err       error
	cancelled bool // cancel, not pause: the partial file goes
}

func (p *findPage) newCard(rf *hub.RepoFiles, m hub.Model, st cacheState, suggestion bool) *fileCard {
	c := &fileCard{p: p, rf: rf, model: m, key: rf.Repo + "/" + m.Name, suggestion: suggestion, cache: st}
	c.facts = widget.NewLabel("")
	c.facts.Wrapping = fyne.TextWrapWord
	c.fits = container.NewVBox(widget.NewLabelWithStyle("Reading the header…", fyne.TextAlignLeading, fyne.TextStyle{Italic: true}))
	c.bar = widget.NewProgressBar()
	c.note = widget.NewLabel("")
	c.note.Wrapping = fyne.TextWrapWord
	c.download = widget.NewButtonWithIcon("Download", theme.DownloadIcon(), c.startDownload)
	c.download.Importance = widget.HighImportance
	c.pause = widget.NewButtonWithIcon("Pause", theme.MediaPauseIcon(), c.pauseDownload)
	c.cancel = widget.NewButtonWithIcon("Cancel", theme.CancelIcon(), c.cancelDownload)
	c.useTarget = widget.NewButtonWithIcon("Use as target", theme.ConfirmIcon(), func() { p.use("target", c.path()) })
	c.useDraft = widget.NewButtonWithIcon("Use as draft", theme.ConfirmIcon(), func() { p.use("draft", c.path()) })
	c.drafts = widget.NewButtonWithIcon("Drafts", theme.SearchIcon(), func() {
		if c.header != nil {
			p.suggest(c.header, c.rf.Repo, baseName(c.model.Name))
		}
	})
	c.drafts.Disable()
	c.useTarget.Hidden = suggestion
	c.drafts.Hidden = suggestion
	title := baseName(m.Name)
	sub := rf.Repo
	if !suggestion {
		sub = ""
	}
	buttons := container.NewHBox(c.download, c.pause, c.cancel, c.useTarget, c.useDraft, c.drafts)
	c.content = widget.NewCard(title, sub, container.NewVBox(c.facts, c.fits, c.bar, c.note, buttons))
	c.setFacts()
	p.cards[c.key] = append(p.cards[c.key], c)
	c.refresh()
	return c
}

func (c *fileCard) setFacts() {
	s := fmt.Sprintf("%s · %s", cmpOr(c.model.Quant, "type unknown"), humanize.IBytes(uint64(c.model.Size)))
	if n := len(c.model.Parts); n > 1 {
		s += fmt.Sprintf(" · %d parts", n)
	}
	if c.header != nil {
		d := c.header.Describe()
		s += fmt.Sprintf(" · %s, %s parameters, %s, vocabulary %d", d.Architecture,
			humanize.SIWithDigits(float64(d.Parameters), 1, ""), plural(d.Layers, "layer"), d.VocabSize)
	}
	c.facts.SetText(s)
}

// setHeader shows what the remote header says: the facts and each
// device's verdict.
func (c *fileCard) setHeader(f *gguf.File, fits []fit, st hub.HeaderStats, err error) {
	c.fits.RemoveAll()
	if err != nil {
		l := widget.NewLabel("Header: " + sentence(err))
		l.Wrapping = fyne.TextWrapWord
		l.Importance = widget.DangerImportance
		c.fits.Add(l)
		return
	}
	c.header = f
	c.drafts.Enable()
	c.setFacts()
	var segs []widget.RichTextSegment
	for _, v := range fits {
		color := theme.ColorNameSuccess
		if !v.Fits {
			color = theme.ColorNameError
		}
		segs = append(segs, &widget.TextSegment{Text: v.String(), Style: widget.RichTextStyle{ColorName: color}})
	}
	segs = append(segs, &widget.TextSegment{Text: fmt.Sprintf("Planned from the header alone: %s read of %s.",
		humanize.IBytes(uint64(st.Fetched)), humanize.IBytes(uint64(st.Size))),
		Style: widget.RichTextStyle{ColorName: theme.ColorNamePlaceHolder, TextStyle: fyne.TextStyle{Italic: true}}})
	c.fits.Add(widget.NewRichText(segs...))
}

// setKind says what kind of draft a suggestion is.
func (c *fileCard) setKind(s hub.Suggestion) {
	c.fits.RemoveAll()
	text := "Draft model with the target's vocabulary and special tokens."
	if s.Kind == spec.DraftEagle3 {
		text = "EAGLE-3 head: reads the target's hidden states and borrows its embedding and output head."
	}
	l := widget.NewLabel(text)
	l.Wrapping = fyne.TextWrapWord
	l.Importance = widget.SuccessImportance
	c.fits.Add(l)
}

// path is the model's local file, once downloaded.
func (c *fileCard) path() string {
	if d := c.p.downloads[c.key]; d != nil && d.path != "" {
		return d.path
	}
	return c.cache.path
}

// refresh shows the download's state.
func (c *fileCard) refresh() {
	d := c.p.downloads[c.key]
	show := func(b *widget.Button, on bool) { b.Hidden = !on; b.Refresh() }
	done := c.path() != ""
	running := d != nil && d.stop != nil
	var have, total int64 = c.cache.partial, c.model.Size
	if d != nil && d.progress.Total > 0 {
		have = d.progress.Done
	}
	started := !done && (running || have > 0)
	show(c.download, !done && !running)
	show(c.pause, running)
	show(c.cancel, started)
	show(c.useTarget, done && !c.suggestion)
	show(c.useDraft, done)
	c.bar.Hidden = !started
	if total > 0 {
		c.bar.SetValue(float64(have) / float64(total))
	}
	c.bar.Refresh()
	c.note.Importance = widget.MediumImportance
	c.download.SetText("Download")
	switch {
	case done:
		c.note.SetText("Downloaded and checked; in the Hub cache.")
	case d != nil && d.err != nil:
		c.note.SetText(sentence(d.err))
		c.note.Importance = widget.DangerImportance
		c.download.SetText("Retry")
	case running && d.progress.Note != "":
		c.note.SetText(d.progress.Note)
	case running:
		c.note.SetText(fmt.Sprintf("Downloading: %s of %s", humanize.IBytes(uint64(have)), humanize.IBytes(uint64(total))))
	case have > 0:
		c.note.SetText(fmt.Sprintf("Paused at %s of %s; the partial file is kept.", humanize.IBytes(uint64(have)), humanize.IBytes(uint64(total))))
		c.download.SetText("Resume")
	default:
		c.note.SetText("")
	}
	c.note.Hidden = c.note.Text == ""
	c.note.Refresh()
}

func (p *findPage) refreshKey(key string) {
	for _, c := range p.cards[key] {
		c.refresh()
	}
}

// startDownload pulls the model (resuming a partial file); progress is
// posted when the per-mille changes or a note comes.
func (c *fileCard) startDownload() {
	p, key := c.p, c.key
	d := p.downloads[key]
	if d == nil {
		d = &download{}
		p.downloads[key] = d
	}
	if d.stop != nil {
		return
	}
	ctx, stop := context.WithCancel(p.ctx)
	d.stop, d.err, d.cancelled = stop, nil, false
	rf, m := c.rf, c.model
	p.refreshKey(key)
	p.goWork(func() {
		last := int64(-1)
		path, err := p.client.Pull(ctx, rf, m, "main", func(pr hub.Progress) {
			permille := int64(0)
			if pr.Total > 0 {
				permille = 1000 * pr.Done / pr.Total
			}
			if pr.Note == "" && permille == last {
				return
			}
			last = permille
			p.m.post(func() {
				d.progress = pr
				p.refreshKey(key)
			})
		})
		stopped := err != nil && ctx.Err() != nil
		p.m.post(func() {
			stop()
			d.stop = nil
			switch {
			case err == nil:
				d.path = path
			case stopped && d.cancelled:
				p.discard(key, rf, m)
			case !stopped:
				d.err = err
			}
			p.refreshKey(key)
		})
	})
}

func (c *fileCard) pauseDownload() {
	if d := c.p.downloads[c.key]; d != nil && d.stop != nil {
		d.stop()
	}
}

// cancelDownload stops a download and deletes its partial file.
func (c *fileCard) cancelDownload() {
	p, key := c.p, c.key
	d := p.downloads[key]
	if d == nil {
		d = &download{}
		p.downloads[key] = d
	}
	d.cancelled = true
	if d.stop != nil {
		d.stop()
		return
	}
	p.discard(key, c.rf, c.model)
}

// discard deletes a stopped download's partial file.
func (p *findPage) discard(key string, rf *hub.RepoFiles, m hub.Model) {
	d := p.downloads[key]
	p.goWork(func() {
		err := p.client.Discard(rf.Repo, m)
		p.m.post(func() {
			d.err, d.progress, d.cancelled = err, hub.Progress{}, false
			for _, c := range p.cards[key] {
				c.cache.partial = 0
			}
			p.refreshKey(key)
		})
	})
}
