package engine

import "testing"

// The demo target with its EAGLE-3 draft on a device of its own generates
// what the target alone on one device does, in the layouts of the seed
// reports and both ways of using the borrowed embedding and head (on two
// GPUs, -engine.gpus=0,1,1 puts the target on GPU 0 and the draft on GPU 1,
// and -engine.gpus=0,1,0 splits the target by layers over GPUs 0-1 with the
// draft on GPU 0: llama.cpp aborts on both, anchors.md); each
// device holds what the plan says, and the draft's share of the target's
// devices is there only when it uses the target's head in place. The
// draft drafts as it does on one device: its acceptance is that of the
// pair on one device, within 20% (a tensor split sums in another order).
func TestPlacedEagle3IsTheTargets(t *testing.T) {
	placedDraftIsTheTargets(t, placedDraft{path: modelPath(t, "factory-eagle3-F16.gguf"),
		drafting: Drafting{Max: 4, Min: 4, PMin: -1}, usageTol: 0.03})
}
