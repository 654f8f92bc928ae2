//go:build !headless && !((linux || freebsd || netbsd || openbsd) && cgo && !wayland)

package app

import (
	"os"
	"runtime"
)

// checkDisplay finds out whether a window can be opened where that cannot
// be asked of the X server (Wayland builds, other systems): on Linux and
// the BSDs only the environment tells.
// The screen's size is not known here (zero): the window opens at its
// default size.
func checkDisplay() (screenPixels, error) {
	switch runtime.GOOS {
	case "linux", "freebsd", "netbsd", "openbsd":
		if os.Getenv("DISPLAY") == "" && os.Getenv("WAYLAND_DISPLAY") == "" {
			return screenPixels{}, errNoDisplay
		}
	}
	return screenPixels{}, nil
}
