package app

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tandem-run/tandem/kernels/sharedtest"
)

// TestTokenizeMatchesOracle runs a few reference strings through the command
// and compares with ../shared/oracle/tokenizer_oracle.json.
func TestTokenizeMatchesOracle(t *testing.T) {
	b, err := os.ReadFile(sharedtest.Path(t, "oracle", "tokenizer_oracle.json"))
	if err != nil {
		t.Fatal(err)
	}
	var o struct {
		Strings    []string             `json:"strings"`
		Tokenizers map[string][][]int32 `json:"tokenizers"`
	}
	if err := json.Unmarshal(b, &o); err != nil {
		t.Fatal(err)
	}
	model := sharedtest.Path(t, "testdata", "vocab", "vocab-qwen3.gguf")
	for _, i := range []int{6, 20, 28, 29} { // prose, emoji, chat markup, code
		var out, errOut bytes.Buffer
		if code := Main([]string{"tokenize", "--model", model, "--text", o.Strings[i]}, &out, &errOut); code != 0 {
			t.Fatalf("string %d: exit %d: %s", i, code, errOut.String())
		}
		var ids []int32
		if err := json.Unmarshal(out.Bytes(), &ids); err != nil {
			t.Fatalf("string %d: output %q: %v", i, out.String(), err)
		}
		if want := o.Tokenizers["qwen3"][i]; !slices.Equal(ids, want) {
			t.Errorf("string %d %q: %v, want %v", i, o.Strings[i], ids, want)
		}
	}

	// From a file, with --json: the pieces spell the text back.
	path := filepath.Join(t.TempDir(), "in.txt")
	text := o.Strings[29]
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	if code := Main([]string{"tokenize", "--json", "--model", model, "--file", path}, &out, &errOut); code != 0 {
		t.Fatalf("--file: exit %d: %s", code, errOut.String())
	}
	var res struct {
		IDs    []int32  `json:"ids"`
		Pieces []string `json:"pieces"`
	}
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.IDs, o.Tokenizers["qwen3"][29]) || strings.Join(res.Pieces, "") != text {
		t.Errorf("--json: %+v", res)
	}
}

func TestTokenizeSpecialFlags(t *testing.T) {
	model := sharedtest.Path(t, "testdata", "vocab", "vocab-llama3.gguf")
	run := func(args ...string) []int32 {
		t.Helper()
		var out, errOut bytes.Buffer
		if code := Main(append([]string{"tokenize", "--model", model}, args...), &out, &errOut); code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, errOut.String())
		}
		var ids []int32
		if err := json.Unmarshal(out.Bytes(), &ids); err != nil {
			t.Fatal(err)
		}
		return ids
	}
	const eot = 128009 // <|eot_id|>
	if ids := run("--text", "<|eot_id|>"); !slices.Equal(ids, []int32{eot}) {
		t.Errorf("parsed: %v", ids)
	}
	if ids := run("--text", "<|eot_id|>", "--no-parse-special"); len(ids) < 2 || slices.Contains(ids, eot) {
		t.Errorf("--no-parse-special: %v", ids)
	}
	if ids := run("--text", "Hi", "--add-special"); len(ids) != 2 || ids[0] != 128000 {
		t.Errorf("--add-special: %v, want BOS 128000 first", ids)
	}
}

func TestTokenizeBadInput(t *testing.T) {
	model := sharedtest.Path(t, "testdata", "vocab", "vocab-qwen3.gguf")
	for _, c := range []struct {
		args []string
		code int
	}{
		{[]string{"tokenize", "--model", model}, 2},                               // no text
		{[]string{"tokenize", "--model", model, "--text", "a", "--file", "b"}, 2}, // both
		{[]string{"tokenize", "--text", "a"}, 2},                                  // no model
		{[]string{"tokenize", "--model", "/nonexistent.gguf", "--text", "a"}, 1},  // missing model
		{[]string{"tokenize", "--model", model, "--file", "/nonexistent.txt"}, 1}, // missing file
		{[]string{"tokenize", "--model", os.Args[0], "--text", "a"}, 1},           // not a GGUF
	} {
		var out, errOut bytes.Buffer
		if code := Main(c.args, &out, &errOut); code != c.code {
			t.Errorf("%v: exit %d, want %d (%s)", c.args, code, c.code, errOut.String())
		}
	}
}
