package plan

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/tandem-run/tandem/engine/device"
	"github.com/tandem-run/tandem/engine/gguf"
	"github.com/tandem-run/tandem/kernels/cuda/workspace"
)

// Bounds on the numbers a plan accepts.
const (
	maxCtx   = 1 << 24
	maxBatch = 1 << 20
	// MaxParallel bounds the sequences a target decodes together.
	MaxParallel = 256
)

// ErrBadHeader is a model whose header does not describe a model the
// planner can lay out (a count missing or past its cap, heads that do not
// group, tensors past the block count): such a file is refused before
// anything is sized by its numbers.
var ErrBadHeader = errors.New("bad model header")

// Defaults Resolve applies: the context is the model's trained length
// capped at DefaultCtx, the batch DefaultBatch capped at the context.
const (
	DefaultCtx   = 4096
	DefaultBatch = 512
)

// Input is everything a plan depends on. Only the GGUF headers are read
// (metadata and tensor index), never tensor data.
type Input struct {
	Target *gguf.File
	Draft  *gguf.File // nil: no draft
	// Devices is the inventory the placements' indices refer to.
	Devices []device.Device
	// TargetPlacement's devices default to the whole inventory (Resolve).
	TargetPlacement Placement
	// DraftPlacement's devices default to the target's last (Resolve).
	DraftPlacement Placement
	Ctx            int // context size in tokens; 0: see Resolve
	// Batch is the most tokens one forward pass takes: the prefill ubatch
	// and the verification batch; 0: see Resolve.
	Batch int
	// KV are the cache types (F32 is the zero value of quant.Type; see
	// ParseKVTypes for the default). Every device of the models must run
	// them (KVTypes.RunsOn).
	KV KVTypes
	// Parallel is how many sequences the target decodes together (tandem
	// serve --parallel): it holds a KV cache of Ctx tokens for each, one
	// pool of Parallel slots per block, and so does a draft model that
	// drafts for them (draftSlots: on CPUs); a draft on or beside a GPU,
	// or one that reads the target's states, keeps one. 0: 1.
	Parallel int
}

// draftSlots is the KV caches a draft model holds: one for each of the
// target's parallel sequences where it drafts for them together, on
// CPUs; one where it reads the target's states (EAGLE-3, DFlash serve one
// sequence) or where either model is on a GPU, whose batches are not
// drafted (engine.ReasonBatchedGPU): a slot a sequence would stay unused.
func draftSlots(in Input, dm *model, tp, dp Placement) int64 {
	if len(dm.shape.TargetLayers) > 0 || BatchOnGPU(in.Devices, tp, dp) {
		return 1
	}
	return int64(in.Parallel)
}

// BatchOnGPU reports whether the placements put either model on a GPU,
// where the engine runs a batch of parallel sequences in passes of one
// shape and does not draft for it.
func BatchOnGPU(devs []device.Device, placements ...Placement) bool {
	for _, p := range placements {
		for _, i := range p.Devices {
			if d, ok := findDevice(devs, i); ok && d.Kind != device.CPU {
				return true
			}
		}
	}
	return false
}

// Resolve applies the defaults every caller of the planner shares (the
// command line, the window and the engine go through Make, which calls
// it): a context of the target's trained length capped at DefaultCtx, a
// batch of DefaultBatch, no larger than the context, the target on every
// device of the inventory and a draft on the target's last device.
func (in Input) Resolve() Input {
	if in.Ctx <= 0 {
		in.Ctx = DefaultCtx
		if n := TrainedCtx(in.Target); n > 0 && n < DefaultCtx {
			in.Ctx = n
		}
	}
	if in.Batch <= 0 {
		in.Batch = DefaultBatch
	}
	in.Batch = min(in.Batch, in.Ctx)
	if in.Parallel <= 0 {
		in.Parallel = 1
	}
	tp := &in.TargetPlacement
	if len(tp.Devices) == 0 {
		for _, d := range in.Devices {
			tp.Devices = append(tp.Devices, d.Index)
		}
	}
	if in.Draft != nil && len(in.DraftPlacement.Devices) == 0 && len(tp.Devices) > 0 {
		in.DraftPlacement.Devices = tp.Devices[len(tp.Devices)-1:]
	}
	return in
}

// TrainedCtx is the context length f's model was trained on (its header's
// context_length); 0 when f is nil or its header does not say. Past it a
// model has seen no positions, and its answers usually fall apart.
func TrainedCtx(f *gguf.File) int {
	if f == nil {
		return 0
	}
	if n, ok := f.ArchUint("context_length"); ok && n > 0 && n <= maxCtx {
		return int(n)
	}
	return 0
}

// Plan is where everything goes and what each device holds.
type Plan struct {
	Ctx, Batch int
	KV         KVTypes
	// Parallel is the target's KV slots: sequences of Ctx tokens each
	// (Input.Parallel, at least 1).
	Parallel int
	Target   ModelPlan
	Draft    *ModelPlan // nil without a draft
	Devices  []Budget   // the devices in use, in index order
	Fits     bool
	// Heads compares the target's head modes (when it spans devices).
	Heads []HeadOption
	// Borrow compares the two ways a draft can use the target tensors it
	// borrows; nil when the draft has all it needs.
	Borrow *BorrowReport
	// Suggestions are changes that make a plan that does not fit fit; each
	// was planned and fits.
	Suggestions []Suggestion
}

// ModelPlan is one model's layout: the executor allocates its Tensors'
// shards and its Buffers, and runs blocks, head and embedding where it says.
type ModelPlan struct {
	Role      Role
	Path      string
	Shape     Shape
	Placement Placement // resolved: ratios normalised, modes explicit
	// BlockDevice is the device of each block (layer split).
	BlockDevice []int
	// KVHeads and FFNRows are, per block, the KV heads and FFN rows of each
	// placement device (tensor split); a device's query heads are its KV
	// heads' groups. A device may get no heads when there are few.
	KVHeads, FFNRows [][]Range
	// HeadRun and EmbeddingRun are where the head's matmul and the token
	// lookups run, with the vocabulary rows each device covers (several
	// devices: the rows are split and results merge across devices).
	HeadRun, EmbeddingRun []Holder
	// Borrowed are the target tensors a draft uses; BorrowInPlace says they
	// are used on the target's devices rather than copied (Tensors then has
	// the copies, with File Target).
	Borrowed      []string
	BorrowInPlace bool
	Tensors       []Tensor
	Buffers       []Buffer
	// Workspace is, per CUDA device, the scratch its backend keeps of its
	// own for this model's passes (kernels/cuda/workspace); the device's
	// Budget.Workspace covers every model on it.
	Workspace map[int]workspace.Sizes
}

// Make plans a placement. An error means the input cannot be planned at
// all (bad placement, unreadable header, a split the shapes do not allow);
// a plan that is merely too big comes back with Fits false, per-device
// verdicts and suggestions.
func Make(in Input) (*Plan, error) {
	in = in.Resolve()
	p, err := build(in)
	if err != nil {
		return nil, err
	}
	p.Heads = headOptions(in, p)
	if p.Draft != nil && len(p.Draft.Borrowed) > 0 {
		p.Borrow = borrowReport(in, p)
	}
	if !p.Fits {
		p.Suggestions = suggest(in, p)
	}
	return p, nil
}

// build makes the plan alone, without the alternatives.
func build(in Input) (*Plan, error) {
	if err := in.check(); err != nil {
		return nil, err
	}
	tp, err := in.TargetPlacement.resolve(Target, in.Devices)
	if err != nil {
		return nil, err
	}
	tm, err := newModel(Target, in.Target, tp, nil)
	if err != nil {
		return nil, err
	}
	p := &Plan{Ctx: in.Ctx, Batch: in.Batch, KV: in.KV, Parallel: in.Parallel}
	if p.Target, err = tm.export(in, int64(in.Parallel)); err != nil {
		return nil, err
	}
	if in.Draft != nil {
		dp, err := in.DraftPlacement.resolve(Draft, in.Devices)
		if err != nil {
			return nil, err
		}
		dm, err := newModel(Draft, in.Draft, dp, tm)
		if err != nil {
			return nil, err
		}
		if err := checkFeatures(dm, tm); err != nil {
			return nil, err
		}
		mp, err := dm.export(in, draftSlots(in, dm, tp, dp))
		if err != nil {
			return nil, err
		}
		p.Draft = &mp
	}
	p.Devices = budgets(in.Devices, &p.Target, p.Draft)
	p.Fits = true
	for _, b := range p.Devices {
		p.Fits = p.Fits && b.Fits()
	}
	return p, nil
}

func (in Input) check() error {
	switch {
	case in.Target == nil:
		return errors.New("plan: no target model")
	case in.Ctx < 1 || in.Ctx > maxCtx:
		return fmt.Errorf("plan: context size %d (want 1 to %d)", in.Ctx, maxCtx)
	case in.Batch < 1 || in.Batch > maxBatch:
		return fmt.Errorf("plan: batch size %d (want 1 to %d)", in.Batch, maxBatch)
	case in.Batch > in.Ctx:
		return fmt.Errorf("plan: batch size %d is larger than the context (%d)", in.Batch, in.Ctx)
	case in.Parallel < 1 || in.Parallel > MaxParallel:
		return fmt.Errorf("plan: %d parallel sequences (want 1 to %d)", in.Parallel, MaxParallel)
	case int64(in.Parallel)*int64(in.Ctx) > maxCtx:
		return fmt.Errorf("plan: %d parallel sequences of %d tokens exceed %d cached tokens", in.Parallel, in.Ctx, maxCtx)
	}
	used := in.modelDevices()
	for _, d := range used {
		if !in.KV.RunsOn(d.Kind) {
			var names []string
			for _, t := range KVChoices(used) {
				names = append(names, KVTypeName(t))
			}
			return fmt.Errorf("plan: a %v KV cache cannot run on %s (these devices run %s)", in.KV, d.Label(), strings.Join(names, ", "))
		}
	}
	return nil
}

// modelDevices are the inventory's devices the models are placed on.
func (in Input) modelDevices() []device.Device {
	var out []device.Device
	for _, d := range in.Devices {
		if slices.Contains(in.TargetPlacement.Devices, d.Index) || in.Draft != nil && slices.Contains(in.DraftPlacement.Devices, d.Index) {
			out = append(out, d)
		}
	}
	return out
}

// checkFeatures checks that the target provides what an EAGLE-3 draft reads.
func checkFeatures(d, t *model) error {
	s := d.shape
	if len(s.TargetLayers) == 0 {
		return nil
	}
	if s.TargetHidden != t.shape.Embd {
		return fmt.Errorf("plan: draft %s reads target hidden states of width %d, but the target's are %d", d.file.Path, s.TargetHidden, t.shape.Embd)
	}
	for _, l := range s.TargetLayers {
		if l < 0 || l >= t.shape.Blocks {
			return fmt.Errorf("plan: draft %s reads target block %d, but the target has %d blocks", d.file.Path, l, t.shape.Blocks)
		}
	}
	return nil
}

// export turns the layout into the ModelPlan, with its KV and scratch
// buffers: a KV cache of the context for each of slots sequences.
func (m *model) export(in Input, slots int64) (ModelPlan, error) {
	kv, err := m.kvBuffers(int64(in.Ctx)*slots, in.KV)
	if err != nil {
		return ModelPlan{}, err
	}
	return ModelPlan{
		Role: m.role, Path: m.file.Path, Shape: m.shape, Placement: m.p,
		BlockDevice: m.blockDev, KVHeads: m.kvHeads, FFNRows: m.ffnRows,
		HeadRun: m.headRun, EmbeddingRun: m.embdRun,
		Borrowed: m.borrowed, BorrowInPlace: m.inPlace,
		Tensors:   m.tensors,
		Buffers:   append(kv, m.scratch(int64(in.Ctx), int64(in.Batch))...),
		Workspace: m.workspaces(in.Devices, int64(in.Ctx), int64(in.Batch)),
	}, nil
}

// budgets adds up, per device, the shards and buffers of both models.
func budgets(devs []device.Device, models ...*ModelPlan) []Budget {
	per := make(map[int]*Budget)
	at := func(d int) *Budget {
		if per[d] == nil {
			dev, _ := findDevice(devs, d)
			per[d] = &Budget{Device: dev, Capacity: int64(dev.Capacity()), Overhead: Overhead(dev)}
		}
		return per[d]
	}
	for _, m := range models {
		if m == nil {
			continue
		}
		for _, t := range m.Tensors {
			for _, s := range t.Shards {
				at(s.Device).usage(t.For).addTensor(t.Class, s.Bytes)
			}
		}
		for _, b := range m.Buffers {
			at(b.Device).usage(b.For).addBuffer(b.Kind(), b.Bytes)
		}
		for d, s := range m.Workspace {
			// One workspace per backend serves all its models.
			b := at(d)
			b.Workspace = b.Workspace.Max(s)
		}
		for _, d := range m.Placement.Devices {
			at(d) // a device of the model costs its overhead even if it ends up empty
		}
	}
	out := make([]Budget, 0, len(per))
	for _, d := range sortedKeys(per) {
		out = append(out, *per[d])
	}
	return out
}
