package app

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"testing"

	"github.com/tandem-run/tandem/kernels/sharedtest"
)

// TestPerplexityCommand scores the held-out text with the F16 draft from
// the command line, tokenizer included: within 1% of llama.cpp's value.
func TestPerplexityCommand(t *testing.T) {
	var golden struct {
		PPL map[string]float64 `json:"ppl"`
	}
	data, err := os.ReadFile(sharedtest.Path(t, "oracle", "perplexity-llamacpp.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &golden); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	code := Main([]string{"perplexity", "--model", sharedtest.Path(t, "models", "factory-draft-F16.gguf"),
		"--file", sharedtest.Path(t, "oracle", "heldout.txt"), "--ctx", "256", "--json"}, &out, &errOut)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	var got struct {
		PPL     float64 `json:"ppl"`
		Scored  int     `json:"scored_tokens"`
		Windows int     `json:"windows"`
	}
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	want := golden.PPL["factory-draft-F16"]
	if math.Abs(got.PPL/want-1) > 0.01 || got.Scored != got.Windows*127 {
		t.Errorf("ppl %.4f over %d tokens in %d windows, llama.cpp %.4f", got.PPL, got.Scored, got.Windows, want)
	}
}

func TestBenchCommand(t *testing.T) {
	var out, errOut bytes.Buffer
	code := Main([]string{"bench", "--model", sharedtest.Path(t, "models", "factory-draft-Q8_0.gguf"),
		"-p", "16", "-n", "8", "-r", "1", "--json"}, &out, &errOut)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	var got struct {
		Prefill float64          `json:"prefill_tok_s"`
		Decode  float64          `json:"decode_tok_s"`
		Memory  map[string]int64 `json:"memory_bytes"`
	}
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if got.Prefill <= 0 || got.Decode <= 0 || got.Memory["kv"] <= 0 || got.Memory["weights"] <= 0 {
		t.Errorf("bench report %s", out.String())
	}
}

func TestBenchAndPerplexityUsage(t *testing.T) {
	for _, args := range [][]string{
		{"bench", "-p", "0", "-n", "0"},
		{"bench", "--model", "m.gguf", "-r", "0"},
		{"perplexity", "--model", "m.gguf"},
	} {
		var out, errOut bytes.Buffer
		if code := Main(args, &out, &errOut); code != 2 {
			t.Errorf("%v: exit %d, want 2 (usage)", args, code)
		}
	}
	for _, args := range [][]string{
		{"bench", "--model", "/nonexistent.gguf"},
		{"perplexity", "--model", "/nonexistent.gguf", "--file", "/nonexistent.txt"},
		{"bench", "--model", sharedtest.Path(t, "models", "factory-draft-Q8_0.gguf"), "--kv-type", "q4"},
	} {
		var out, errOut bytes.Buffer
		if code := Main(args, &out, &errOut); code != 1 || errOut.Len() == 0 {
			t.Errorf("%v: exit %d, %q", args, code, errOut.String())
		}
	}
}
