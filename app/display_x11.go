//go:build (linux || freebsd || netbsd || openbsd) && cgo && !wayland && !headless

package app

/*
#cgo LDFLAGS: -lX11
#include <stdlib.h>
#include <X11/Xlib.h>
*/
import "C"

import (
	"fmt"
	"os"
	"unsafe"
)

// checkDisplay opens and closes the X display the window would use, and
// says how large its screen is in pixels. GLFW opens it the same way but
// panics when it cannot; here the user learns which display failed. (The
// GLFW that Fyne builds links libX11 already.)
func checkDisplay() (screenPixels, error) {
	name := os.Getenv("DISPLAY")
	if name == "" {
		return screenPixels{}, errNoDisplay
	}
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	d := C.XOpenDisplay(cname)
	if d == nil {
		return screenPixels{}, fmt.Errorf("%w %q: no X server answers there, or it refuses this user (check DISPLAY and XAUTHORITY); the commands need no display, see tandem help", errBadDisplay, name)
	}
	defer C.XCloseDisplay(d)
	n := C.XDefaultScreen(d)
	return screenPixels{int(C.XDisplayWidth(d, n)), int(C.XDisplayHeight(d, n))}, nil
}
