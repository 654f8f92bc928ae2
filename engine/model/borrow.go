package model

import (
	"errors"
	"fmt"

	"github.com/tandem-run/tandem/engine/gguf"
	"github.com/tandem-run/tandem/engine/plan"
	"github.com/tandem-run/tandem/kernels"
)

// borrowedHead is one device's rows of the target's head that a draft
// borrows in place.
type borrowedHead struct {
	dev  int
	be   kernels.Backend
	rows plan.Range
	w    kernels.Tensor
}

// borrow gives a head-sharing draft (EAGLE-3, DFlash) the target tensors it
// lacks (its embedding emb unless ownEmbd, its head unless ownHead) as the
// plan says: copies read from tf onto the draft's device, or, borrowing in
// place, the target's own tables where the draft's device holds them whole
// (set into emb and head), else the target's devices' rows: embedFar means
// the target looks tokens up for the draft; heads are the head's shards, in
// vocabulary order, for the caller to give buffers and programs.
func borrow(l *loader, tf *gguf.File, mp *plan.ModelPlan, t *Model, specs []tensorSpec, emb, head *kernels.Tensor, ownEmbd, ownHead bool) (embedFar bool, heads []borrowedHead, err error) {
	if !mp.BorrowInPlace {
		copies := &loader{ctx: l.ctx, f: tf, be: l.be, owner: l.owner, progress: l.progress}
		var want []tensorSpec
		for _, s := range specs {
			if (s.dst == emb && !ownEmbd) || (s.dst == head && !ownHead) {
				s.optional = false
				want = append(want, s)
			}
		}
		err := copies.placeAll(want)
		l.bufs = append(l.bufs, copies.bufs...)
		return false, nil, err
	}
	dev := mp.Placement.Devices[0]
	// Whole tables on the draft's own device are used in its programs.
	local := func(run []plan.Holder) (*part, bool) {
		if len(run) != 1 || run[0].Device != dev || run[0].Rows.Len() != int64(t.params.Vocab) {
			return nil, false
		}
		pt := t.byDev[dev]
		return pt, pt != nil
	}
	if !ownEmbd {
		if pt, ok := local(mp.EmbeddingRun); ok && pt.embdRows == mp.EmbeddingRun[0].Rows {
			*emb = pt.w.tokEmbd
		} else {
			for _, h := range mp.EmbeddingRun {
				if pt := t.byDev[h.Device]; pt == nil || pt.embdRows != h.Rows {
					return false, nil, fmt.Errorf("model: the draft's lookups on device %d rows %v, where the target has none: %w", h.Device, h.Rows, ErrBadParam)
				}
			}
			embedFar = true
		}
	}
	if ownHead {
		return embedFar, nil, nil
	}
	if pt, ok := local(mp.HeadRun); ok && pt.headRows == mp.HeadRun[0].Rows && pt.w.output.Valid() {
		*head = pt.w.output
		return embedFar, nil, nil
	}
	for _, h := range mp.HeadRun {
		pt := t.byDev[h.Device]
		if pt == nil || pt.headRows != h.Rows || !pt.w.output.Valid() {
			return false, nil, fmt.Errorf("model: the draft's head on device %d rows %v, where the target has none: %w", h.Device, h.Rows, ErrBadParam)
		}
		heads = append(heads, borrowedHead{dev: h.Device, be: pt.be, rows: h.Rows, w: pt.w.output})
	}
	return embedFar, heads, nil
}

// farBuffers are a head-sharing draft's buffers on the target's devices,
// by backend, freed together.
type farBuffers map[kernels.Backend][]kernels.Buffer

// alloc allocates on be and remembers the buffer for free.
func (f farBuffers) alloc(be kernels.Backend, label kernels.Label, size int64) (kernels.Buffer, error) {
	buf, err := be.Alloc(label, size)
	if err != nil {
		return nil, err
	}
	f[be] = append(f[be], buf)
	return buf, nil
}

// free releases every buffer and forgets them.
func (f farBuffers) free() error {
	var errs []error
	for be, bufs := range f {
		for _, b := range bufs {
			errs = append(errs, be.Free(b))
		}
		delete(f, be)
	}
	return errors.Join(errs...)
}
