package main

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/tandem-run/tandem/engine/device"
	"github.com/tandem-run/tandem/engine/gguf"
	"github.com/tandem-run/tandem/engine/model"
	"github.com/tandem-run/tandem/engine/plan"
	"github.com/tandem-run/tandem/kernels"
	"github.com/tandem-run/tandem/kernels/cuda"
)

// eagleRound splits a speculative round with an EAGLE-3 draft drafting one
// token (the engine's k=1) into what it costs: the target's verification
// pass of 2 rows without the capture (what the target alone pays for 2
// rows), the same pass capturing the draft's block inputs and fusing them
// (model.Eagle3.Encode, the draft's fc), and the draft's call, a Chain of
// one drafted token after catching up on 1 or 2 positions (a rejected or
// an accepted round). Each is the median of 20 timed calls after 3, wall
// time to the host's read of the result, as the engine sees them; the
// round is a 2-position draft call and a capturing pass back to back.
// With profile, the draft call's and the capturing pass's kernels follow.
func eagleRound(ctx context.Context, c config, be kernels.Backend, gpu *cuda.Backend, dev device.Device, tf *gguf.File) error {
	df, err := gguf.Open(c.eagle)
	if err != nil {
		return err
	}
	defer df.Close()
	p, err := plan.Make(plan.Input{Target: tf, Draft: df, Devices: []device.Device{dev}, Ctx: c.contextSz, KV: plan.SameKV(c.kvType)})
	if err != nil {
		return err
	}
	backends := map[int]kernels.Backend{dev.Index: be}
	target, err := model.LoadPlan(ctx, tf, p, &p.Target, backends, nil)
	if err != nil {
		return err
	}
	defer target.Close()
	draft, err := model.LoadEagle3(ctx, df, tf, p, p.Draft, target, backends, nil)
	if err != nil {
		return err
	}
	defer draft.Close()

	// The prompt's ids are the draft's known tokens (its head covers the
	// first rows of the target's vocabulary).
	vocab := min(target.Params().Vocab, 8192)
	P := min(c.pp, c.contextSz-8)
	prompt := make([]int32, P+1)
	for i := range prompt {
		prompt[i] = int32((i*7919 + 13) % vocab)
	}
	// The target has run prompt[:P] (its states fused), the draft every
	// position but the last.
	if _, err := target.Forward(ctx, prompt[:P], 0, []int{P - 1}); err != nil {
		return err
	}
	if _, err := draft.ForwardTop(ctx, prompt[1:P-1], 0); err != nil {
		return err
	}
	var drafted int32
	draftCall := func(behind int) func() error {
		return func() error {
			at := P - 1 - behind
			if err := draft.Truncate(at); err != nil {
				return err
			}
			ids, _, err := draft.Chain(ctx, prompt[at+1:P], at, 1, 0)
			if err == nil {
				drafted = ids[0]
			}
			return err
		}
	}
	verify := func() error {
		_, err := target.ForwardArgmax(ctx, []int32{prompt[P-1], drafted}, P-1, []int{0, 1})
		return err
	}
	bare := func() error {
		target.PauseCapture(true)
		defer target.PauseCapture(false)
		return verify()
	}
	round := func() error {
		if err := draftCall(2)(); err != nil {
			return err
		}
		return verify()
	}
	var ms [5]float64
	for i, s := range []struct {
		name string
		fn   func() error
	}{{"bare pass", bare}, {"capturing pass", verify}, {"draft 1", draftCall(1)}, {"draft 2", draftCall(2)}, {"round", round}} {
		sec, err := medianCall(time.Now, 20, 3, s.fn)
		if err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
		ms[i] = sec * 1e3
	}
	layer, head, fc := eagleBytes(df)
	fmt.Printf("\n%s with %s (%s), ms: target 2 rows %.3f; capturing + fuse %.3f (+%.3f, fc %.0f MB); "+
		"draft k=1 after 1 position %.3f, after 2 %.3f (layer + head %.0f MB: %.0f GB/s); round %.3f (draft + fuse + host %.3f)\n",
		filepath.Base(c.path), filepath.Base(c.eagle), draftType(df), ms[0], ms[1], ms[1]-ms[0], float64(fc)/1e6,
		ms[2], ms[3], float64(layer+head)/1e6, float64(layer+head)/ms[3]/1e6, ms[4], ms[4]-ms[0])
	if !c.profile || gpu == nil {
		return nil
	}
	for _, s := range []struct {
		name string
		fn   func() error
	}{{"draft k=1 after 2 positions", draftCall(2)}, {"capturing pass of 2 rows", verify}} {
		if err := profileCalls(gpu, s.name, s.fn); err != nil {
			return err
		}
	}
	return nil
}

// profileCalls prints the kernels of 8 eager runs of fn, the largest first.
func profileCalls(gpu *cuda.Backend, name string, fn func() error) error {
	head := func(us float64) string { return fmt.Sprintf("%s: %.0f us of kernels a call\n", name, us) }
	return profiled(gpu, 8, 16, "", head, func(int) error { return fn() })
}

// eagleBytes is the draft's weight bytes a round reads: its decoder layer,
// its head (none where it borrows the target's) and its fc.
func eagleBytes(f *gguf.File) (layer, head, fc int64) {
	for _, t := range f.Tensors {
		switch {
		case t.Name == "output.weight":
			head += t.Bytes
		case t.Name == "fc.weight":
			fc += t.Bytes
		case t.Name == "token_embd.weight" || t.Name == "d2t" || len(t.Dims) < 2:
		default:
			layer += t.Bytes
		}
	}
	return layer, head, fc
}

// draftType is the type of the draft's first matrix, for the line.
func draftType(f *gguf.File) string {
	for _, t := range f.Tensors {
		if len(t.Dims) == 2 {
			return t.Type.String()
		}
	}
	return "?"
}
