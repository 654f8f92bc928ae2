package widgets

import (
	"flag"
	"os"
	"path/filepath"
	"testing"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/test"
	"fyne.io/fyne/v2/widget"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// assertMarkup compares o's rendering, as Fyne's markup, with
// testdata/name; with -update it rewrites the file instead.
func assertMarkup(t *testing.T, name string, o fyne.CanvasObject) {
	t.Helper()
	if !test.AssertRendersToMarkup(t, name, canvasOf(o)) && *update {
		adopt(t, name)
	}
}

// assertImage is assertMarkup for the rendered pixels.
func assertImage(t *testing.T, name string, o fyne.CanvasObject) {
	t.Helper()
	if !test.AssertObjectRendersToImage(t, name, o) && *update {
		adopt(t, name)
	}
}

// canvasOf puts o alone on a canvas at its size, as Fyne's
// AssertObjectRendersToMarkup does, then lays it out once more, as the
// real driver does on the next frame when a minimum height changed with
// the width given (text that wraps): the test canvas lays out only once
// per resize.
func canvasOf(o fyne.CanvasObject) test.WindowlessCanvas {
	c := test.NewCanvas()
	c.SetPadded(false)
	size := o.MinSize().Max(o.Size())
	c.SetContent(o)
	c.Resize(size)
	for range 2 {
		for _, x := range test.LaidOutObjects(o) {
			if box, ok := x.(*fyne.Container); ok {
				box.Refresh()
			}
		}
	}
	return c
}

// adopt makes the rendering Fyne wrote to testdata/failed the golden file.
func adopt(t *testing.T, name string) {
	t.Helper()
	dst := filepath.Join("testdata", name)
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join("testdata", "failed", name), dst); err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join("testdata", "failed"))
	t.Logf("updated %s: run the tests again to check it", dst)
}

// buttonsNamed finds the buttons with this text inside o.
func buttonsNamed(o fyne.CanvasObject, text string) []*widget.Button {
	var out []*widget.Button
	for _, c := range test.LaidOutObjects(o) {
		if b, ok := c.(*widget.Button); ok && b.Text == text && b.Visible() {
			out = append(out, b)
		}
	}
	return out
}

// isCloseButton reports an icon-only button (the notice's close button).
func isCloseButton(o fyne.CanvasObject) bool {
	b, ok := o.(*widget.Button)
	return ok && b.Text == "" && b.Icon != nil
}
