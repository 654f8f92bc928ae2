// Package assets holds what the binary carries with it: the application
// icon and the demo model pair, so that a fresh install can chat before the
// user has a model of their own.
//
// The demo pair is two small models trained for Tandem on public-domain text
// (the King James Bible and fortune-cookie files; see the README): a qwen3
// target at Q4_K_M and a llama draft at Q8_0 sharing its vocabulary. They are
// embedded, and WriteDemoPair copies them once into a cache directory,
// because the engine maps model files rather than reading them from memory.
package assets

//go:generate go run ../packaging/icongen

import (
	"bytes"
	"embed"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/google/renameio/v2"
)

// Names of the demo files, in the binary and in the cache directory.
const (
	DemoTargetFile = "factory-target-Q4_K_M.gguf"
	DemoDraftFile  = "factory-draft-Q8_0.gguf"
)

// DemoNote says in one sentence what the demo pair is, for people.
const DemoNote = "The demo pair: a 19M-parameter qwen3 target and a 4M-parameter llama draft, " +
	"trained for Tandem on the King James Bible and fortune-cookie files. " +
	`Try "Quote Genesis 1:3." or "Tell me a fortune.": it answers with text it memorised ` +
	"(it knows the King James text better than its verse numbers)."

// DemoPrompts are prompts the demo pair answers from what it memorised,
// without a system prompt: a verse of Genesis 1, a fortune.
func DemoPrompts() []string { return []string{"Quote Genesis 1:3.", "Tell me a fortune."} }

//go:embed icon.png icon.svg factory-target-Q4_K_M.gguf factory-draft-Q8_0.gguf
var files embed.FS

// Icon is the 512x512 application icon (PNG).
func Icon() []byte { return mustRead("icon.png") }

// IconSVG is the application icon's source (SVG).
func IconSVG() []byte { return mustRead("icon.svg") }

// mustRead reads a file embedded above; it cannot fail unless the embed
// list and the names here disagree, which the tests catch.
func mustRead(name string) []byte {
	b, err := fs.ReadFile(files, name)
	if err != nil {
		return nil
	}
	return b
}

// DemoPair is where the demo models are on disk.
type DemoPair struct {
	Target, Draft string
}

// WriteDemoPair makes sure dir/demo holds the demo models and returns their
// paths. A file already there with the right content is reused; a missing,
// short or different one is (re)written atomically, so two processes doing
// this at once both end with whole files.
func WriteDemoPair(dir string) (DemoPair, error) {
	dir = filepath.Join(dir, "demo")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return DemoPair{}, fmt.Errorf("assets: demo models: %w", err)
	}
	p := DemoPair{Target: filepath.Join(dir, DemoTargetFile), Draft: filepath.Join(dir, DemoDraftFile)}
	for _, f := range []struct{ name, path string }{{DemoTargetFile, p.Target}, {DemoDraftFile, p.Draft}} {
		if err := writeOnce(f.name, f.path); err != nil {
			return DemoPair{}, fmt.Errorf("assets: demo model %s: %w", f.name, err)
		}
	}
	return p, nil
}

func writeOnce(name, path string) error {
	want, err := fs.ReadFile(files, name)
	if err != nil {
		return err
	}
	if have, err := os.ReadFile(path); err == nil && bytes.Equal(have, want) {
		return nil
	}
	return renameio.WriteFile(path, want, 0o644)
}
