package cuda

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/tandem-run/tandem/kernels"
)

// The all-reduce of src/allreduce.cu: its limits and its flags' layout.
const (
	reduceMembers = 8   // AR_MEMBERS: the most backends in a group
	reduceBlocks  = 64  // AR_BLOCKS: the most blocks of one reduce
	reduceThreads = 256 // the kernel's block
	// reduceFlagBytes is each member's flags: arrive and done slots of
	// every block and member, every block's epoch, and gave_up.
	reduceFlagBytes = 4 * (2*reduceBlocks*reduceMembers + reduceBlocks + 1)
	// reduceStuckWords are a member's words in page-locked host memory
	// where its reduce says why it gave a round up: set, block, phase (0
	// arriving, 1 done), epoch, the peer waited for, the peer's flag seen.
	reduceStuckWords = 8
)

// reduceTimeout is how long a reduce waits for its peers before it gives
// the round up (allreduce.cu). A peer's lag is the time its kernels before
// the same reduce take, milliseconds for a long prefill pass, or a context
// switch of the GPU to another process; ten seconds stays far above both
// and still reports a member that never comes long before a user gives up.
const reduceTimeout = 10 * time.Second

// ErrReduceStuck is a round of a reduce group that a member gave up, its
// peers not having come within reduceTimeout: the sums of that round and
// of the group's work after it until the report are void. The group has
// started anew by the time it is reported.
var ErrReduceStuck = errors.New("cuda: an all-reduce gave up waiting for a member of its group")

var _ kernels.Reducer = (*Backend)(nil)

// ErrReduceOpen is a driver call refused because it could wait forever: a
// reduce of a group has been launched on some of its members only, and
// the others' launches would come after the call on the same thread.
var ErrReduceOpen = errors.New("cuda: a reduce is launched on some members of its group only; run every member's program before any other call")

// group is a kernels.ReduceGroup of CUDA backends: every member holds the
// flags its peers raise, and reaches every other member's memory.
//
// Why the members share one thread. A reduce kernel waits on the device
// until every member has launched its own, so it must never depend on a
// launch that waits for it in turn. With a thread per member it could:
// the driver may hold any call up behind another thread's (the CUDA
// documentation says any call may block on internal resources; a
// copy to pageable host memory on one thread is seen to hold up kernel
// launches on others), so a Read on member 0's thread, waiting for member
// 0's reduce, can keep member 1's thread from launching the reduce that
// member 0 waits for. TestAllReduce's own-thread cases hung in a
// different case each run, which fits this (kernels/cuda/NOTES.md, htp2;
// found by reading, not reproduced on purpose). Group therefore
// moves every member onto one thread, the caller's; its calls are made in
// the order they are posted, so a call posted after every member's
// program waits only for launched work. A call posted between the
// members' programs would not: the thread refuses it with ErrReduceOpen
// (worker.roundOpen) rather than hang.
type group struct {
	members []*Backend
	bes     []kernels.Backend
	flags   []kernels.Buffer
	ptrs    []devicePtr // flags' addresses, by member
	w       *worker     // every member's thread
	// blocks is the most blocks of one reduce: reduceBlocks, or fewer so
	// that the members on one GPU leave a multiprocessor free of waiting
	// blocks (reduceGrid).
	blocks int
	// launched counts the reduce kernels launched per member, on w's
	// thread only; the group's round is open while they differ.
	launched []int
	// stuck are each member's reduceStuckWords, page-locked host memory of
	// its context, which its reduces write when they give a round up and
	// the thread reads after each call it waits for (worker.do).
	stuck []*[reduceStuckWords]uint32
	// timeout is how long a reduce waits (reduceTimeout; tests shorten it
	// before they compile).
	timeout time.Duration
}

// Group joins members, CUDA backends on GPUs that reach one another's
// memory directly (or virtual devices of one GPU), into a group for
// AllReduce ops, with peer access enabled both ways between GPUs.
func (be *Backend) Group(label kernels.Label, members []kernels.Backend) (kernels.ReduceGroup, error) {
	if len(members) < 1 || len(members) > reduceMembers {
		return nil, fmt.Errorf("cuda: group of %d backends (1 to %d): %w", len(members), reduceMembers, kernels.ErrUnsupported)
	}
	g := &group{bes: append([]kernels.Backend(nil), members...), timeout: reduceTimeout}
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
	infos := make([]DeviceInfo, len(g.members))
	for i, m := range g.members {
		infos[i] = m.info
	}
	g.blocks = blockLimit(infos)
	g.w, g.launched = be.w, make([]int, len(g.members))
	for _, m := range g.members {
		if err := m.moveTo(g.w); err != nil {
			return nil, fmt.Errorf("cuda: group: %w", err)
		}
	}
	if err := g.w.do(0, nil, func() error { g.w.groups = append(g.w.groups, g); return nil }); err != nil {
		return nil, fmt.Errorf("cuda: group: %w", err)
	}
	for _, m := range g.members {
		buf, err := m.Alloc(label, reduceFlagBytes)
		if err != nil {
			return nil, fmt.Errorf("cuda: group flags: %w", errors.Join(err, g.Close()))
		}
		g.flags = append(g.flags, buf)
		g.ptrs = append(g.ptrs, buf.(*buffer).ptr)
		var words unsafe.Pointer
		if err := m.do(func() (err error) { words, err = m.drv.hostAlloc(4 * reduceStuckWords); return err }); err != nil {
			return nil, fmt.Errorf("cuda: group: %w", errors.Join(err, g.Close()))
		}
		w := (*[reduceStuckWords]uint32)(words)
		*w = [reduceStuckWords]uint32{}
		g.stuck = append(g.stuck, w)
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

// Close frees the flags once every member's work has finished. With a
// round open it fails with ErrReduceOpen and frees nothing: the members'
// kernels may still read the flags.
func (g *group) Close() error {
	if g.w == nil {
		return nil
	}
	err := g.w.do(0, nil, func() error {
		g.w.groups = slices.DeleteFunc(g.w.groups, func(o *group) bool { return o == g })
		return nil
	})
	if err != nil {
		return fmt.Errorf("cuda: group close: %w", err)
	}
	g.w = nil
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
	for i, w := range g.stuck {
		m := g.members[i]
		if err := m.do(func() error { return m.drv.hostFree(unsafe.Pointer(w)) }); err != nil && !errors.Is(err, ErrClosed) {
			errs = append(errs, err)
		}
	}
	g.flags, g.ptrs, g.stuck = nil, nil, nil
	return errors.Join(errs...)
}

// gaveUp reports a round that a member of g gave up (ErrReduceStuck,
// with what the member saw) and starts the group anew: once every
// member's stream has drained (a member that gave up returns at once from
// its later reduces, and its peers give up within the timeout), the
// flags and the stuck words are zeroed on every member, so that the
// epochs start again from zero together. nil when no member gave up.
// Thread only, with no round open.
func (g *group) gaveUp() error {
	who := -1
	for i, w := range g.stuck {
		if atomic.LoadUint32(&w[0]) != 0 {
			who = i
			break
		}
	}
	if who < 0 {
		return nil
	}
	var seen [reduceStuckWords]uint32
	for i := range seen {
		seen[i] = atomic.LoadUint32(&g.stuck[who][i])
	}
	phase := "arrival"
	if seen[2] != 0 {
		phase = "end"
	}
	peer := fmt.Sprint(seen[4])
	if int(seen[4]) < len(g.members) {
		peer = g.members[seen[4]].name
	}
	err := fmt.Errorf("%w: %s's block %d waited %v at its reduce's %s (epoch %d) for %s, whose flag stood at %d; that round's sums are void and the group has started anew",
		ErrReduceStuck, g.members[who].name, seen[1], g.timeout, phase, seen[3], peer, seen[5])
	var errs []error
	for _, m := range g.members {
		if e := g.w.use(m.ctx); e != nil {
			errs = append(errs, e)
			continue
		}
		errs = append(errs, m.drv.streamSync(m.stream))
	}
	for i, m := range g.members {
		if e := g.w.use(m.ctx); e != nil {
			errs = append(errs, e)
			continue
		}
		errs = append(errs, m.drv.memset32(g.ptrs[i], 0, reduceFlagBytes/4, m.stream), m.drv.streamSync(m.stream))
	}
	for _, w := range g.stuck {
		for i := range w {
			atomic.StoreUint32(&w[i], 0)
		}
	}
	return errors.Join(append([]error{err}, errs...)...)
}

// Run runs one round: progs[i] on Members()[i] (nil where a member has
// nothing to run), compiled on that member. A member's program waits on
// the device, at each reduce, for the other members' programs, so no
// member's launch may wait in turn on work already launched. A driver
// call other than a launch could: a graph's instantiation, upload or
// destruction, made for member 1 while member 0's reduce waits for
// member 1, may wait for the device (the driver's documentation lets any
// call block on internal resources). Run therefore makes every such call
// of the round, for every member, before it launches anything, and then
// launches the members' programs one after another in one job of the
// group's thread, so that nothing else can come between them.
func (g *group) Run(ctx context.Context, progs []kernels.Program) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	w := g.w
	if w == nil {
		return fmt.Errorf("cuda: group run: %w", ErrClosed)
	}
	if len(progs) != len(g.members) {
		return fmt.Errorf("cuda: group run of %d programs for %d members: %w", len(progs), len(g.members), kernels.ErrShape)
	}
	type memberRun struct {
		p      *program
		stale  [][2]uintptr
		record bool
	}
	var runs []memberRun
	for i, kp := range progs {
		if kp == nil {
			continue
		}
		p, ok := kp.(*program)
		if !ok || p.be != g.members[i] {
			return fmt.Errorf("cuda: group run: program %d is not %s's: %w", i, g.members[i].name, kernels.ErrForeignBuffer)
		}
		if p.be.gone.Load() {
			return ErrClosed
		}
		runs = append(runs, memberRun{p: p})
	}
	for i := range runs {
		r := &runs[i]
		if err := r.p.stage(); err != nil {
			return err
		}
		r.stale, r.p.stale = r.p.stale, nil
		r.record = r.p.captureDue()
	}
	return w.postLaunch(0, nil, func() error {
		// Before the first launch: every other call of the round.
		for i := range runs {
			r := &runs[i]
			if err := w.use(r.p.be.ctx); err != nil {
				r.p.be.errs.keep(err)
				continue
			}
			if err := r.p.destroyGraphs(r.stale); err != nil {
				r.p.be.errs.keep(err)
			}
			if r.record {
				r.p.record()
			}
		}
		for _, r := range runs {
			err := w.use(r.p.be.ctx)
			if err == nil && r.p.exec != 0 {
				err = r.p.launchGraph()
			} else if err == nil {
				err = r.p.eager(context.Background(), true)
			}
			if err != nil {
				r.p.be.errs.keep(err)
			}
		}
		return nil
	})
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
// (four a thread), at most limit (group.blocks). Each block waits on the
// device for the other members' blocks, and on virtual devices those
// members' kernels before the reduce must find room on the same GPU: with
// at most (multiprocessors-1)/members blocks a member, one multiprocessor
// always holds no waiting block, so every kernel can make progress there
// however large its blocks.
func reduceGrid(n, limit int) uint32 {
	return uint32(min(max((n+4*reduceThreads-1)/(4*reduceThreads), 1), limit))
}

// blockLimit is the most blocks of one reduce of a group on these GPUs:
// reduceBlocks, or (multiprocessors-1)/members on a GPU that hosts several
// members (virtual devices), the least over the GPUs, as every member must
// run the same grid.
func blockLimit(members []DeviceInfo) int {
	perGPU := map[int]int{}
	for _, m := range members {
		perGPU[m.Ordinal]++
	}
	limit := reduceBlocks
	for _, m := range members {
		limit = min(limit, max(1, (m.Multiprocessors-1)/perGPU[m.Ordinal]))
	}
	return limit
}

// gaveUp reports a round that a member of a group on the thread gave up
// (group.gaveUp), after a call the host waited for; thread only.
func (w *worker) gaveUp() error {
	for _, g := range w.groups {
		if err := g.gaveUp(); err != nil {
			return err
		}
	}
	return nil
}

// roundOpen fails with ErrReduceOpen while a group on the thread has
// launched more reduces on some member than on another; thread only.
func (w *worker) roundOpen() error {
	for _, g := range w.groups {
		for i, n := range g.launched {
			if n != g.launched[0] {
				return fmt.Errorf("%w (%s has launched %d, %s %d)", ErrReduceOpen,
					g.members[0].name, g.launched[0], g.members[i].name, n)
			}
		}
	}
	return nil
}

// moveTo makes w the thread of be's driver calls (Group), after the work
// posted to its old one.
func (be *Backend) moveTo(w *worker) error {
	if be.w == w {
		return nil
	}
	if err := be.Sync(); err != nil {
		return err
	}
	if !w.hold() {
		return ErrClosed
	}
	old := be.w
	be.w = w
	old.release()
	return nil
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
	args = append(args, argInt(rank), argInt(len(g.members)), argI64(int64(n)), argInt(vec),
		argPtr(devicePtr(uintptr(unsafe.Pointer(g.stuck[rank])))), uint64(g.timeout.Nanoseconds()))
	if err := c.add(o.Name(), "all_reduce_f32", [3]uint32{reduceGrid(n, g.blocks), 1, 1}, [3]uint32{reduceThreads, 1, 1}, 0, args...); err != nil {
		return err
	}
	c.steps[len(c.steps)-1].group, c.steps[len(c.steps)-1].rank = g, rank
	return nil
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
