package app

import (
	"bytes"
	"encoding/json"
	"io"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tandem-run/tandem/engine/plan"
	"github.com/tandem-run/tandem/engine/plan/plantest"
	"github.com/tandem-run/tandem/kernels/quant"
	"github.com/tandem-run/tandem/kernels/sharedtest"
)

func inventoryFile(name string) string {
	return filepath.Join("..", "engine", "device", "testdata", name)
}

// writeHeader writes a header-only model (its weights are a sparse hole).
func writeHeader(t testing.TB, m plantest.Model) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "model.gguf")
	if err := m.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestPlanExitStatus(t *testing.T) {
	q4 := writeHeader(t, plantest.Qwen3_8B(quant.Q4_K))
	big := writeHeader(t, plantest.Blocks100())
	for _, tc := range []struct {
		name string
		args []string
		code int
		out  string // in stdout, or stderr for failures
	}{
		{"fits", []string{"--model", q4, "--devices-file", inventoryFile("2x16GB.json")}, 0, "The plan fits."},
		{"fits tensor", []string{"--model", q4, "--devices-file", inventoryFile("2x16GB.json"), "--split", "tensor", "--head", "replicated"}, 0, "head replicated"},
		{"does not fit", []string{"--model", big, "--devices-file", inventoryFile("1x24GB.json")}, 3, "The plan does not fit."},
		{"no model", []string{"--devices-file", inventoryFile("1x24GB.json")}, 2, "Usage"},
		{"bad split", []string{"--model", q4, "--split", "rows", "--devices-file", inventoryFile("1x24GB.json")}, 2, "--split"},
		{"bad kv type", []string{"--model", q4, "--kv-type", "q4_k", "--devices-file", inventoryFile("1x24GB.json")}, 2, "--kv-type"},
		{"quantized kv on a GPU", []string{"--model", q4, "--kv-type", "q4_0", "--kv-type-v", "q8_0", "--devices-file", inventoryFile("1x24GB.json")}, 0, "KV cache K q4_0, V q8_0"},
		{"quantized kv on the CPU", []string{"--model", q4, "--kv-type", "q8_0", "--kv-type-v", "q4_0", "--virtual-devices", "cpu:64GiB"}, 0, "KV cache K q8_0, V q4_0"},
		{"bad device list", []string{"--model", q4, "--target-devices", "0,x", "--devices-file", inventoryFile("1x24GB.json")}, 2, "--target-devices"},
		{"unknown device", []string{"--model", q4, "--target-devices", "0,5", "--devices-file", inventoryFile("1x24GB.json")}, 1, "device 5 is not in the inventory"},
		{"missing model", []string{"--model", "/nonexistent.gguf", "--devices-file", inventoryFile("1x24GB.json")}, 1, "nonexistent"},
		{"missing inventory", []string{"--model", q4, "--devices-file", "/nonexistent.json"}, 1, "nonexistent"},
		{"bad virtual", []string{"--model", q4, "--virtual-devices", "gpu:1GiB"}, 1, "virtual device"},
	} {
		var out, errOut bytes.Buffer
		code := Main(append([]string{"plan"}, tc.args...), &out, &errOut)
		text := out.String()
		if code != 0 && code != 3 {
			text = errOut.String()
		}
		if code != tc.code || !strings.Contains(text, tc.out) {
			t.Errorf("%s: exit %d, want %d with %q in:\n%s\n%s", tc.name, code, tc.code, tc.out, out.String(), errOut.String())
		}
	}
}

// The JSON is the issue's, every number in bytes: these keys, plus the
// comparisons of head modes and of borrowing where they apply.
func TestPlanJSON(t *testing.T) {
	q4 := writeHeader(t, plantest.Qwen3_8B(quant.F16))
	var out, errOut bytes.Buffer
	code := Main([]string{"plan", "--model", q4, "--devices-file", inventoryFile("2x12GB.json"), "--ctx", "65536", "--json"}, &out, &errOut)
	if code != 3 {
		t.Fatalf("exit %d, want 3 (16 GB of weights and 9 GB of KV on two 12 GB cards): %s", code, errOut.String())
	}
	var r map[string]json.RawMessage
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatal(err)
	}
	if got := slices.Sorted(maps.Keys(r)); !slices.Equal(got, []string{"devices", "fits", "head_modes", "suggestions"}) {
		t.Errorf("top-level keys %v", got)
	}
	var devs []map[string]json.RawMessage
	if err := json.Unmarshal(r["devices"], &devs); err != nil || len(devs) != 2 {
		t.Fatalf("devices: %v, %d", err, len(devs))
	}
	for _, d := range devs {
		if got := slices.Sorted(maps.Keys(d)); !slices.Equal(got, []string{"capacity_bytes", "categories", "fits", "index", "name", "role", "total_bytes"}) {
			t.Errorf("device keys %v", got)
		}
		var cats map[string]int64
		var total int64
		json.Unmarshal(d["categories"], &cats)
		json.Unmarshal(d["total_bytes"], &total)
		if got := slices.Sorted(maps.Keys(cats)); !slices.Equal(got, []string{"draft", "embedding", "head", "kv", "overhead", "scratch", "weights"}) {
			t.Errorf("category keys %v", got)
		}
		var sum int64
		for _, v := range cats {
			sum += v
		}
		if sum != total || cats["kv"] != 36*8*128*2*2*65536/2 {
			t.Errorf("categories %v add up to %d, total %d; KV want half of 36 blocks x 8 heads x 128 x K,V x f16 x 65536", cats, sum, total)
		}
	}
	var sugg []struct {
		Text   string          `json:"text"`
		Change json.RawMessage `json:"change"`
	}
	if err := json.Unmarshal(r["suggestions"], &sugg); err != nil || len(sugg) == 0 {
		t.Fatalf("suggestions: %v, %d", err, len(sugg))
	}
	// Each suggestion, given back as flags, fits.
	for _, s := range sugg {
		args := []string{"plan", "--model", q4, "--devices-file", inventoryFile("2x12GB.json"), "--ctx", "65536", "--json"}
		var c struct {
			Ratios       []float64 `json:"ratios"`
			KV           string    `json:"kv_type"`
			Ctx          int       `json:"ctx"`
			Head         string    `json:"head"`
			DraftDevices []int     `json:"draft_devices"`
		}
		if err := json.Unmarshal(s.Change, &c); err != nil {
			t.Fatal(err)
		}
		change := plan.Change{Ratios: c.Ratios, Ctx: c.Ctx, Head: plan.HeadMode(c.Head), DraftDevices: c.DraftDevices}
		if c.KV != "" {
			kv, err := plan.ParseKVTypes(c.KV, "")
			if err != nil {
				t.Fatalf("suggestion %q: %v", s.Text, err)
			}
			change.KV = &kv
		}
		for _, f := range changeFlags(change) {
			args = append(args, strings.Fields(f)...)
		}
		if code := Main(args, io.Discard, io.Discard); code != 0 {
			t.Errorf("suggestion %q: %v exits %d", s.Text, args, code)
		}
	}
}

// The demo pair with its EAGLE-3 draft: both ways to use the borrowed head
// are shown with their costs.
func TestPlanHeadSharingDraft(t *testing.T) {
	dir := sharedtest.Dir(t)
	target := filepath.Join(dir, "models", "factory-target-Q4_K_M.gguf")
	draft := filepath.Join(dir, "models", "factory-eagle3-F16.gguf")
	var out, errOut bytes.Buffer
	code := Main([]string{"plan", "--model", target, "--draft", draft, "--virtual-devices", "cpu:1GiB,cpu:1GiB,cpu:1GiB",
		"--target-devices", "1,2", "--draft-devices", "0", "--ctx", "2048"}, &out, &errOut)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	for _, want := range []string{"--borrow target", "--borrow copy", "CPU 0", "draft", "both"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("no %q in:\n%s", want, out.String())
		}
	}
	out.Reset()
	Main([]string{"plan", "--model", target, "--draft", draft, "--virtual-devices", "cpu:1GiB,cpu:1GiB",
		"--split", "tensor", "--draft-devices", "0", "--borrow", "copy", "--json"}, &out, &errOut)
	var r struct {
		Borrow struct {
			Chosen  string `json:"chosen"`
			Options []struct {
				Mode       string           `json:"mode"`
				DraftBytes map[string]int64 `json:"draft_bytes"`
			} `json:"options"`
		} `json:"borrow"`
	}
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatal(err)
	}
	if r.Borrow.Chosen != "copy" || len(r.Borrow.Options) != 2 || len(r.Borrow.Options[0].DraftBytes) != 2 || len(r.Borrow.Options[1].DraftBytes) != 1 {
		t.Errorf("borrow report %+v: want in place on both devices, copy on device 0 only", r.Borrow)
	}
}

// `tandem plan` on a 100-block header: the whole command, reading the
// header, planning and printing (the weights are a sparse hole, never read).
func BenchmarkPlanCommand100Blocks(b *testing.B) {
	model := writeHeader(b, plantest.Blocks100())
	args := []string{"plan", "--model", model, "--devices-file", inventoryFile("11x24GB.json"), "--target-devices", "3,4,5,6,7,8,9,10", "--ctx", "32768"}
	for b.Loop() {
		if code := Main(args, io.Discard, io.Discard); code != 0 {
			b.Fatalf("exit %d", code)
		}
	}
}
