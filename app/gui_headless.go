//go:build headless

package app

import (
	"errors"
	"fmt"
	"io"
)

// The headless build (go build -tags headless, with CGO_ENABLED=0 for a
// static binary) has every command but the window: no Fyne, GTK or X
// libraries are linked, so it starts on GPU servers that have none. The
// window's files carry the !headless tag; these stand in for them.

const guiSummary = "open the window (not in this headless build)"

// errHeadless answers a window asked of the headless build.
var errHeadless = errors.New("this is the headless build of tandem: it has no window; run a command instead (tandem help), or use the desktop build for the window")

// guiOptions are the window's options (gui.go's), parsed but unused here.
type guiOptions struct {
	frameStats                     string
	simulate, virtual, devicesFile string
	cpuMoE, cpuMoEDraft            bool
}

// runGUI is tandem with no arguments: here it explains and lists the
// commands.
func runGUI(errOut io.Writer) int {
	fmt.Fprintf(errOut, "tandem: %v\n\n", errHeadless)
	printHelp(errOut)
	return 2
}

func openWindow(guiOptions) error { return errHeadless }
