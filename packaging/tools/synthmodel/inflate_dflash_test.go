package main

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"

	"github.com/tandem-run/tandem/engine/gguf"
	"github.com/tandem-run/tandem/engine/model"
	"github.com/tandem-run/tandem/engine/spec"
	"github.com/tandem-run/tandem/kernels"
)

// demoDFlash is the DFlash draft trained for the demo target.
const demoDFlash = "../../../engine/testdata/factory-dflash-F16.gguf"

// The real drafts' blocks: Qwen3-8B's DFlash draft reads blocks
// 2, 10, 18, 26, 34 in llama.cpp's GGUF (Hugging Face's 1, 9, ..., 33 plus
// one), and the Qwen3-32B draft's ten taps of 64 blocks follow the rule.
func TestDFlashTargetLayers(t *testing.T) {
	for _, c := range []struct {
		blocks, k int
		want      []int
	}{
		{36, 5, []int{2, 10, 18, 26, 34}},
		{28, 5, []int{2, 8, 14, 20, 26}},
		{64, 10, []int{2, 9, 15, 22, 29, 35, 42, 49, 55, 62}},
	} {
		if got := dflashTargetLayers(c.blocks, c.k); !slices.Equal(got, c.want) {
			t.Errorf("%d blocks, %d taps: %v, want %v", c.blocks, c.k, got, c.want)
		}
	}
	taps, at := inflatedTaps([]int{1, 4, 6}, 36)
	if want := []int{1, 4, 6, 26, 34}; !slices.Equal(taps, want) || !slices.Equal(at, []int{0, 1, 2, -1, -1}) {
		t.Errorf("the demo draft's taps at 36 blocks: %v reading %v, want %v reading the first three", taps, at, want)
	}
}

// inflateDFlashTo is inflateTo for the demo DFlash draft against target.
func inflateDFlashTo(t testing.TB, target string, sh shape, shapeName, ftype, dir string) string {
	t.Helper()
	return inflateDraftTo(t, demoDFlash, "dflash", target, ftype, dir, func(s *srcModel, ti *targetInflation) (*gguf.Writer, error) {
		return inflateDFlash(s, ti, sh, shapeName, ftype, rand.New(rand.NewPCG(5, 6)))
	})
}

// dflashPair is a target loaded to feed a DFlash draft.
type dflashPair struct {
	target *model.Model
	draft  *model.DFlash
}

func loadDFlashPair(t *testing.T, targetPath, draftPath string, be kernels.Backend) *dflashPair {
	t.Helper()
	target, draft := loadPair(t, targetPath, draftPath, be, model.LoadDFlash)
	return &dflashPair{target: target, draft: draft}
}

// blocks runs the target on seq[:n] (which hands the draft its states)
// and drafts a block of each length in ks after seq[n]: each slot's logits
// over the first vocab ids, block after block, and the smallest gap
// between their best and the best padding logit.
func (pr *dflashPair) blocks(t *testing.T, seq []int32, n int, ks []int, vocab int) ([][]float32, float64) {
	t.Helper()
	ctx := context.Background()
	if _, err := pr.target.Forward(ctx, seq[:n], 0, nil); err != nil {
		t.Fatal(err)
	}
	margin := math.Inf(1)
	var out [][]float32
	for _, k := range ks {
		logits, err := pr.draft.Block(ctx, seq[n], n, k)
		if err != nil {
			t.Fatal(err)
		}
		v := len(logits) / k
		for i := range k {
			row := logits[i*v : (i+1)*v]
			out = append(out, slices.Clone(row[:vocab]))
			if v > vocab {
				margin = min(margin, float64(slices.Max(row[:vocab])-slices.Max(row[vocab:])))
			}
		}
	}
	return out, margin
}

// checkDFlash compares an inflated DFlash draft serving its inflated
// target with the demo pair: every slot of blocks of 1, 3 and 7 along the
// oracle's sequences proposes the same top token, with logits within 1e-4
// of the largest (the weights are the source's F16 values; the norms'
// weights carry sqrt(n/N) in F32), and padding tokens far below.
func checkDFlash(t *testing.T, target, draft string) {
	o := loadOracle(t)
	be := newBackend(t)
	src := loadDFlashPair(t, demo(t, "factory-target-F16.gguf"), demoDFlash, be)
	inf := loadDFlashPair(t, target, draft, be)
	if got, want := inf.draft.Params().BlockSize, dflashBlock; got != want {
		t.Errorf("inflated block size %d, want the real draft's %d", got, want)
	}
	const vocab = 8192
	d := newDrift()
	for pi, p := range o.Prompts {
		seq := append(slices.Clone(p.IDs), p.Target.Greedy...)
		for n := len(p.IDs); n+1 < len(seq); n += 11 {
			ks := []int{1, 3, src.draft.MaxDraft()}
			want, _ := src.blocks(t, seq, n, ks, vocab)
			got, m := inf.blocks(t, seq, n, ks, vocab)
			d.add(t, got, want, m, fmt.Sprintf("prompt %d, %d tokens, blocks %v, slot", pi, n, ks))
		}
	}
	d.check(t, "slots", 1e-4)
}

func TestInflateDFlash(t *testing.T) {
	dir := t.TempDir()
	target := inflateTo(t, demo(t, "factory-target-F16.gguf"), ciShape, "ci", "F16", dir)
	draft := inflateDFlashTo(t, target, ciShape, "ci", "F16", dir)
	checkDFlashCompatible(t, target, draft)
	checkDFlash(t, target, draft)
}

// checkDFlashCompatible: the inflated target serves its inflated DFlash
// draft, which has the real draft's blocks and taps.
func checkDFlashCompatible(t *testing.T, target, draft string) {
	tf, err := gguf.Open(target)
	if err != nil {
		t.Fatal(err)
	}
	defer tf.Close()
	df, err := gguf.Open(draft)
	if err != nil {
		t.Fatal(err)
	}
	defer df.Close()
	if kind, err := spec.Compatible(tf, df); err != nil || kind != spec.DraftDFlash {
		t.Errorf("%s: %v %v", filepath.Base(draft), kind, err)
	}
	p, err := model.ReadDFlashParams(df)
	if err != nil {
		t.Fatal(err)
	}
	if p.Layers != dflashLayers || len(p.TargetLayers) != dflashTaps {
		t.Errorf("the inflated draft has %d blocks and reads %v: want %d blocks and %d taps", p.Layers, p.TargetLayers, dflashLayers, dflashTaps)
	}
}
