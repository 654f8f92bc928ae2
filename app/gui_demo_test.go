//go:build !headless

package app

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/tandem-run/tandem/engine/device"
	"github.com/tandem-run/tandem/kernels/sharedtest"
)

// cpuOnly is a machine without GPUs: NVML found no driver, and the CPU
// has 1 GiB free.
func cpuOnly() device.Inventory {
	inv := device.Inventory{Reason: "no NVIDIA driver: libnvidia-ml.so.1 was not found"}
	return withCPU(inv, strings.NewReader("MemTotal: 2097152 kB\nMemAvailable: 1048576 kB\n"))
}

// llamaCppGreedy is llama.cpp's greedy answer of model to the oracle's
// prompt i (../shared/oracle/greedy-llamacpp.json), without its end token.
func llamaCppGreedy(t *testing.T, model string, i int) (prompt, answer string) {
	t.Helper()
	b, err := os.ReadFile(sharedtest.Path(t, "oracle", "greedy-llamacpp.json"))
	if err != nil {
		t.Fatal(err)
	}
	var o struct {
		Prompts []string            `json:"prompts"`
		Outputs map[string][]string `json:"outputs"`
	}
	if err := json.Unmarshal(b, &o); err != nil {
		t.Fatal(err)
	}
	return o.Prompts[i], strings.TrimSuffix(o.Outputs[model][i], "<|im_end|>")
}

// A first start on a machine without GPUs shows the demo at its best: the
// demo pair loads on the CPU with the real engine, and the suggested
// "Quote Genesis 1:3." answers, greedy and with no system prompt, what
// llama.cpp answers the same ChatML prompt (a verse of Genesis 1 in the
// King James text). With the old default system prompt the answer was
// "Duke Kenaz, duke Teman, duke Mibzar," (Genesis 36). Issue 26, item 1.
func TestDemoFirstStartAnswersLikeLlamaCpp(t *testing.T) {
	prompt, want := llamaCppGreedy(t, "factory-target-Q4_K_M", 0)
	if prompt != "<|im_start|>user\nQuote Genesis 1:3.<|im_end|>\n<|im_start|>assistant\n" {
		t.Fatalf("the oracle's first prompt is now %q", prompt)
	}
	h := newHarnessOn(t, cpuOnly(), nil, engineLoad)
	m := h.m
	m.openModels()
	h.settle()
	m.startLoad()
	h.waitFor("the demo pair to load", func() bool { return m.cancelLoad == nil })
	if m.model == nil {
		t.Fatalf("not loaded: %q %q", m.status.Text, m.errNotice.Text())
	}
	c := m.chat
	var suggested []string
	for _, b := range buttonsIn(c.view) {
		suggested = append(suggested, b.Text)
	}
	if !strings.Contains(strings.Join(suggested, "|"), "Quote Genesis 1:3.") {
		t.Fatalf("the empty chat suggests %q", suggested)
	}
	tapButton(t, c.view, "Quote Genesis 1:3.") // the suggestion sends it
	h.waitFor("the answer", func() bool { return c.cancel == nil && len(c.conv.Messages) == 2 })
	if got := lastMessage(c).Content; got != want {
		t.Errorf("the demo answered %q\nllama.cpp answers %q", got, want)
	}
	if c.conv.System != "" {
		t.Errorf("system prompt %q on a first start", c.conv.System)
	}
}

// A machine without GPUs says so, with what to install, and keeps saying
// it once the demo pair is chosen and planned ("Ready to load." replaced
// it at once before). Issue 26, item 8.
func TestNoGPUNoteStays(t *testing.T) {
	h := newHarnessOn(t, cpuOnly(), nil, nil)
	h.m.openModels()
	h.settle()
	note := h.m.notice.Text()
	for _, want := range []string{"No GPUs listed", "libnvidia-ml.so.1 was not found", "install", "CPU"} {
		if !strings.Contains(note, want) {
			t.Errorf("notes %q lack %q", note, want)
		}
	}
	if h.m.status.Text != "Ready to load." {
		t.Errorf("status %q", h.m.status.Text)
	}
}
