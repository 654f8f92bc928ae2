//go:build !headless

package app

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestMain lets the test binary stand in for tandem itself: with
// TANDEM_TEST_AS_TANDEM set it runs Main on the main goroutine, as the
// real binary does (GLFW needs it), and exits.
func TestMain(m *testing.M) {
	if os.Getenv("TANDEM_TEST_AS_TANDEM") != "" {
		os.Exit(Main(nil, os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// asTandem runs this test binary as `tandem` (no arguments: the window)
// with env added, and returns its output and exit status.
func asTandem(t *testing.T, env ...string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	home := t.TempDir()
	cmd.Env = append(os.Environ(), "TANDEM_TEST_AS_TANDEM=1", "HOME="+home, "XDG_CONFIG_HOME="+home, "XDG_CACHE_HOME="+home)
	cmd.Env = append(cmd.Env, env...)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return string(out), 0
	case errors.As(err, &exit):
		return string(out), exit.ExitCode()
	}
	t.Fatalf("%v\n%s", err, out)
	return "", 0
}

// TestUnusableDisplay: where no window can be opened, tandem says which
// display failed and exits 1, rather than GLFW panicking.
func TestUnusableDisplay(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("X11 displays")
	}
	if _, err := os.Stat("/tmp/.X11-unix/X77"); err == nil {
		t.Skip("display :77 exists here")
	}
	for _, tc := range []struct {
		display, says string
	}{
		{":77", `cannot open the display ":77"`},
		{"", "DISPLAY is not set"},
	} {
		out, code := asTandem(t, "DISPLAY="+tc.display, "WAYLAND_DISPLAY=")
		if code != 1 || !strings.Contains(out, tc.says) || strings.Contains(out, "panic") {
			t.Errorf("DISPLAY=%q: exit %d, output:\n%s", tc.display, code, out)
		}
	}
}
