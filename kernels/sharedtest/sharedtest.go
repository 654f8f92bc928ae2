// Package sharedtest finds the project's shared reference data (the demo
// models, the oracle outputs and the tokenizer vectors), which live in
// ../shared beside the repository, for tests in any package.
package sharedtest

import (
	"os"
	"path/filepath"
	"testing"
)

// Dir returns the absolute path of ../shared relative to the repository root
// (the directory holding go.mod). The test is skipped, with a reason, when
// there is none: a checkout without the reference data cannot check against it.
func Dir(tb testing.TB) string {
	tb.Helper()
	dir, err := os.Getwd()
	if err != nil {
		tb.Fatalf("sharedtest: %v", err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			break
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			tb.Skip("sharedtest: no go.mod above the working directory")
		}
		dir = parent
	}
	shared := filepath.Join(filepath.Dir(dir), "shared")
	if _, err := os.Stat(filepath.Join(shared, "oracle")); err != nil {
		tb.Skipf("sharedtest: reference data not found at %s", shared)
	}
	return shared
}

// Path joins elements onto Dir: Path(t, "models", "factory-target-F16.gguf").
func Path(tb testing.TB, elem ...string) string {
	tb.Helper()
	return filepath.Join(append([]string{Dir(tb)}, elem...)...)
}
