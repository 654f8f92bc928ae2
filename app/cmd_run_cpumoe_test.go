package app

import (
	"encoding/json"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	"github.com/tandem-run/tandem/kernels/sharedtest"
)

// TestRunCPUMoE runs the qwen3moe fixture with its experts on CPU virtual
// device 1 and the rest on device 0 (--cpu-moe), through the whole engine:
// alone, with the demo draft, and with the fixture itself as a draft whose
// experts are apart too (--cpu-moe-draft), greedy gives transformers'
// continuation, as the target alone on one device does.
func TestRunCPUMoE(t *testing.T) {
	prompt, want := familyGreedy(t, "qwen3moe-tiny-F16")
	model := filepath.Join("..", "engine", "model", "testdata", "qwen3moe-tiny-F16.gguf")
	args := []string{"run", "--model", model, "--prompt-ids", joinIDs(prompt), "-n", strconv.Itoa(len(want)),
		"--ignore-eos", "--greedy", "--json", "--virtual-devices", "cpu:1GiB,cpu:1GiB", "--cpu-moe"}
	for _, extra := range [][]string{
		nil,
		{"--draft", sharedtest.Path(t, "models", "factory-draft-F16.gguf"), "--draft-max", "4"},
		{"--draft", model, "--cpu-moe-draft", "--draft-max", "3"},
	} {
		code, out, errOut := run(append(slices.Clone(args), extra...)...)
		var res runResult
		if err := json.Unmarshal([]byte(out), &res); code != 0 || err != nil {
			t.Fatalf("%v: exit %d, %v\n%s%s", extra, code, err, out, errOut)
		}
		if !slices.Equal(res.IDs, want) {
			t.Errorf("%v: ids %v, transformers %v", extra, res.IDs, want)
		}
		if extra != nil && res.Drafted == 0 {
			t.Errorf("%v: nothing drafted", extra)
		}
		t.Logf("%v: drafted %d, accepted %d", extra, res.Drafted, res.Accepted)
	}
}
