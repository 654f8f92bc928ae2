package kernels

import (
	"context"
	"fmt"
)

// Backend is one compute device: its memory, and programs of ops that run on
// it in the order they are given. A Backend is used by one goroutine at a
// time (the model that owns it); a backend that needs a locked OS thread
// (CUDA) hides its worker behind these calls.
//
// Program.Run and Write may return before the device has finished (a GPU
// enqueues them; Write takes a copy of its input first); Read and Sync wait
// for everything enqueued before them and report its first error, so host
// code sees results in program order. The other memory calls are
// synchronous.
type Backend interface {
	// Name identifies the device in messages and plans ("cpu", "cuda0").
	Name() string

	// Alloc returns size bytes of device memory, zeroed, counted under label.
	// Running out of memory is an error wrapping ErrOutOfMemory.
	Alloc(label Label, size int64) (Buffer, error)
	// Upload returns a read-only buffer holding data (weights). The CPU
	// backend uses data in place (it is the file's mmap, which must outlive
	// the buffer); a GPU copies it.
	Upload(label Label, data []byte) (Buffer, error)
	// Free releases a buffer made by this backend; its tensors are dead.
	Free(b Buffer) error
	// Usage is the bytes currently held, by label: what the memory planner's
	// numbers are checked against.
	Usage() Usage

	// Write copies src into dst (host to device); len(src) == dst.Bytes()
	// and dst must be packed.
	Write(dst Tensor, src []byte) error
	// Read copies src into dst (device to host) after all earlier work;
	// len(dst) == src.Bytes() and src must be packed.
	Read(dst []byte, src Tensor) error
	// Copy copies src to dst on this device, ordered after earlier work;
	// same type and shape, strides may differ.
	Copy(dst, src Tensor) error
	// Sync waits until all enqueued work is done and reports its first error.
	Sync() error

	// Supports reports whether the backend can run op with these operand
	// types (ggml's supports_op); Compile fails on an op it does not support.
	Supports(op Op) bool
	// Compile checks ops (shapes, types, bounds) and prepares them to run in
	// order as one program. The program keeps references to the tensors;
	// refreshing their contents with Write between runs is how inputs change.
	Compile(ops []Op) (Program, error)

	// Close frees everything the backend holds.
	Close() error
}

// Program is a compiled op list. Run executes it once; a GPU backend may
// capture it on first run and replay it afterwards.
type Program interface {
	// Run executes the ops in order; it stops between ops when ctx is done.
	Run(ctx context.Context) error
	// Close releases what the program holds (a captured graph).
	Close() error
}

// Category says what an allocation is for, in the memory planner's terms.
type Category uint8

// The categories the planner budgets separately.
const (
	Weights   Category = iota // repeating-block weights and norms
	Embedding                 // the token embedding table
	Head                      // the output head and its norm
	KV                        // the attention K/V cache
	Scratch                   // activations, logits, token/position inputs
	Staging                   // buffers for copies between devices
	numCategories
)

var categoryNames = [numCategories]string{"weights", "embedding", "head", "kv", "scratch", "staging"}

func (c Category) String() string {
	if c < numCategories {
		return categoryNames[c]
	}
	return fmt.Sprintf("category(%d)", uint8(c))
}

// Label tags an allocation with its owner (a model's role: "target",
// "draft") and category, so usage can be compared line by line with a plan.
type Label struct {
	Owner string
	Cat   Category
}

func (l Label) String() string { return l.Owner + "/" + l.Cat.String() }

// Usage is bytes held per label.
type Usage map[Label]int64

// Total is the sum over all labels.
func (u Usage) Total() int64 {
	var n int64
	for _, v := range u {
		n += v
	}
	return n
}

// Of sums the bytes held by owner (all categories).
func (u Usage) Of(owner string) int64 {
	var n int64
	for l, v := range u {
		if l.Owner == owner {
			n += v
		}
	}
	return n
}

// DeviceCopier is a Backend that copies straight from another backend's
// memory (a second GPU, a virtual device on the same GPU, or another CPU
// device), so activations cross devices without a trip through Read and
// Write. Callers test for it with a type assertion and CanCopyFrom, and go
// through the host otherwise.
type DeviceCopier interface {
	// CanCopyFrom reports whether CopyFrom accepts tensors of from.
	CanCopyFrom(from Backend) bool
	// CopyFrom copies src, a tensor of from, into dst on this backend: same
	// type and shape, both packed. The copy comes after all work enqueued
	// on either backend before the call, and work enqueued on either after
	// it comes after the copy; the call itself need not wait for the copy.
	CopyFrom(dst Tensor, from Backend, src Tensor) error
}

// Reducer is a Backend whose programs sum tensors across a group of
// backends on the devices themselves (the AllReduce op): each device reads
// the others' shares where they lie and waits for them through flags in
// device memory, so neither the host nor a copy per exchange stands
// between the devices' programs. Callers test for it with a type assertion
// and sum through a DeviceCopier or the host otherwise.
type Reducer interface {
	// Group joins members (this backend among them, each reaching the
	// others' memory) into a group for AllReduce ops. Each member holds
	// a few KiB of flags, counted under label. It fails wrapping
	// ErrUnsupported when a member cannot take part. A program with the
	// group's ops waits on its device for the other members' programs,
	// so callers run every member's program of a round before any other
	// call on a member (a backend may refuse such a call rather than
	// wait forever).
	Group(label Label, members []Backend) (ReduceGroup, error)
}

// ReduceGroup is a set of backends that run AllReduce ops together.
type ReduceGroup interface {
	// Members are the backends, in the order of AllReduce's Shares.
	Members() []Backend
	// Run runs one round of the group: progs[i], compiled on Members()[i]
	// (nil where a member has nothing to run), all together, so that no
	// other call comes between the members' programs and none of their
	// launches waits on another's reduce. Like a Program's Run it need
	// not wait for the programs; once it has posted them they run whole.
	Run(ctx context.Context, progs []Program) error
	// Close frees what the group holds on its members, after their work
	// has finished; programs with the group's ops must be closed first.
	Close() error
}
