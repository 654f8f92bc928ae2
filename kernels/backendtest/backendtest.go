// Package backendtest opens the compute backend a test's flag names, so
// that the same test runs on the CPU here and with the CUDA backend on a
// GPU machine (e.g. -model.backend=cuda).
package backendtest

import (
	"testing"

	"github.com/tandem-run/tandem/kernels"
	"github.com/tandem-run/tandem/kernels/cpu"
	"github.com/tandem-run/tandem/kernels/cuda"
)

// Open opens backend name, "cpu" or "cuda", as flag -flag asked for it,
// and fails tb otherwise. The caller closes it.
func Open(tb testing.TB, flag, name string) kernels.Backend {
	tb.Helper()
	switch name {
	case "cpu":
		return cpu.New(cpu.Options{})
	case "cuda":
		be, err := cuda.Open(cuda.Options{})
		if err != nil {
			tb.Fatal(err)
		}
		return be
	}
	tb.Fatalf("-%s %q: cpu or cuda", flag, name)
	return nil
}
