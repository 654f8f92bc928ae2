package app

import (
	"flag"

	"github.com/tandem-run/tandem/engine"
	"github.com/tandem-run/tandem/engine/device"
	"github.com/tandem-run/tandem/engine/plan"
)

// placementFlags are the planner's placement flags (tandem plan's) on the
// commands that load models: given any, the models spread over devices as
// the plan lays them out.
type placementFlags struct {
	virtual, targetDevs, draftDevs, split, ratios, head string
	cpuMoE, cpuMoEDraft                                 bool
}

func (p *placementFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&p.virtual, "virtual-devices", "", "run on virtual devices, e.g. `cpu:8GiB,cpu:8GiB` or cuda0:12GiB,cuda0:12GiB")
	fs.StringVar(&p.targetDevs, "target-devices", "", "target's device `indices`, in order (default: all)")
	fs.StringVar(&p.draftDevs, "draft-devices", "", "draft's device `indices` (default: the target's last)")
	fs.StringVar(&p.split, "split", string(plan.SplitLayer), "how the target spreads over its devices: `layer` or tensor")
	fs.StringVar(&p.ratios, "ratios", "", "weights of the target's devices, e.g. `3,1` (default: by free memory)")
	fs.StringVar(&p.head, "head", "", "target's output head: `single`, replicated or split")
	registerCPUMoE(fs, &p.cpuMoE, &p.cpuMoEDraft)
}

// registerCPUMoE adds llama.cpp's --cpu-moe and --cpu-moe-draft.
func registerCPUMoE(fs *flag.FlagSet, target, draft *bool) {
	fs.BoolVar(target, "cpu-moe", false, "keep the target's routed experts (and their routers) in system RAM, the rest on the GPUs (llama.cpp's --cpu-moe)")
	fs.BoolVar(draft, "cpu-moe-draft", false, "the same for a mixture-of-experts draft")
}

// placement is nil when no device flag was given (one device, --backend).
func (p *placementFlags) placement() (*engine.Placement, error) {
	if p.virtual == "" && p.targetDevs == "" && p.draftDevs == "" && !p.cpuMoE && !p.cpuMoEDraft {
		return nil, nil
	}
	inv, err := loadInventory("", p.virtual)
	if err != nil {
		return nil, err
	}
	target, err := parsePlacement(p.targetDevs, p.split, p.ratios, p.head, inv)
	if err != nil {
		return nil, err
	}
	draft, err := parseDraftPlacement(p.draftDevs, string(plan.BorrowInPlace))
	if err != nil {
		return nil, err
	}
	inv = hostExperts(inv, &target, &draft, p.cpuMoE, p.cpuMoEDraft, device.Host)
	return &engine.Placement{Devices: inv.Devices, Target: target, Draft: draft}, nil
}
