package cuda

import (
	"errors"
	"fmt"
	"sync"

	"github.com/tandem-run/tandem/kernels"
)

var _ kernels.DeviceCopier = (*Backend)(nil)

// peerLink orders copies from one backend into another, each with its own
// stream: the source records sent once the work before the copy is
// enqueued, this backend's stream waits for it, copies and records taken,
// and the source's stream waits for taken before its later work may
// overwrite what was copied. No host thread waits for the GPU.
type peerLink struct {
	from  *Backend
	sent  cuEvent // the source's context
	taken cuEvent // this backend's context
}

// peerLinks are a backend's links by source.
type peerLinks struct {
	mu    sync.Mutex // guards links
	links map[*Backend]*peerLink
}

// CanCopyFrom reports whether from is a CUDA backend: another GPU (a peer
// copy, direct where the GPUs can reach each other) or a virtual device on
// the same one (a device copy).
func (be *Backend) CanCopyFrom(from kernels.Backend) bool {
	_, ok := from.(*Backend)
	return ok
}

// CopyFrom copies src, a tensor of the CUDA backend from, into dst on this
// one, after the work enqueued on both before it and before the work
// enqueued on both after it. It returns without waiting for the copy.
func (be *Backend) CopyFrom(dst kernels.Tensor, from kernels.Backend, src kernels.Tensor) error {
	sb, ok := from.(*Backend)
	if !ok {
		return fmt.Errorf("cuda: %s: copy from %s: %w", be.name, from.Name(), kernels.ErrForeignBuffer)
	}
	for _, t := range []kernels.Tensor{dst, src} {
		if err := kernels.CheckView(t); err != nil {
			return fmt.Errorf("cuda: copy from %s: %w", sb.name, err)
		}
	}
	if dst.Type != src.Type || !kernels.SameShape(dst, src) || !dst.Packed() || !src.Packed() {
		return fmt.Errorf("cuda: copy %v (stride %d) to %v (stride %d): %w", src, src.Stride, dst, dst.Stride, kernels.ErrShape)
	}
	s, err := sb.addr(src)
	if err != nil {
		return err
	}
	d, err := be.addr(dst)
	if err != nil {
		return err
	}
	n := src.Bytes()
	if sb == be {
		return be.post(func() error { return be.drv.copyDtoD(d, s, n, be.stream) })
	}
	link, err := be.link(sb)
	if err != nil {
		return err
	}
	copyTo := func() error {
		if err := be.drv.streamWaitEvent(be.stream, link.sent); err != nil {
			return err
		}
		var err error
		if sb.info.Ordinal == be.info.Ordinal {
			err = be.drv.copyDtoD(d, s, n, be.stream)
		} else {
			err = be.drv.copyPeer(d, be.ctx, s, sb.ctx, n, be.stream)
		}
		if err != nil {
			return err
		}
		return be.drv.eventRecord(link.taken, be.stream)
	}
	if sb.w == be.w {
		// One thread makes both backends' calls: the whole exchange is one
		// job, switching contexts, in the order of everything else.
		return be.post(func() error {
			if err := be.w.use(sb.ctx); err != nil {
				return err
			}
			if err := sb.drv.eventRecord(link.sent, sb.stream); err != nil {
				return err
			}
			if err := be.w.use(be.ctx); err != nil {
				return err
			}
			if err := copyTo(); err != nil {
				return err
			}
			if err := be.w.use(sb.ctx); err != nil {
				return err
			}
			return sb.drv.streamWaitEvent(sb.stream, link.taken)
		})
	}
	// Two threads: each closure below waits only for one posted before it,
	// on the other thread, so the two cannot wait for each other.
	recorded, copied := make(chan struct{}), make(chan struct{})
	if err := sb.post(func() error {
		defer close(recorded)
		return sb.drv.eventRecord(link.sent, sb.stream)
	}); err != nil {
		return err
	}
	if err := be.post(func() error {
		defer close(copied)
		<-recorded
		return copyTo()
	}); err != nil {
		<-recorded
		return err
	}
	return sb.post(func() error {
		<-copied
		return sb.drv.streamWaitEvent(sb.stream, link.taken)
	})
}

// link returns the link from sb, making its events (and enabling direct
// access to another GPU's memory where the hardware allows) on first use.
func (be *Backend) link(sb *Backend) (*peerLink, error) {
	be.peers.mu.Lock()
	defer be.peers.mu.Unlock()
	if l, ok := be.peers.links[sb]; ok {
		return l, nil
	}
	l := &peerLink{from: sb}
	err := sb.do(func() error {
		var err error
		l.sent, err = sb.drv.eventCreate(false)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("cuda: %s: link from %s: %w", be.name, sb.name, err)
	}
	err = be.do(func() error {
		var err error
		if l.taken, err = be.drv.eventCreate(false); err != nil {
			return err
		}
		if sb.info.Ordinal == be.info.Ordinal {
			return nil
		}
		// Without peer access cuMemcpyPeerAsync stages through the host:
		// slower, still right.
		if ok, err := be.drv.canAccessPeer(be.dev, sb.dev); err != nil || !ok {
			return err
		}
		return be.drv.enablePeer(sb.ctx)
	})
	if err != nil {
		errs := []error{err, sb.do(func() error { return sb.drv.eventDestroy(l.sent) })}
		if l.taken != 0 {
			errs = append(errs, be.do(func() error { return be.drv.eventDestroy(l.taken) }))
		}
		return nil, fmt.Errorf("cuda: %s: link from %s: %w", be.name, sb.name, errors.Join(errs...))
	}
	if be.peers.links == nil {
		be.peers.links = map[*Backend]*peerLink{}
	}
	be.peers.links[sb] = l
	return l, nil
}

// closeLinks destroys the links' events before the backend's thread stops:
// each on the thread of the context that made it. A source already closed
// took its events with its context.
func (be *Backend) closeLinks() error {
	be.peers.mu.Lock()
	links := be.peers.links
	be.peers.links = nil
	be.peers.mu.Unlock()
	var errs []error
	for _, l := range links {
		err := l.from.do(func() error { return l.from.drv.eventDestroy(l.sent) })
		if !errors.Is(err, ErrClosed) {
			errs = append(errs, err)
		}
		errs = append(errs, be.do(func() error { return be.drv.eventDestroy(l.taken) }))
	}
	return errors.Join(errs...)
}
