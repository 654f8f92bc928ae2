package plan

import (
	"fmt"
	"math"

	"github.com/dustin/go-humanize"
	"github.com/tandem-run/tandem/engine/device"
	"github.com/tandem-run/tandem/engine/gguf"
	"github.com/tandem-run/tandem/kernels/cuda/workspace"
)

// Usage is what one model holds on one device, in bytes, by category.
// Scratch includes the receive buffers for activations crossing devices.
// Experts are routed experts kept apart from their blocks (ExpertsOnDevice).
type Usage struct {
	Weights, Embedding, Head, KV, Scratch, Experts int64
}

// Total is the sum of the categories.
func (u Usage) Total() int64 { return sum(u.Weights, u.Embedding, u.Head, u.KV, u.Scratch, u.Experts) }

func (u *Usage) addTensor(c Class, n int64) {
	switch c {
	case ClassEmbedding:
		u.Embedding = sum(u.Embedding, n)
	case ClassHead:
		u.Head = sum(u.Head, n)
	case ClassExperts:
		u.Experts = sum(u.Experts, n)
	default:
		u.Weights = sum(u.Weights, n)
	}
}

func (u *Usage) addBuffer(k BufferKind, n int64) {
	if k == BufferKV {
		u.KV = sum(u.KV, n)
	} else {
		u.Scratch = sum(u.Scratch, n)
	}
}

// sum and product are gguf.Sum and gguf.Product held at math.MaxInt64 when
// they overflow: sizes from an untrusted header then read as "does not
// fit anywhere" rather than wrapping to a small number that fits.
func sum(terms ...int64) int64 {
	if n, ok := gguf.Sum(terms...); ok {
		return n
	}
	return math.MaxInt64
}

func product(factors ...int64) int64 {
	if n, ok := gguf.Product(factors...); ok {
		return n
	}
	return math.MaxInt64
}

// Budget is one device's share of a plan.
type Budget struct {
	Device   device.Device
	Target   Usage
	Draft    Usage
	Overhead int64 // see Overhead
	// Workspace is the scratch a CUDA backend keeps of its own, shared by
	// the models on the device (ModelPlan.Workspace); the executor reserves
	// it at load.
	Workspace workspace.Sizes
	Capacity  int64 // see device.Device.Capacity
}

func (b *Budget) usage(r Role) *Usage {
	if r == Draft {
		return &b.Draft
	}
	return &b.Target
}

// Role is "target", "draft" or "both": which models use the device.
func (b Budget) Role() string {
	t, d := b.Target.Total() > 0, b.Draft.Total() > 0
	switch {
	case t && d:
		return "both"
	case d:
		return string(Draft)
	}
	return string(Target)
}

// Total is everything the device will hold.
func (b Budget) Total() int64 {
	return sum(b.Target.Total(), b.Draft.Total(), b.Workspace.Total(), b.Overhead)
}

// Spare is the capacity left; negative when the plan is over.
func (b Budget) Spare() int64 { return b.Capacity - b.Total() }

// Fits reports whether the device holds its share.
func (b Budget) Fits() bool { return b.Spare() >= 0 }

// Verdict is the one-line answer people read: "fits, 1.2 GiB spare" or
// "over by 310 MiB".
func (b Budget) Verdict() string {
	if b.Fits() {
		return fmt.Sprintf("fits, %s spare", humanize.IBytes(uint64(b.Spare())))
	}
	return fmt.Sprintf("over by %s", humanize.IBytes(uint64(-b.Spare())))
}
