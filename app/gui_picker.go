//go:build !headless

package app

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"fyne.io/fyne/v2"
	fynedialog "fyne.io/fyne/v2/dialog"
	"fyne.io/fyne/v2/storage"
	"github.com/sqweek/dialog"
)

// filePicker asks the user for a file. done runs on the main goroutine with
// the chosen path, or "" when the user cancelled.
type filePicker interface {
	openModel(title string, done func(path string))
	saveFile(title, name string, done func(path string))
}

// nativePicker uses the desktop's file chooser (GTK through sqweek/dialog),
// in a goroutine since it blocks. Where it is unavailable (it fails or
// panics, e.g. no GTK), Fyne's own dialog is used from then on.
type nativePicker struct {
	win      fyne.Window
	post     func(func())
	fallback bool // touched on the main goroutine only
}

func (p *nativePicker) openModel(title string, done func(string)) {
	if p.fallback {
		p.fyneOpen(done)
		return
	}
	go func() {
		path, err := native(func() (string, error) {
			return dialog.File().Title(title).Filter("GGUF models", "gguf").Load()
		})
		p.post(func() { p.result(path, err, done, func() { p.fyneOpen(done) }) })
	}()
}

func (p *nativePicker) saveFile(title, name string, done func(string)) {
	if p.fallback {
		p.fyneSave(name, done)
		return
	}
	home, _ := os.UserHomeDir()
	go func() {
		path, err := native(func() (string, error) {
			return dialog.File().Title(title).SetStartDir(home).SetStartFile(name).Filter("Markdown", "md").Save()
		})
		p.post(func() { p.result(path, err, done, func() { p.fyneSave(name, done) }) })
	}()
}

func (p *nativePicker) result(path string, err error, done func(string), fallback func()) {
	switch {
	case err == nil:
		done(path)
	case errors.Is(err, dialog.ErrCancelled):
		done("")
	default:
		fyne.LogError("native file dialog unavailable, using Fyne's", err)
		p.fallback = true
		fallback()
	}
}

// native calls a sqweek/dialog function, which panics without a display.
func native(f func() (string, error)) (path string, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("app: file dialog: %v", r)
		}
	}()
	return f()
}

func (p *nativePicker) fyneOpen(done func(string)) {
	d := fynedialog.NewFileOpen(func(r fyne.URIReadCloser, err error) {
		if err != nil || r == nil {
			done("")
			return
		}
		r.Close()
		done(r.URI().Path())
	}, p.win)
	d.SetFilter(storage.NewExtensionFileFilter([]string{".gguf"}))
	d.Resize(fyne.NewSize(800, 560))
	d.Show()
}

func (p *nativePicker) fyneSave(name string, done func(string)) {
	d := fynedialog.NewFileSave(func(w fyne.URIWriteCloser, err error) {
		if err != nil || w == nil {
			done("")
			return
		}
		w.Close()
		done(w.URI().Path())
	}, p.win)
	d.SetFileName(filepath.Base(name))
	d.Resize(fyne.NewSize(800, 560))
	d.Show()
}
