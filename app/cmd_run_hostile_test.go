package app

import (
	"bytes"
	"regexp"
	"testing"
	"time"

	"github.com/tandem-run/tandem/kernels/sharedtest"
)

var generated8 = regexp.MustCompile(`"generated_tokens":\s*8\b`)

// runWithin runs the command line args and fails t if it has not returned
// within a generous deadline: `run --repeat-penalty 1e-40` once hung.
func runWithin(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	done := make(chan int, 1)
	go func() { done <- Main(args, &out, &errOut) }()
	select {
	case code := <-done:
		return code, out.String(), errOut.String()
	case <-time.After(2 * time.Minute):
		t.Fatalf("%q still running after 2 minutes", args)
		return 0, "", ""
	}
}

// `tandem run --prompt hi -n 8 --temp 1 --repeat-penalty 1e-40` (top-p
// 0.95 by default) looped forever in the sampler. The penalty is clamped:
// the command returns with the output, as do other extreme settings.
func TestRunHostileSampling(t *testing.T) {
	model := sharedtest.Path(t, "models", "factory-target-Q8_0.gguf")
	for _, extra := range [][]string{
		{"--temp", "1", "--repeat-penalty", "1e-40"},
		{"--temp", "1e-300"},
		{"--temp", "1", "--repeat-penalty", "1e300", "--presence-penalty", "-1e300", "--min-p", "1e9"},
	} {
		args := append([]string{"run", "--model", model, "--prompt", "hi", "-n", "8", "--ignore-eos", "--json"}, extra...)
		code, out, errOut := runWithin(t, args...)
		if code != 0 || !generated8.MatchString(out) {
			t.Errorf("%q: exit %d\n%s\n%s", extra, code, out, errOut)
		}
	}
}
