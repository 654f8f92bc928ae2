package app

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tandem-run/tandem/engine/device"
	"github.com/tandem-run/tandem/engine/gguf"
	"github.com/tandem-run/tandem/engine/plan"
)

// moeFixture is the qwen3moe fixture of issue 22 and the bytes of its
// routed experts and routers, added up from its header.
func moeFixture(t *testing.T) (string, int64) {
	t.Helper()
	path := filepath.Join("..", "engine", "model", "testdata", "qwen3moe-tiny-F16.gguf")
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var n int64
	for _, ti := range f.Tensors {
		if strings.Contains(ti.Name, "_exps.") || strings.Contains(ti.Name, "ffn_gate_inp.") {
			n += ti.Bytes
		}
	}
	if n == 0 {
		t.Fatal("the fixture has no experts")
	}
	return path, n
}

// --cpu-moe on GPUs alone adds the host's memory after them and keeps the
// target on the GPUs; with a CPU in the inventory it uses that one.
func TestHostExperts(t *testing.T) {
	host := func() device.Device {
		return device.Device{Kind: device.CPU, Name: "host memory", Physical: -1, MemoryTotal: 64 << 30}
	}
	gpus, err := device.ReadFile(inventoryFile("2x16GB.json"))
	if err != nil {
		t.Fatal(err)
	}
	var target, draft plan.Placement
	inv := hostExperts(gpus, &target, &draft, true, false, host)
	if len(inv.Devices) != 3 || inv.Devices[2].Kind != device.CPU || inv.Devices[2].Index != 2 || len(gpus.Devices) != 2 {
		t.Fatalf("inventory %+v", inv.Devices)
	}
	if !slices.Equal(target.Devices, []int{0, 1}) || target.Experts != plan.ExpertsOnDevice || target.ExpertDevice != 2 || draft.Experts != plan.ExpertsWithBlocks {
		t.Errorf("target %+v, draft %+v", target, draft)
	}
	virt, err := device.ParseVirtual("cuda0:1GiB,cpu:1GiB,cuda0:1GiB")
	if err != nil {
		t.Fatal(err)
	}
	target, draft = plan.Placement{}, plan.Placement{}
	inv = hostExperts(virt, &target, &draft, false, true, host)
	if len(inv.Devices) != 3 || !slices.Equal(target.Devices, []int{0, 2}) || draft.ExpertDevice != 1 || target.Experts != plan.ExpertsWithBlocks {
		t.Errorf("devices %d, target %+v, draft %+v", len(inv.Devices), target, draft)
	}
	target = plan.Placement{}
	if inv = hostExperts(gpus, &target, &draft, false, false, host); len(inv.Devices) != 2 || target.Devices != nil {
		t.Errorf("without the flags: %d devices, target %+v", len(inv.Devices), target)
	}
}

// tandem plan --cpu-moe shows the experts in system RAM, in the table and
// in the JSON, and the GPU holds none of them.
func TestPlanCPUMoE(t *testing.T) {
	path, experts := moeFixture(t)
	args := []string{"plan", "--model", path, "--virtual-devices", "cuda0:1GiB,cpu:1GiB", "--cpu-moe", "--ctx", "256"}
	var out, errOut bytes.Buffer
	if code := Main(args, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s %s", code, out.String(), errOut.String())
	}
	if s := out.String(); !strings.Contains(s, "EXPERTS") || !strings.Contains(s, "System RAM: 2.3 MiB of experts in CPU 1") {
		t.Errorf("no experts column or RAM line:\n%s", s)
	}
	out.Reset()
	if code := Main(append(args, "--json"), &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	var r plan.Report
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatal(err)
	}
	if len(r.Devices) != 2 || r.Devices[0].Categories.Experts != 0 || r.Devices[1].Categories.Experts != experts {
		t.Errorf("devices %+v; want the %d bytes of experts on device 1 only", r.Devices, experts)
	}
	out.Reset()
	if code := Main([]string{"plan", "--model", path, "--virtual-devices", "cuda0:1GiB,cpu:1GiB", "--ctx", "256"}, &out, &errOut); code != 0 || strings.Contains(out.String(), "EXPERTS") {
		t.Errorf("without --cpu-moe: exit %d, an experts column:\n%s", code, out.String())
	}
}

// The planner's suggestion to keep the experts on the CPU reads as
// --cpu-moe on the command line.
func TestCPUMoEChangeFlags(t *testing.T) {
	cpu := 2
	if got := changeFlags(plan.Change{ExpertsDevice: &cpu}); !slices.Equal(got, []string{"--cpu-moe"}) {
		t.Errorf("flags %v", got)
	}
}
