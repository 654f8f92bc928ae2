package app

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tandem-run/tandem/kernels/sharedtest"
)

// TestChatTemplateMatchesOracle renders every case of
// ../shared/oracle/chat-templates.json through the command.
func TestChatTemplateMatchesOracle(t *testing.T) {
	b, err := os.ReadFile(sharedtest.Path(t, "oracle", "chat-templates.json"))
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Templates map[string][]struct {
			Input  json.RawMessage `json:"input"`
			Output string          `json:"output"`
		} `json:"templates"`
	}
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for name, cases := range f.Templates {
		model := sharedtest.Path(t, "testdata", "vocab", "vocab-"+name+".gguf")
		for i, c := range cases {
			path := filepath.Join(dir, "messages.json")
			if err := os.WriteFile(path, c.Input, 0o644); err != nil {
				t.Fatal(err)
			}
			var out, errOut bytes.Buffer
			if code := Main([]string{"chat-template", "--model", model, "--messages", path}, &out, &errOut); code != 0 {
				t.Fatalf("%s case %d: exit %d: %s", name, i, code, errOut.String())
			}
			if out.String() != c.Output {
				t.Errorf("%s case %d:\n got %q\nwant %q", name, i, out.String(), c.Output)
			}
		}
	}
}

func TestChatTemplateFallbackIsOffered(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "m.json")
	if err := os.WriteFile(path, []byte(`[{"role": "user", "content": "Hi"}]`), 0o644); err != nil {
		t.Fatal(err)
	}
	noTemplate := sharedtest.Path(t, "testdata", "vocab", "ggml-vocab-gpt-2.gguf")
	var out, errOut bytes.Buffer
	if code := Main([]string{"chat-template", "--model", noTemplate, "--messages", path}, &out, &errOut); code != 1 ||
		out.Len() != 0 || !strings.Contains(errOut.String(), "--chatml") {
		t.Errorf("no template: exit %d, out %q, err %q; want exit 1 offering --chatml", code, out.String(), errOut.String())
	}
	out.Reset()
	if code := Main([]string{"chat-template", "--chatml", "--messages", path}, &out, &errOut); code != 0 ||
		out.String() != "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n" {
		t.Errorf("--chatml: exit %d, %q", code, out.String())
	}
	for _, args := range [][]string{
		{"chat-template", "--model", noTemplate},
		{"chat-template", "--messages", path, "--model", noTemplate, "--thinking", "maybe"},
	} {
		if code := Main(args, &out, &errOut); code != 2 {
			t.Errorf("%v: exit %d, want 2", args, code)
		}
	}
	if err := os.WriteFile(path, []byte(`{"nope": 1}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if code := Main([]string{"chat-template", "--chatml", "--messages", path}, &out, &errOut); code != 1 {
		t.Errorf("no messages: exit %d, want 1", code)
	}
}
