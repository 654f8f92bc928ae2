package chat

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ardanlabs/jinja"
)

// The guards change no template's output: the real templates and captured
// requests the engine's own repository tests with (read from the module
// cache) render byte for byte as the unguarded engine renders them, errors
// included.
func TestGuardsChangeNoOutput(t *testing.T) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/ardanlabs/jinja").Output()
	dir := strings.TrimSpace(string(out))
	if err != nil || dir == "" {
		t.Skipf("the template engine's module is not in the module cache: %v", err)
	}
	templates, _ := filepath.Glob(filepath.Join(dir, "testdata", "templates", "*.jinja"))
	requests, _ := filepath.Glob(filepath.Join(dir, "testdata", "requests", "*.json"))
	if len(templates) == 0 || len(requests) == 0 {
		t.Skipf("no templates or requests under %s/testdata", dir)
	}
	var reqs []map[string]any
	for _, p := range requests {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.UseNumber()
		var r map[string]any
		if err := dec.Decode(&r); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		reqs = append(reqs, r)
	}
	rendered := 0
	for _, p := range templates {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		plain, err := jinja.Compile(string(b))
		if err != nil {
			continue
		}
		guarded, err := compile(string(b))
		if err != nil {
			t.Errorf("%s: %v", filepath.Base(p), err)
			continue
		}
		for i, r := range reqs {
			data := map[string]any{
				"messages": r["messages"], "tools": r["tools"], "add_generation_prompt": true,
				"bos_token": "<s>", "eos_token": "</s>", "enable_thinking": false,
			}
			vars := map[string]jinja.Value{}
			for k, v := range data {
				vars[k] = jinja.FromGoValue(v)
			}
			want, wantErr := plain.RenderValues(vars)
			newSandbox(context.Background(), DefaultLimits(), nil, nil).vars(vars)
			got, gotErr := guarded.RenderValues(vars)
			if got != want || (gotErr == nil) != (wantErr == nil) {
				t.Errorf("%s, %s: guarded %q (%v)\nplain %q (%v)", filepath.Base(p), filepath.Base(requests[i]), got, gotErr, want, wantErr)
			}
			rendered++
		}
	}
	t.Logf("%d renders of %d templates compared", rendered, len(templates))
}
