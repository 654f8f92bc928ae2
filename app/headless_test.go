//go:build headless

package app

import (
	"bytes"
	"strings"
	"testing"
)

// The headless build answers the window, with no command or as `tandem
// gui`, by saying it has none, and lists the commands it has.
func TestHeadlessHasNoWindow(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := Main(nil, &out, &errOut); code != 2 || !strings.Contains(errOut.String(), "headless build") || !strings.Contains(errOut.String(), "serve") {
		t.Errorf("tandem: exit %d, stderr %q", code, errOut.String())
	}
	errOut.Reset()
	if code := Main([]string{"gui"}, &out, &errOut); code != 1 || !strings.Contains(errOut.String(), "it has no window") {
		t.Errorf("tandem gui: exit %d, stderr %q", code, errOut.String())
	}
	out.Reset()
	if code := Main([]string{"help"}, &out, &errOut); code != 0 || !strings.Contains(out.String(), "not in this headless build") {
		t.Errorf("tandem help: exit %d, stdout %q", code, out.String())
	}
}

// `tandem devices` works without cgo: it lists the GPUs through the CUDA
// driver API, or says in one line why there are none.
func TestHeadlessDevices(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := Main([]string{"devices"}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	if s := out.String(); !strings.Contains(s, "CUDA driver API") && !strings.HasPrefix(s, "no GPUs: ") {
		t.Errorf("devices printed %q", s)
	}
}
