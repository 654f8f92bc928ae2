package model

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/tandem-run/tandem/engine/gguf"
	"github.com/tandem-run/tandem/engine/plan"
	"github.com/tandem-run/tandem/kernels"
	"github.com/tandem-run/tandem/kernels/cpu"
	"github.com/tandem-run/tandem/kernels/quant"
)

// demoDFlash is the DFlash draft trained for the demo target.
const demoDFlash = "../testdata/factory-dflash-F16.gguf"

// countingBackend counts the bytes allocated or uploaded for one owner.
type countingBackend struct {
	kernels.Backend
	owner string
	bytes int64
}

func (c *countingBackend) Alloc(l kernels.Label, size int64) (kernels.Buffer, error) {
	if l.Owner == c.owner {
		c.bytes += size
	}
	return c.Backend.Alloc(l, size)
}

func (c *countingBackend) Upload(l kernels.Label, data []byte) (kernels.Buffer, error) {
	if l.Owner == c.owner {
		c.bytes += int64(len(data))
	}
	return c.Backend.Upload(l, data)
}

// dflashPair is the F16 demo target and a DFlash draft on one CPU device.
type dflashPair struct {
	target *Model
	draft  *DFlash
	tf, df *gguf.File
	be     *countingBackend
}

// loadDFlashPair plans and loads the pair with a context of 128.
func loadDFlashPair(t testing.TB, draftPath string) (*dflashPair, error) {
	t.Helper()
	pr := &dflashPair{}
	pr.tf, pr.df = openDemoPair(t, draftPath)
	cb := cpu.New(cpu.Options{})
	t.Cleanup(func() { cb.Close() })
	pr.be = &countingBackend{Backend: cb, owner: string(plan.Draft)}
	backends := map[int]kernels.Backend{0: pr.be}
	p, target, err := loadDemoTarget(t, pr.tf, pr.df, 32, backends)
	if err != nil {
		return nil, err
	}
	pr.target = target
	if pr.draft, err = LoadDFlash(context.Background(), pr.df, pr.tf, p, p.Draft, pr.target, backends, nil); err != nil {
		return pr, err
	}
	t.Cleanup(func() {
		if err := pr.draft.Close(); err != nil {
			t.Error(err)
		}
	})
	return pr, nil
}

// DFlash files that cannot serve the target are refused with the reason
// and before the draft allocates anything: by the planner where the plan
// cannot be made (it reads the same headers), else by LoadDFlash.
func TestDFlashLoadErrors(t *testing.T) {
	ids := func(v ...int64) []byte {
		var b []byte
		for _, x := range v {
			b = binary.LittleEndian.AppendUint64(b, uint64(x))
		}
		return b
	}
	head := func(rows int64) rawTensor {
		return rawTensor{"output.weight", quant.F32, []int64{384, rows}, make([]byte, 4*384*rows)}
	}
	d2t := func(v ...int64) rawTensor { return rawTensor{"d2t", quant.I64, []int64{int64(len(v))}, ids(v...)} }
	small := rawTensor{"markov_w1.weight", quant.F32, []int64{4, 8192}, make([]byte, 4*4*8192)}
	for _, tc := range []struct {
		name  string
		kv    map[string]any
		extra []rawTensor
		want  error
		says  string
	}{
		{"target block past the target's", map[string]any{"dflash.target_layers": []int32{1, 4, 8}}, nil, errPlan, "reads target block 8"},
		{"hidden size of another target", map[string]any{"dflash.embedding_length": uint32(512)}, nil, errPlan, "hidden size is 512"},
		{"block size 0", map[string]any{"dflash.block_size": uint32(0)}, nil, ErrBadParam, "block size is 0"},
		{"block size absurd", map[string]any{"dflash.block_size": uint32(1 << 20)}, nil, ErrBadParam, "block size is 1048576"},
		{"no mask token", map[string]any{"tokenizer.ggml.mask_token_id": "not a number"}, nil, ErrMissing, "mask token"},
		{"mask outside the vocabulary", map[string]any{"tokenizer.ggml.mask_token_id": uint32(9000)}, nil, ErrBadParam, "mask token 9000"},
		{"no target layers", map[string]any{"dflash.target_layers": []int32{}}, nil, errPlan, "target_layers"},
		{"d2t out of range", nil, []rawTensor{head(2), d2t(5, 9000)}, ErrBadParam, "maps to 9000"},
		{"d2t without a head", nil, []rawTensor{d2t(5, 7)}, ErrMissing, "no head of its own"},
		{"DSpark", nil, []rawTensor{small}, ErrUnsupported, "DSpark"},
		{"DeepSeek-V4 DSpark", map[string]any{"dflash.hyper_connection.count": uint32(4)}, nil, ErrUnsupported, "DeepSeek-V4"},
		{"sliding window", map[string]any{"dflash.attention.sliding_window": uint32(64)}, nil, ErrUnsupported, "sliding-window"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pr, err := loadDFlashPair(t, draftVariant(t, demoDFlash, tc.kv, tc.extra...))
			if tc.want == errPlan && (err == nil || !strings.HasPrefix(err.Error(), "plan: ")) || tc.want != errPlan && !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
			if !strings.Contains(err.Error(), tc.says) {
				t.Errorf("%q does not say %q", err, tc.says)
			}
			if pr != nil && pr.be != nil && pr.be.bytes != 0 {
				t.Errorf("the draft allocated %d bytes before the refusal", pr.be.bytes)
			}
			t.Log(err)
		})
	}
}

// A DFlash file loaded as a model of its own (a target) is refused in
// words, before anything is allocated.
func TestDFlashAsTargetIsRefused(t *testing.T) {
	f := openGGUF(t, demoDFlash)
	_, err := ReadParams(f)
	if !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), "is a draft") {
		t.Fatalf("ReadParams: %v", err)
	}
	cb := cpu.New(cpu.Options{})
	defer cb.Close()
	be := &countingBackend{Backend: cb, owner: string(plan.Target)}
	if _, err := Load(context.Background(), f, be, Options{}); err == nil || be.bytes != 0 {
		t.Fatalf("Load: %v, %d bytes allocated", err, be.bytes)
	} else {
		t.Log(err)
	}
}

// The block's slots see the whole block, not only the slots before them.
// Under causal attention (dflash.attention.causal) the first slot sees the
// anchor and itself, so its logits change; the last slot sees the whole
// block either way, and in a one-layer draft its logits stay the same.
func TestDFlashBlockIsNonCausal(t *testing.T) {
	seq := []int32{1, 872, 198, 2}
	logits := func(path string) []float32 {
		pr, err := loadDFlashPair(t, path)
		if err != nil {
			t.Fatal(err)
		}
		if pr.draft.Params().Layers != 1 {
			t.Skip("the last slot's view is the same only in a one-layer draft")
		}
		if _, err := pr.target.ForwardArgmax(context.Background(), seq[:3], 0, nil); err != nil {
			t.Fatal(err)
		}
		if pr.draft.Len() != 3 {
			t.Fatalf("%d positions injected after a 3-token pass", pr.draft.Len())
		}
		out, err := pr.draft.Block(context.Background(), seq[3], 3, 4)
		if err != nil {
			t.Fatal(err)
		}
		if pr.draft.Len() != 3 {
			t.Errorf("the block's own positions stayed: %d", pr.draft.Len())
		}
		return slices.Clone(out)
	}
	full := logits(demoDFlash)
	causal := logits(draftVariant(t, demoDFlash, map[string]any{"dflash.attention.causal": true}))
	v := len(full) / 4
	if slices.Equal(full[:v], causal[:v]) {
		t.Error("the first slot's logits are the same with causal attention")
	}
	if !slices.Equal(full[3*v:], causal[3*v:]) {
		t.Error("the last slot's logits changed with causal attention")
	}
}

// recordStates has the pair's target keep a float64 copy of the states it
// hands the draft, by position, before the draft encodes them.
func (pr *dflashPair) recordStates(t *testing.T) *[][]float64 {
	t.Helper()
	var states [][]float64
	features := pr.draft.s.hidden
	err := pr.target.Capture(pr.draft.params.TargetLayers, pr.be, features, func(pos, n int) error {
		host := make([]float32, n*features.Cols)
		if err := pr.be.Read(kernels.F32Bytes(host), features.RowSlice(0, n)); err != nil {
			return err
		}
		for i := range n {
			row := make([]float64, features.Cols)
			for j := range row {
				row[j] = float64(host[i*features.Cols+j])
			}
			states = append(states[:pos+i], row)
		}
		return pr.draft.Encode(context.Background(), pos, n)
	})
	if err != nil {
		t.Fatal(err)
	}
	return &states
}

// reference is the block pass written from llama.cpp's description
// (dflash_params.go) in float64, sharing nothing with the kernels: the
// states of the positions before the anchor become every layer's K and V,
// the block [anchor, mask...] attends them and itself, and each slot after
// the anchor gets the head's logits.
func (pr *dflashPair) reference(t *testing.T, states [][]float64, anchor int32, k int) [][]float64 {
	d := pr.draft.params
	r := newRefModel(t, d.Params, pr.df)
	head := newRefModel(t, d.Params, pr.tf).tensor("output.weight")
	emb := newRefModel(t, d.Params, pr.tf).tensor("token_embd.weight")
	eps := float64(d.NormEps)
	pos0 := len(states)
	headNorm := func(v []float64, w []float64) {
		for o := 0; o < len(v); o += d.HeadDim {
			copy(v[o:], rmsnorm(v[o:o+d.HeadDim], w, eps))
		}
	}
	gs := make([][]float64, pos0)
	for p, s := range states {
		gs[p] = rmsnorm(matvec(r.tensor("fc.weight"), s), r.tensor("enc.output_norm.weight"), eps)
	}
	xs := make([][]float64, k+1)
	for i := range xs {
		tok := d.MaskToken
		if i == 0 {
			tok = anchor
		}
		xs[i] = slices.Clone(emb[int(tok)*d.Embd : (int(tok)+1)*d.Embd])
	}
	for l := range d.Layers {
		w := func(s string) []float64 { return r.tensor(fmt.Sprintf("blk.%d.%s.weight", l, s)) }
		var ks, vs [][]float64
		for p, g := range gs {
			kk := matvec(w("attn_k"), g)
			headNorm(kk, w("attn_k_norm"))
			r.rope(kk, p)
			ks, vs = append(ks, kk), append(vs, matvec(w("attn_v"), g))
		}
		qs := make([][]float64, len(xs))
		for i, x := range xs {
			h := rmsnorm(x, w("attn_norm"), eps)
			q, kk := matvec(w("attn_q"), h), matvec(w("attn_k"), h)
			headNorm(q, w("attn_q_norm"))
			headNorm(kk, w("attn_k_norm"))
			r.rope(q, pos0+i)
			r.rope(kk, pos0+i)
			qs[i] = q
			ks, vs = append(ks, kk), append(vs, matvec(w("attn_v"), h))
		}
		for i := range xs {
			attn := make([]float64, d.Heads*d.HeadDim)
			for hd := range d.Heads {
				g := hd / (d.Heads / d.KVHeads)
				q := qs[i][hd*d.HeadDim : (hd+1)*d.HeadDim]
				scores := make([]float64, len(ks))
				m := math.Inf(-1)
				for j := range ks {
					var s float64
					for e, v := range q {
						s += v * ks[j][g*d.HeadDim+e]
					}
					scores[j] = s / math.Sqrt(float64(d.HeadDim))
					m = max(m, scores[j])
				}
				var sum float64
				for j := range scores {
					scores[j] = math.Exp(scores[j] - m)
					sum += scores[j]
				}
				for j, s := range scores {
					for e := range d.HeadDim {
						attn[hd*d.HeadDim+e] += s / sum * vs[j][g*d.HeadDim+e]
					}
				}
			}
			o := matvec(w("attn_output"), attn)
			for e := range xs[i] {
				xs[i][e] += o[e]
			}
		}
		for _, x := range xs {
			h := rmsnorm(x, w("ffn_norm"), eps)
			g, u := matvec(w("ffn_gate"), h), matvec(w("ffn_up"), h)
			for e := range g {
				g[e] = g[e] / (1 + math.Exp(-g[e])) * u[e]
			}
			o := matvec(w("ffn_down"), g)
			for e := range x {
				x[e] += o[e]
			}
		}
	}
	out := make([][]float64, k)
	for i := range out {
		out[i] = matvec(head, rmsnorm(xs[i+1], r.tensor("output_norm.weight"), eps))
	}
	return out
}

// The block's logits equal the float64 reference, after the target's
// prompt pass and again after a verification pass and a rollback, when
// the injected positions past the history's are stale.
func TestDFlashMatchesReference(t *testing.T) {
	pr, err := loadDFlashPair(t, demoDFlash)
	if err != nil {
		t.Fatal(err)
	}
	states := pr.recordStates(t)
	seq := demoSequence(t)
	ctx := context.Background()
	check := func(n, k int) {
		t.Helper()
		got, err := pr.draft.Block(ctx, seq[n], n, k)
		if err != nil {
			t.Fatal(err)
		}
		ref := pr.reference(t, (*states)[:n], seq[n], k)
		v := len(got) / k
		var worst float64
		for i := range ref {
			worst = max(worst, worstDifference(t, got[i*v:(i+1)*v], ref[i]))
		}
		t.Logf("%d positions, block of %d: worst relative difference %.2e", n, k+1, worst)
		if worst > 1e-4 {
			t.Errorf("%d positions, block of %d: departs from the reference by %.2e", n, k+1, worst)
		}
	}
	n := 20
	if _, err := pr.target.Forward(ctx, seq[:n], 0, nil); err != nil {
		t.Fatal(err)
	}
	check(n, pr.draft.MaxDraft())
	// A verification of 5 rows of which 2 are kept: the target runs 5
	// positions and rolls back to n+2; the draft's states past it are
	// stale until the next pass replaces them.
	if _, err := pr.target.Forward(ctx, seq[n:n+5], n, nil); err != nil {
		t.Fatal(err)
	}
	if err := pr.target.Truncate(n + 2); err != nil {
		t.Fatal(err)
	}
	if err := pr.draft.Truncate(n + 2); err != nil {
		t.Fatal(err)
	}
	check(n+2, 3)
}

// BlockTop finds each slot's top where the head runs: the same ids as the
// argmax of Block's logits (the lowest id on ties) and their softmax
// probabilities, for every block length and after blocks of other
// lengths (the two share the block's buffers).
func TestDFlashBlockTopIsBlocks(t *testing.T) {
	pr, err := loadDFlashPair(t, demoDFlash)
	if err != nil {
		t.Fatal(err)
	}
	if !pr.draft.localTops() {
		t.Fatal("the demo pair on one device finds its tops on the host")
	}
	seq := demoSequence(t)
	ctx := context.Background()
	n := 24
	if _, err := pr.target.Forward(ctx, seq[:n], 0, nil); err != nil {
		t.Fatal(err)
	}
	for _, k := range []int{1, pr.draft.MaxDraft(), 3, 2} {
		tops, err := pr.draft.BlockTop(ctx, seq[n], n, k)
		if err != nil {
			t.Fatal(err)
		}
		got := slices.Clone(tops)
		logits, err := pr.draft.Block(ctx, seq[n], n, k)
		if err != nil {
			t.Fatal(err)
		}
		v := len(logits) / k
		for i, g := range got {
			want := topOf(logits[i*v : (i+1)*v])
			if g.ID != want.ID || math.Abs(g.P-want.P) > 1e-5*want.P {
				t.Errorf("block of %d, slot %d: top %d p %.6f, from the logits %d p %.6f", k, i, g.ID, g.P, want.ID, want.P)
			}
		}
	}
}

// One DFlash block costs about one draft pass whatever its size: the time
// per block for 1, 3 and 7 drafted tokens (the pass reads the same weights;
// only the rows grow), with the demo pair on one CPU.
func BenchmarkDFlashBlock(b *testing.B) {
	pr, err := loadDFlashPair(b, demoDFlash)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	seq := make([]int32, 64)
	for i := range seq {
		seq[i] = int32(100 + i)
	}
	if _, err := pr.target.ForwardArgmax(ctx, seq, 0, nil); err != nil {
		b.Fatal(err)
	}
	for _, k := range []int{1, 3, 7} {
		if k > pr.draft.MaxDraft() {
			continue
		}
		b.Run(fmt.Sprintf("k=%d", k), func(b *testing.B) {
			for b.Loop() {
				if _, err := pr.draft.BlockTop(ctx, 5, len(seq), k); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
