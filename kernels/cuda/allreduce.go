package cuda

import (
	"errors"
	"fmt"

	"github.com/tandem-run/tandem/kernels"
)

// The all-reduce of src/allreduce.cu: its limits and its flags' layout.
const (
	reduceMembers = 8   // AR_MEMBERS: the most backends in a group
	reduceBlocks  = 64  // AR_BLOCKS: the most blocks of one reduce
	reduceThreads = 256 // the kernel's block
	// reduceFlagBytes is each member's flags: arrive and done slots of
	// every block and member, and every block's epoch.
	reduceFlagBytes = 4 * (2*reduceBlocks*reduceMembers + reduceBlocks)
)

var _ kernels.Reducer = (*Backend)(nil)

// group is a kernels.ReduceGroup of CUDA backends: every member holds the
// flags its peers raise, and reaches every other member's memory.
type group struct {
	members []*Backend
	bes     []kernels.Backend
	flags   []kernels.Buffer
	ptrs    []devicePtr // flags' addresses, by member
}

// Group joins members, CUDA backends on GPUs that reach one another's
// memory directly (or virtual devices of one GPU), into a group for
// AllReduce ops, with peer access enabled both ways between GPUs.
func (be *Backend) Group(label kernels.Label, members []kernels.Backend) (kernels.ReduceGroup, error) {
	if len(members) < 1 || len(members) > reduceMembers {
		return nil, fmt.Errorf("cuda: group of %d backends (1 to %d): %w", len(members), reduceMembers, kernels.ErrUnsupported)
	}
	g := &group{bes: append([]kernels.Backend(nil), members...)}
	self := false
	for _, m := range members {
		cb, ok := m.(*Backend)
		if !ok {
			return nil, fmt.Errorf("cuda: group with %s: %w", m.Name(), kernels.ErrForeignBuffer)
		}
		for _, o := range g.members {
			if o == cb {
				return nil, fmt.Errorf("cuda: %s twice in a group: %w", cb.name, kernels.ErrShape)
			}
		}
		self = self || cb == be
		g.members = append(g.members, cb)
	}
	if !self {
		return nil, fmt.Errorf("cuda: group without %s: %w", be.name, kernels.ErrShape)
	}
	for _, a := range g.members {
		for _, b := range g.members {
			if a == b || a.info.Ordinal == b.info.Ordinal {
				continue
			}
			err := a.do(func() error {
				ok, err := a.drv.canAccessPeer(a.dev, b.dev)
				if err != nil {
					return err
				}
				if !ok {
					return fmt.Errorf("%s cannot reach %s's memory: %w", a.name, b.name, kernels.ErrUnsupported)
				}
				return a.drv.enablePeer(b.ctx)
			})
			if err != nil {
				return nil, fmt.Errorf("cuda: group: %w", err)
			}
		}
	}
	for _, m := range g.members {
		buf, err := m.Alloc(label, reduceFlagBytes)
		if err != nil {
			return nil, fmt.Errorf("cuda: group flags: %w", errors.Join(err, g.Close()))
		}
		g.flags = append(g.flags, buf)
		g.ptrs = append(g.ptrs, buf.(*buffer).ptr)
	}
	// Alloc zeroes on each member's stream; the flags must be zero
	// before any member's first reduce reads them.
	for _, m := range g.members {
		if err := m.Sync(); err != nil {
			return nil, fmt.Errorf("cuda: group flags: %w", errors.Join(err, g.Close()))
		}
	}
	return g, nil
}

// Members are the group's backends, in the order of AllReduce's shares.
func (g *group) Members() []kernels.Backend { return g.bes }

// Close frees the flags once every member's work has finished.
func (g *group) Close() error {
	var errs []error
	for i, buf := range g.flags {
		m := g.members[i]
		if err := m.Sync(); err != nil && !errors.Is(err, ErrClosed) {
			errs = append(errs, err)
		}
		if err := m.Free(buf); err != nil && !errors.Is(err, ErrClosed) {
			errs = append(errs, err)
		}
	}
	g.flags, g.ptrs = nil, nil
	return errors.Join(errs...)
}

// rank is be's place in g, or -1.
func (g *group) rank(be *Backend) int {
	for i, m := range g.members {
		if m == be {
			return i
		}
	}
	return -1
}

// reduceGrid is the blocks of a reduce of n elements: a block per 1024
// (four a thread), at most reduceBlocks.
func reduceGrid(n int) uint32 {
	return uint32(min(max((n+4*reduceThreads-1)/(4*reduceThreads), 1), reduceBlocks))
}

// allReduce compiles a kernels.AllReduce: one launch of all_reduce_f32.
func (c *compiler) allReduce(o kernels.AllReduce) error {
	g, ok := o.Group.(*group)
	if !ok {
		return fmt.Errorf("%w: a group of %T", kernels.ErrUnsupported, o.Group)
	}
	rank := g.rank(c.be)
	if rank < 0 || g.ptrs == nil {
		return fmt.Errorf("%w: %s is not in the group", kernels.ErrUnsupported, c.be.name)
	}
	dst, a, _, err := c.addr3(o.Dst, o.A, kernels.Tensor{})
	if err != nil {
		return err
	}
	args := []uint64{argPtr(dst), argPtr(a)}
	var mask uint64
	aligned := dst%16 == 0 && a%16 == 0
	for i := range reduceMembers {
		var p devicePtr
		if i < len(o.Shares) && o.Shares[i].Valid() {
			if p, err = g.members[i].addr(o.Shares[i]); err != nil {
				return fmt.Errorf("share of %s: %w", g.members[i].name, err)
			}
			mask |= 1 << i
			aligned = aligned && p%16 == 0
		}
		args = append(args, argPtr(p))
	}
	args = append(args, mask)
	for i := range reduceMembers {
		var p devicePtr
		if i < len(g.ptrs) {
			p = g.ptrs[i]
		}
		args = append(args, argPtr(p))
	}
	n := o.Dst.Rows * o.Dst.Cols
	vec := 0
	if aligned {
		vec = 1
	}
	args = append(args, argInt(rank), argInt(len(g.members)), argI64(int64(n)), argInt(vec))
	return c.add(o.Name(), "all_reduce_f32", [3]uint32{reduceGrid(n), 1, 1}, [3]uint32{reduceThreads, 1, 1}, 0, args...)
}

// preload loads every kernel of a program with an all-reduce before it
// first runs. Under the driver's lazy loading a kernel's first launch may
// wait for the whole context to go idle; on virtual devices of one GPU
// (one context) a reduce already waiting there for another member, whose
// programs the host has yet to post, would then never finish.
func (be *Backend) preload(steps []step) error {
	return be.do(func() error {
		for _, s := range steps {
			if err := be.drv.funcLoad(s.fn); err != nil {
				return fmt.Errorf("cuda: %s: %w", s.kernel, err)
			}
		}
		return nil
	})
}
