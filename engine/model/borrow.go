package model

import (
	"context"
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

// farSide is what EAGLE-3 and DFlash drafts have alike beyond their own
// device, where they use the target's tables in place (plan.BorrowInPlace):
// the target, which looks tokens up for the draft when embed is set (the
// rows come back through emb), and the host copy of the normalised states
// that go to the head's shards (sel). The shards differ by draft.
type farSide struct {
	target *Model
	embed  bool      // tokens are looked up by the target (Model.lookUp)
	emb    []float32 // [batch, n_embd] looked-up rows
	sel    []float32 // the normalised states the head's shards read, [rows, n_embd]
}

// lookUp has the target look up tokens in its embedding (rows of embd)
// and writes the rows to dst on be, the draft's device.
func (f *farSide) lookUp(ctx context.Context, be kernels.Backend, dst kernels.Tensor, tokens []int32, embd int) error {
	n := len(tokens) * embd
	if err := f.target.lookUp(ctx, tokens, f.emb[:n]); err != nil {
		return err
	}
	if err := be.Write(dst.RowSlice(0, len(tokens)), kernels.F32Bytes(f.emb[:n])); err != nil {
		return fmt.Errorf("model: draft embedding: %w", err)
	}
	return nil
}

// farHeld is what a head-sharing draft holds on the target's devices: its
// buffers there, by backend, and the programs of its head's shards; the
// draft's Close releases them together.
type farHeld struct {
	bufs  map[kernels.Backend][]kernels.Buffer
	progs []*programs
}

// alloc allocates on be and remembers the buffer for release.
func (f *farHeld) alloc(be kernels.Backend, label kernels.Label, size int64) (kernels.Buffer, error) {
	buf, err := be.Alloc(label, size)
	if err != nil {
		return nil, err
	}
	if f.bufs == nil {
		f.bufs = map[kernels.Backend][]kernels.Buffer{}
	}
	f.bufs[be] = append(f.bufs[be], buf)
	return buf, nil
}

// programs are a new shard's programs on be (where, in messages),
// remembered for release.
func (f *farHeld) programs(be kernels.Backend, where string) *programs {
	p := newPrograms(be, where)
	f.progs = append(f.progs, &p)
	return &p
}

// release closes the programs, frees every buffer, and forgets them.
func (f *farHeld) release() error {
	var errs []error
	for _, p := range f.progs {
		errs = append(errs, p.close())
	}
	for be, bufs := range f.bufs {
		for _, b := range bufs {
			errs = append(errs, be.Free(b))
		}
	}
	f.bufs, f.progs = nil, nil
	return errors.Join(errs...)
}

// draftDevice checks that plan p fits and gives the draft mp (a kind of
// draft, in messages) one device, and returns it and its backend.
func draftDevice(p *plan.Plan, mp *plan.ModelPlan, backends map[int]kernels.Backend, kind string) (int, kernels.Backend, error) {
	if !p.Fits {
		return 0, nil, fmt.Errorf("model: %s: the plan does not fit its devices: %w", mp.Role, ErrBadParam)
	}
	if len(mp.Placement.Devices) != 1 {
		return 0, nil, fmt.Errorf("model: %s over devices %v: %w (one device)", kind, mp.Placement.Devices, ErrUnsupported)
	}
	dev := mp.Placement.Devices[0]
	be, ok := backends[dev]
	if !ok {
		return 0, nil, fmt.Errorf("model: draft: no backend for device %d", dev)
	}
	return dev, be, nil
}

// reserveWorkspace reserves the plan's workspace on device dev where its
// backend keeps one (a CUDA backend's, at the plan's figure).
func reserveWorkspace(be kernels.Backend, p *plan.Plan, dev int) error {
	r, ok := be.(reserver)
	if !ok {
		return nil
	}
	for _, b := range p.Devices {
		if b.Device.Index == dev {
			if err := r.Reserve(b.Workspace); err != nil {
				return fmt.Errorf("model: workspace on device %d: %w", dev, err)
			}
		}
	}
	return nil
}

// allocDraftBuffers allocates the plan's buffers of a one-device draft
// that borrows the target's head, each viewed as [Dims[1], Dims[0]]: on
// the draft's device through l, elsewhere through far. shard binds a
// buffer for the borrowed head's rows on its device (the head's roles on
// the draft's own device too) and reports whether it did; local binds the
// rest, the draft's own (or refuses one), and a buffer on a device that
// runs none of the draft is refused.
func allocDraftBuffers(l *loader, mp *plan.ModelPlan, backends map[int]kernels.Backend, far *farHeld,
	shard func(b plan.Buffer, t kernels.Tensor) bool, local func(b plan.Buffer, t kernels.Tensor) error) error {
	dev := mp.Placement.Devices[0]
	for _, b := range mp.Buffers {
		be := backends[b.Device]
		if be == nil {
			return fmt.Errorf("model: draft buffer %s: no backend for device %d", b.Name(), b.Device)
		}
		label := kernels.Label{Owner: string(mp.Role), Cat: category(b)}
		var buf kernels.Buffer
		var err error
		if b.Device == dev {
			buf, err = l.alloc(label, b.Bytes)
		} else {
			buf, err = far.alloc(be, label, b.Bytes)
		}
		if err != nil {
			return fmt.Errorf("model: draft buffer %s on device %d: %w", b.Name(), b.Device, err)
		}
		t := kernels.NewTensor(buf, b.Type, int(b.Dims[1]), int(b.Dims[0]), 0)
		if shard(b, t) {
			continue
		}
		if b.Device != dev {
			return fmt.Errorf("model: draft buffer %s on device %d, which runs none of it: %w", b.Name(), b.Device, ErrBadParam)
		}
		if err := local(b, t); err != nil {
			return err
		}
	}
	return nil
}

// shardsByDevice pairs the plan's head run with a draft's shards of the
// borrowed head (in the same vocabulary order), by device.
func shardsByDevice[S any](mp *plan.ModelPlan, shards []S) map[int]S {
	byDev := map[int]S{}
	for i, h := range mp.HeadRun {
		if i < len(shards) {
			byDev[h.Device] = shards[i]
		}
	}
	return byDev
}

// headRole reports whether buffers of role r serve the head's rows: on a
// device running a shard of the borrowed head, they are the shard's.
func headRole(r plan.BufferRole) bool {
	return r == plan.RoleLogits || r == plan.RoleTopIDs || r == plan.RoleTopLogits
}

// releaseDraft is a head-sharing draft's Close: it stops target's capture
// (target may be nil), then frees the draft's programs, its own buffers on
// be, and what it holds on the target's devices.
func releaseDraft(target *Model, progs *programs, be kernels.Backend, bufs []kernels.Buffer, far *farHeld) error {
	var errs []error
	if target != nil {
		errs = append(errs, target.Capture(nil, nil, kernels.Tensor{}, nil))
	}
	errs = append(errs, progs.close())
	for _, b := range bufs {
		errs = append(errs, be.Free(b))
	}
	errs = append(errs, far.release())
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("model: close: %w", err)
	}
	return nil
}
