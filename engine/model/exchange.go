package model

import (
	"context"
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
