package app

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tandem-run/tandem/engine/gguf"
	"github.com/tandem-run/tandem/kernels/sharedtest"
)

func TestInfoEveryModel(t *testing.T) {
	dir := sharedtest.Dir(t)
	models, _ := filepath.Glob(filepath.Join(dir, "models", "*.gguf"))
	vocabs, _ := filepath.Glob(filepath.Join(dir, "testdata", "vocab", "*.gguf"))
	for _, p := range append(models, vocabs...) {
		var out, errOut bytes.Buffer
		if code := Main([]string{"info", p, "--json"}, &out, &errOut); code != 0 {
			t.Errorf("%s: exit %d: %s", p, code, errOut.String())
			continue
		}
		var d gguf.Description
		if err := json.Unmarshal(out.Bytes(), &d); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		if d.VocabSize == 0 || d.Tokenizer == "" || d.FileBytes == 0 {
			t.Errorf("%s: incomplete description %+v", p, d)
		}
		var sum int64
		for _, tb := range d.TypeBytes {
			sum += tb.Bytes
		}
		if sum > d.FileBytes {
			t.Errorf("%s: tensor bytes %d exceed the file size %d", p, sum, d.FileBytes)
		}
		out.Reset()
		if code := Main([]string{"info", p}, &out, &errOut); code != 0 || !strings.Contains(out.String(), d.Architecture) {
			t.Errorf("%s: text output %q", p, out.String())
		}
	}
	// The demo target, as its README describes it.
	var out bytes.Buffer
	Main([]string{"info", "--json", filepath.Join(dir, "models", "factory-target-Q4_K_M.gguf")}, &out, &out)
	var d gguf.Description
	if err := json.Unmarshal(out.Bytes(), &d); err != nil {
		t.Fatal(err)
	}
	if d.Architecture != "qwen3" || d.Layers != 8 || d.EmbeddingWidth != 384 || d.Heads != 6 || d.KVHeads != 2 || d.VocabSize != 8192 || d.TiedHead || !d.ChatTemplate {
		t.Errorf("demo target described as %+v", d)
	}
}

func TestInfoBadInput(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := Main([]string{"info", "/nonexistent.gguf"}, &out, &errOut); code != 1 || !strings.Contains(errOut.String(), "nonexistent") {
		t.Errorf("missing file: exit %d, %q", code, errOut.String())
	}
	if code := Main([]string{"info"}, &out, &errOut); code != 2 {
		t.Errorf("no file: exit %d", code)
	}
	if code := Main([]string{"info", "--bogus"}, &out, &errOut); code != 2 {
		t.Errorf("bad flag: exit %d", code)
	}
	if code := Main([]string{"nosuchcommand"}, &out, &errOut); code != 2 {
		t.Errorf("unknown command: exit %d", code)
	}
}
