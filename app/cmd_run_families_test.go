package app

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/tandem-run/tandem/kernels/sharedtest"
)

// familyGreedy is the first greedy run of a fixture's transformers oracle
// (engine/model/testdata/<fixture>-oracle.json).
func familyGreedy(t *testing.T, fixture string) (prompt, want []int32) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "engine", "model", "testdata", fixture+"-oracle.json"))
	if err != nil {
		t.Fatal(err)
	}
	var o struct {
		Greedy []struct {
			PromptIDs []int32 `json:"prompt_ids"`
			GreedyIDs []int32 `json:"greedy_ids"`
		} `json:"greedy"`
	}
	if err := json.Unmarshal(raw, &o); err != nil || len(o.Greedy) == 0 {
		t.Fatalf("%s oracle: %v", fixture, err)
	}
	return o.Greedy[0].PromptIDs, o.Greedy[0].GreedyIDs
}

func joinIDs(ids []int32) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = strconv.Itoa(int(id))
	}
	return strings.Join(s, ",")
}

// TestRunPromptIDsFamilies runs the qwen3moe and gemma3 fixtures through
// `tandem run --prompt-ids` (the whole engine: plan, placement, executor)
// and gets transformers' greedy continuation; with the demo draft (same
// vocabulary) or prompt lookup drafting, speculation gives the target's
// tokens exactly (verification batches and rollback through the MoE and
// sliding-window blocks).
func TestRunPromptIDsFamilies(t *testing.T) {
	for _, fixture := range []string{"qwen3moe-tiny-F16", "gemma3-tiny-F16"} {
		t.Run(fixture, func(t *testing.T) {
			prompt, want := familyGreedy(t, fixture)
			args := []string{"run", "--model", filepath.Join("..", "engine", "model", "testdata", fixture+".gguf"),
				"--prompt-ids", joinIDs(prompt), "-n", strconv.Itoa(len(want)), "--ignore-eos", "--greedy", "--json"}
			for _, extra := range [][]string{nil, {"--draft", sharedtest.Path(t, "models", "factory-draft-F16.gguf"), "--draft-max", "4"}, {"--lookup"}} {
				code, out, errOut := run(append(slices.Clone(args), extra...)...)
				var res runResult
				if err := json.Unmarshal([]byte(out), &res); code != 0 || err != nil {
					t.Fatalf("%v: exit %d, %v\n%s%s", extra, code, err, out, errOut)
				}
				if !slices.Equal(res.IDs, want) {
					t.Errorf("%v: ids %v, transformers %v", extra, res.IDs, want)
				}
				if extra != nil && extra[0] == "--draft" && res.Drafted == 0 {
					t.Errorf("%v: nothing drafted", extra)
				}
				t.Logf("%v: drafted %d, accepted %d", extra, res.Drafted, res.Accepted)
			}
		})
	}
}

func TestRunPromptIDsRefusals(t *testing.T) {
	model := filepath.Join("..", "engine", "model", "testdata", "gemma3-tiny-F16.gguf")
	for _, c := range []struct {
		args []string
		code int
		says string
	}{
		{[]string{"--prompt-ids", "1,x"}, 2, "not a token id"},
		{[]string{"--prompt-ids", "1,2", "--prompt", "hi"}, 2, "exactly one"},
		{[]string{"--prompt-ids", "1,99999"}, 1, "99999"},
	} {
		code, _, errOut := run(append([]string{"run", "--model", model, "-n", "2"}, c.args...)...)
		if code != c.code || !strings.Contains(errOut, c.says) {
			t.Errorf("%v: exit %d, %q; want %d saying %q", c.args, code, errOut, c.code, c.says)
		}
	}
}
