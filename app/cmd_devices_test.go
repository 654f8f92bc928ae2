package app

import (
	"bytes"
	"strings"
	"testing"

	"github.com/tandem-run/tandem/engine/device"
)

// Whatever this machine has (often no GPU at all), `tandem devices` says so
// and exits 0; --json prints an inventory that --devices-file reads back.
func TestDevicesCommand(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := Main([]string{"devices", "--json"}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	inv, err := device.Read(&out)
	if err != nil {
		t.Fatalf("output does not read back: %v", err)
	}
	out.Reset()
	if code := Main([]string{"devices"}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	if len(inv.Devices) == 0 && !strings.HasPrefix(out.String(), "no GPUs: ") {
		t.Errorf("no devices, but the text says %q", out.String())
	}
	for _, d := range inv.Devices {
		if !strings.Contains(out.String(), d.Name) {
			t.Errorf("%s missing from %q", d.Name, out.String())
		}
	}
	if code := Main([]string{"devices", "extra"}, &out, &errOut); code != 2 {
		t.Errorf("an argument: exit %d, want 2", code)
	}
}
