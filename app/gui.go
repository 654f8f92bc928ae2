package app

import (
	"fmt"
	"io"
	"os"
	"runtime"

	fyneapp "fyne.io/fyne/v2/app"
	"fyne.io/fyne/v2/widget"
)

// runGUI opens the main window and blocks until it closes.
func runGUI(errOut io.Writer) int {
	if runtime.GOOS == "linux" && os.Getenv("DISPLAY") == "" && os.Getenv("WAYLAND_DISPLAY") == "" {
		// GLFW panics without a display; say why instead.
		fmt.Fprintln(errOut, "tandem: no display (DISPLAY and WAYLAND_DISPLAY are unset); run a command instead, see tandem help")
		return 1
	}
	a := fyneapp.NewWithID("run.tandem.app")
	w := a.NewWindow("Tandem")
	w.SetContent(widget.NewLabel("Tandem"))
	w.ShowAndRun()
	return 0
}
