package model

import (
	"context"
	"errors"
	"fmt"

	"github.com/tandem-run/tandem/kernels"
)

// Activations cross devices straight from one backend's memory to the
// other's where the receiving backend is a kernels.DeviceCopier that reads
// the sender's (GPU to GPU, virtual devices of one GPU, CPU to CPU), and
// through the host (Read, then Write) otherwise. A device copy is ordered
// on both devices' queues, so the host never waits for it.

// copier is to's backend as a copier from from's, or nil when the two
// must go through the host.
func copier(to, from *part) kernels.DeviceCopier {
	c, ok := to.be.(kernels.DeviceCopier)
	if !ok || !c.CanCopyFrom(from.be) {
		return nil
	}
	return c
}

// allDirect reports whether every device copies straight from every
// other, as the device-side sum of a tensor split needs.
func (m *Model) allDirect() bool {
	for _, to := range m.parts {
		for _, from := range m.parts {
			if to != from && copier(to, from) == nil {
				return false
			}
		}
	}
	return true
}

// spread copies src, rows of the stream on from, into the receive buffer
// of each part of to: device to device where it can, else read once into
// hostX and written from there.
func (m *Model) spread(from *part, src kernels.Tensor, to []*part) error {
	b, read := src.Rows, false
	for _, pt := range to {
		dst := pt.s.recv.RowSlice(0, b)
		if pt == from {
			if err := pt.be.Copy(dst, src); err != nil {
				return fmt.Errorf("model: stream on device %d: %w", pt.dev, err)
			}
			continue
		}
		if c := copier(pt, from); c != nil {
			if err := c.CopyFrom(dst, from.be, src); err != nil {
				return fmt.Errorf("model: stream from device %d to %d: %w", from.dev, pt.dev, err)
			}
			continue
		}
		if !read {
			if err := m.readStream(from, src); err != nil {
				return err
			}
			read = true
		}
		if err := m.send(pt, b); err != nil {
			return err
		}
	}
	return nil
}

// readStream copies t, b rows of the stream on pt, into hostX.
func (m *Model) readStream(pt *part, t kernels.Tensor) error {
	if err := pt.be.Read(kernels.F32Bytes(m.hostX[:t.Rows*m.params.Embd]), t); err != nil {
		return fmt.Errorf("model: stream from device %d: %w", pt.dev, err)
	}
	return nil
}

// send writes b rows of hostX into pt's receive buffer.
func (m *Model) send(pt *part, b int) error {
	if err := pt.be.Write(pt.s.recv.RowSlice(0, b), kernels.F32Bytes(m.hostX[:b*m.params.Embd])); err != nil {
		return fmt.Errorf("model: stream to device %d: %w", pt.dev, err)
	}
	return nil
}

// sendAll sends hostX to the parts that want it.
func (m *Model) sendAll(b int, want func(*part) bool) error {
	for _, pt := range m.parts {
		if want(pt) {
			if err := m.send(pt, b); err != nil {
				return err
			}
		}
	}
	return nil
}

// shares reports whether pt computes part of block l's attention or FFN.
func (pt *part) shares(l int, kind progKind) bool {
	lb := pt.local[l]
	return kind == progAttn && lb.heads > 0 || kind == progFFN && lb.ffn > 0
}

// sumShares adds the devices' shares of block l's attention or FFN output,
// each in its xn, in device order and leaves the sum in every device's
// receive buffer. On devices that copy from one another the sum runs down
// the chain of shareholders, each adding its share to what it received
// (an Add on the device), and the last sends it to the others; otherwise
// the host adds. Both add in the same order, so they agree to the bit.
func (m *Model) sumShares(ctx context.Context, b, l int, kind progKind) error {
	if !m.direct {
		return m.sumOnHost(b, l, kind)
	}
	var acc *part // holds the running sum, in sum
	var sum kernels.Tensor
	received := false // sum is acc's receive buffer, not its own share
	for _, pt := range m.parts {
		if !pt.shares(l, kind) {
			continue
		}
		if acc == nil {
			acc, sum = pt, pt.s.xn.RowSlice(0, b)
			continue
		}
		recv := pt.s.recv.RowSlice(0, b)
		if err := copier(pt, acc).CopyFrom(recv, acc.be, sum); err != nil {
			return fmt.Errorf("model: block %d share from device %d to %d: %w", l, acc.dev, pt.dev, err)
		}
		err := pt.progs.run(ctx, progKey{kind: progReduce, n: b}, func() []kernels.Op {
			return []kernels.Op{kernels.Add{Dst: recv, A: recv, B: pt.s.xn.RowSlice(0, b)}}
		})
		if err != nil {
			return err
		}
		acc, sum, received = pt, recv, true
	}
	if acc == nil {
		return m.sumOnHost(b, l, kind)
	}
	var to []*part
	for _, pt := range m.parts {
		if pt != acc || !received {
			to = append(to, pt)
		}
	}
	return m.spread(acc, sum, to)
}

// sumOnHost adds the shares into hostX and sends the sum to every device.
func (m *Model) sumOnHost(b, l int, kind progKind) error {
	sum := m.hostX[:b*m.params.Embd]
	clear(sum)
	share := m.partial[:len(sum)]
	for _, pt := range m.parts {
		if !pt.shares(l, kind) {
			continue
		}
		if err := pt.be.Read(kernels.F32Bytes(share), pt.s.xn.RowSlice(0, b)); err != nil {
			return fmt.Errorf("model: block %d share from device %d: %w", l, pt.dev, err)
		}
		for i, v := range share {
			sum[i] += v
		}
	}
	return m.sendAll(b, func(*part) bool { return true })
}

// reduceGroup joins a tensor split's devices into a kernels.ReduceGroup
// when every backend is a kernels.Reducer that reaches the others: the
// shares are then summed on the devices by one AllReduce each, inside the
// devices' programs, with no copy, event or host call per exchange. nil
// otherwise (a layer split, a CPU device, GPUs without peer access): the
// sum goes through copies or the host (sumShares).
func (m *Model) reduceGroup() (kernels.ReduceGroup, error) {
	if m.layered || len(m.parts) < 2 {
		return nil, nil
	}
	var bes []kernels.Backend
	for _, pt := range m.parts {
		if _, ok := pt.be.(kernels.Reducer); !ok {
			return nil, nil
		}
		bes = append(bes, pt.be)
	}
	g, err := m.parts[0].be.(kernels.Reducer).Group(kernels.Label{Owner: m.role, Cat: kernels.Staging}, bes)
	if errors.Is(err, kernels.ErrUnsupported) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("model: reduce group: %w", err)
	}
	return g, nil
}

// reducedBlocks is how many blocks one program of a reduced tensor split
// runs. Every device's programs wait on the device for the others' at each
// AllReduce, so the host posts each run of blocks to every device before
// the next run: a program's first, uncaptured run must fit the driver's
// queue of launches while it waits for a device not yet posted to.
const reducedBlocks = 6

// reducedBody is tensorBody with the shares summed by the reduce group:
// each device runs its blocks in programs of reducedBlocks blocks, each
// exchange an AllReduce that adds the sum to the device's stream. Every
// device's program of a run is compiled before any runs, and a run is
// posted to all devices or to none (ctx is looked at between runs only):
// a device left without its part of a run would wait on the others.
func (m *Model) reducedBody(ctx context.Context, b int, local *part) error {
	shares := func(l int, kind progKind) []kernels.Tensor {
		out := make([]kernels.Tensor, len(m.parts))
		for i, pt := range m.parts {
			if pt.shares(l, kind) {
				out[i] = pt.s.xn.RowSlice(0, b)
			}
		}
		return out
	}
	final := m.byDev[m.head[0].Device]
	build := make([]func() []kernels.Op, len(m.parts))
	progs := make([]kernels.Program, len(m.parts))
	for lo := 0; lo < m.params.Layers; lo += reducedBlocks {
		hi := min(lo+reducedBlocks, m.params.Layers)
		if err := ctx.Err(); err != nil {
			return err
		}
		key := progKey{kind: progReduced, block: lo, n: b, seqs: m.layout}
		for i, pt := range m.parts {
			build[i] = func() []kernels.Op {
				x, recv := pt.s.x.RowSlice(0, b), pt.s.recv.RowSlice(0, b)
				var ops []kernels.Op
				for l := lo; l < hi; l++ {
					if l == 0 && pt != local {
						ops = append(ops, kernels.Copy{Dst: x, Src: recv})
					}
					if pt == m.parts[0] {
						ops = append(ops, m.captureOps(pt, l, x)...)
					}
					if pt.local[l].heads > 0 {
						ops = append(ops, m.attnOps(pt, l, b)...)
					}
					ops = append(ops, kernels.AllReduce{Dst: x, A: x, Shares: shares(l, progAttn), Group: m.group})
					if pt.local[l].ffn > 0 {
						ops = append(ops, m.ffnOps(pt, l, b)...)
					}
					ops = append(ops, kernels.AllReduce{Dst: x, A: x, Shares: shares(l, progFFN), Group: m.group})
				}
				if hi == m.params.Layers && pt == final {
					ops = append(ops, m.captureOps(pt, m.params.Layers, x)...)
				}
				return ops
			}
			prog, err := pt.progs.get(key, build[i])
			if err != nil {
				return err
			}
			progs[i] = prog
		}
		for _, pt := range m.parts {
			pt.progs.touch(key)
		}
		if err := m.group.Run(context.WithoutCancel(ctx), progs); err != nil {
			return fmt.Errorf("model: blocks %d-%d: %w", lo, hi-1, err)
		}
	}
	return nil
}
