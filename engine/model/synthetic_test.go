package model

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tandem-run/tandem/engine/gguf"
	"github.com/tandem-run/tandem/kernels"
	"github.com/tandem-run/tandem/kernels/cpu"
	"github.com/tandem-run/tandem/kernels/quant"
)

// synth describes a small random model written as a GGUF file: the
// architectures and features the demo files do not cover (qwen2 biases,
// an untied llama head, MHA without GQA) and the broken files Load must
// refuse by name.
type synth struct {
	arch                         string
	embd, layers, heads, kvHeads int
	ff, vocab                    int
	experts, used                int // qwen3moe: experts per block, experts per token (ff is one expert's width)
	tied                         bool
	weightType                   quant.Type
	drop                         string // a tensor left out
	reshape                      string // a tensor written with a wrong shape
}

func (s synth) write(t *testing.T) string {
	t.Helper()
	rng := rand.New(rand.NewPCG(7, uint64(s.embd)))
	hd := s.embd / s.heads
	var w gguf.Writer
	w.AddKV("general.architecture", s.arch)
	for k, v := range map[string]uint32{
		"embedding_length": uint32(s.embd), "block_count": uint32(s.layers),
		"attention.head_count": uint32(s.heads), "attention.head_count_kv": uint32(s.kvHeads),
		"feed_forward_length": uint32(s.ff), "context_length": 256,
	} {
		w.AddKV(s.arch+"."+k, v)
	}
	if s.experts > 0 {
		w.AddKV(s.arch+".expert_count", uint32(s.experts))
		w.AddKV(s.arch+".expert_used_count", uint32(s.used))
		w.AddKV(s.arch+".expert_feed_forward_length", uint32(s.ff))
	}
	w.AddKV(s.arch+".attention.layer_norm_rms_epsilon", float32(1e-5))
	w.AddKV(s.arch+".rope.freq_base", float32(1e4))
	tokens := make([]string, s.vocab)
	for i := range tokens {
		tokens[i] = fmt.Sprintf("t%d", i)
	}
	w.AddKV("tokenizer.ggml.tokens", tokens)

	add := func(name string, typ quant.Type, scale float64, dims ...int64) {
		if name == s.drop {
			return
		}
		if name == s.reshape {
			dims[0] *= 2
		}
		n := int64(1)
		for _, d := range dims {
			n *= d
		}
		vals := make([]float32, n)
		for i := range vals {
			vals[i] = float32(rng.NormFloat64() * scale)
			if scale == 0 { // norm weights: around 1
				vals[i] = 1 + float32(rng.NormFloat64()*0.1)
			}
		}
		rb, err := typ.RowBytes(n)
		if err != nil {
			t.Fatal(err)
		}
		data := make([]byte, rb)
		if err := quant.Quantize(typ, vals, data); err != nil {
			t.Fatal(err)
		}
		if err := w.AddTensor(name, typ, dims, data); err != nil {
			t.Fatal(err)
		}
	}
	e, q, kv, ff := int64(s.embd), int64(s.heads*hd), int64(s.kvHeads*hd), int64(s.ff)
	wt := s.weightType
	add("token_embd.weight", wt, 1, e, int64(s.vocab))
	add("output_norm.weight", quant.F32, 0, e)
	if !s.tied {
		add("output.weight", wt, 0.2, e, int64(s.vocab))
	}
	for l := range s.layers {
		b := func(n string) string { return fmt.Sprintf("blk.%d.%s", l, n) }
		add(b("attn_norm.weight"), quant.F32, 0, e)
		add(b("attn_q.weight"), wt, 0.2, e, q)
		add(b("attn_k.weight"), wt, 0.2, e, kv)
		add(b("attn_v.weight"), wt, 0.2, e, kv)
		add(b("attn_output.weight"), wt, 0.2, q, e)
		add(b("ffn_norm.weight"), quant.F32, 0, e)
		if x := int64(s.experts); x > 0 {
			add(b("ffn_gate_inp.weight"), quant.F32, 0.5, e, x)
			add(b("ffn_gate_exps.weight"), wt, 0.2, e, ff, x)
			add(b("ffn_up_exps.weight"), wt, 0.2, e, ff, x)
			add(b("ffn_down_exps.weight"), wt, 0.2, ff, e, x)
		} else {
			add(b("ffn_gate.weight"), wt, 0.2, e, ff)
			add(b("ffn_up.weight"), wt, 0.2, e, ff)
			add(b("ffn_down.weight"), wt, 0.2, ff, e)
		}
		if s.arch == "qwen2" {
			add(b("attn_q.bias"), quant.F32, 0.5, q)
			add(b("attn_k.bias"), quant.F32, 0.5, kv)
			add(b("attn_v.bias"), quant.F32, 0.5, kv)
		}
		if s.arch == "qwen3" || s.arch == "qwen3moe" {
			add(b("attn_q_norm.weight"), quant.F32, 0, int64(hd))
			add(b("attn_k_norm.weight"), quant.F32, 0, int64(hd))
		}
	}
	path := filepath.Join(t.TempDir(), s.arch+".gguf")
	if err := w.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	return path
}

func small(arch string) synth {
	s := synth{arch: arch, embd: 64, layers: 2, heads: 4, kvHeads: 2, ff: 96, vocab: 100, weightType: quant.F32}
	if arch == "qwen3moe" {
		s.experts, s.used, s.ff = 8, 2, 32
	}
	return s
}

func loadSynth(t *testing.T, s synth, opts Options) (*Model, *gguf.File, error) {
	t.Helper()
	f := openGGUF(t, s.write(t))
	be := cpu.New(cpu.Options{Threads: 2})
	t.Cleanup(func() { be.Close() })
	m, err := Load(context.Background(), f, be, opts)
	if err == nil {
		t.Cleanup(func() { m.Close() })
	}
	return m, f, err
}

// TestSyntheticArchitectures runs each architecture, with and without a
// tied head, with grouped and ungrouped KV heads, against the float64
// reference — including qwen2's biases, which no demo file has.
func TestSyntheticArchitectures(t *testing.T) {
	for _, s := range []synth{
		small("llama"), small("qwen2"), small("qwen3"), small("qwen3moe"),
		func() synth { s := small("qwen3moe"); s.weightType, s.used = quant.F16, 3; return s }(),
		func() synth { s := small("llama"); s.tied, s.kvHeads = true, 4; return s }(),
		func() synth { s := small("qwen2"); s.weightType = quant.F16; return s }(),
	} {
		t.Run(fmt.Sprintf("%s/tied=%v/kv=%d/%v", s.arch, s.tied, s.kvHeads, s.weightType), func(t *testing.T) {
			m, f, err := loadSynth(t, s, Options{Context: 64})
			if err != nil {
				t.Fatal(err)
			}
			if m.TiedHead() != s.tied {
				t.Errorf("TiedHead() = %v", m.TiedHead())
			}
			seq := []int32{3, 14, 15, 92, 65, 35, 89, 79, 32, 38}
			logits, err := m.Forward(context.Background(), seq, 0, allRows(len(seq)))
			if err != nil {
				t.Fatal(err)
			}
			want := newRefModel(t, m.Params(), f).logits(seq)
			for pos, row := range want {
				scale := maxAbsF64(row)
				for id, v := range row {
					if d := math.Abs(float64(logits[pos*s.vocab+id]) - v); d > 1e-4*scale {
						t.Fatalf("pos %d id %d: %g, reference %g", pos, id, logits[pos*s.vocab+id], v)
					}
				}
			}
		})
	}
}

func maxAbsF64(v []float64) float64 {
	m := 0.0
	for _, x := range v {
		m = max(m, math.Abs(x))
	}
	return m
}

// TestBadFiles: a file Load cannot run is refused before anything is
// generated, with an error that names what is wrong.
func TestBadFiles(t *testing.T) {
	for _, tc := range []struct {
		name   string
		s      synth
		want   error
		naming string
	}{
		{"missing tensor", func() synth { s := small("llama"); s.drop = "blk.1.ffn_up.weight"; return s }(), ErrMissing, "blk.1.ffn_up.weight"},
		{"wrong shape", func() synth { s := small("qwen3"); s.reshape = "blk.0.attn_k.weight"; return s }(), ErrShape, "blk.0.attn_k.weight"},
		{"unknown architecture", func() synth { s := small("llama"); s.arch = "mamba"; return s }(), ErrUnsupported, "mamba"},
		{"unsupported type", func() synth { s := small("llama"); s.weightType = quant.Q8_1; return s }(), ErrUnsupported, "output.weight"},
		{"missing experts", func() synth { s := small("qwen3moe"); s.drop = "blk.1.ffn_down_exps.weight"; return s }(), ErrMissing, "blk.1.ffn_down_exps.weight"},
		{"missing router", func() synth { s := small("qwen3moe"); s.drop = "blk.0.ffn_gate_inp.weight"; return s }(), ErrMissing, "blk.0.ffn_gate_inp.weight"},
		{"experts of a wrong shape", func() synth { s := small("qwen3moe"); s.reshape = "blk.1.ffn_gate_exps.weight"; return s }(), ErrShape, "blk.1.ffn_gate_exps.weight"},
		{"router of a wrong shape", func() synth { s := small("qwen3moe"); s.reshape = "blk.0.ffn_gate_inp.weight"; return s }(), ErrShape, "blk.0.ffn_gate_inp.weight"},
		{"more experts used than exist", func() synth { s := small("qwen3moe"); s.used = 9; return s }(), ErrBadParam, "9 of 8 experts"},
		{"experts in a dense architecture", func() synth { s := small("qwen3moe"); s.arch = "qwen3"; return s }(), ErrUnsupported, "expert_count"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := loadSynth(t, tc.s, Options{})
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.naming) {
				t.Fatalf("Load: %v; want %v naming %q", err, tc.want, tc.naming)
			}
		})
	}
}

// TestMoEDecodeMatchesBatch: a qwen3moe model decoding token by token gives
// the logits of the whole sequence run as one batch, bit for bit, as the
// expert products are single-row ones whatever the batch; a verification
// batch after a rollback does too.
func TestMoEDecodeMatchesBatch(t *testing.T) {
	s := small("qwen3moe")
	s.weightType = quant.Q8_0
	m, _, err := loadSynth(t, s, Options{Context: 64})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	seq := []int32{3, 14, 15, 92, 65, 35, 89, 79, 32, 38, 46, 26}
	batch, err := m.Forward(ctx, seq, 0, allRows(len(seq)))
	if err != nil {
		t.Fatal(err)
	}
	batch = append([]float32(nil), batch...)
	for i, tok := range seq {
		row, err := m.Forward(ctx, []int32{tok}, i, nil)
		if err != nil {
			t.Fatal(err)
		}
		for id, v := range row {
			if v != batch[i*s.vocab+id] {
				t.Fatalf("pos %d id %d: decode %g, batch %g", i, id, v, batch[i*s.vocab+id])
			}
		}
	}
	// Roll back to 5 and verify the rest as one batch.
	rest, err := m.Forward(ctx, seq[5:], 5, allRows(len(seq)-5))
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range rest {
		if v != batch[5*s.vocab+i] {
			t.Fatalf("verification row %d id %d: %g, batch %g", i/s.vocab, i%s.vocab, v, batch[5*s.vocab+i])
		}
	}
}

// TestForwardLimits: inputs past the context, gaps in the cache, unknown
// token ids and bad output rows are errors, and the model stays usable.
func TestForwardLimits(t *testing.T) {
	m, _, err := loadSynth(t, small("llama"), Options{Context: 16, Batch: 4})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	toks := func(n int) []int32 { return make([]int32, n) }
	for _, tc := range []struct {
		name   string
		tokens []int32
		pos    int
		out    []int
		want   error
	}{
		{"past the context", toks(17), 0, nil, ErrContext},
		{"gap", toks(1), 3, nil, ErrPosition},
		{"unknown token", []int32{1, 100}, 0, nil, ErrToken},
		{"rows out of order", toks(5), 0, []int{3, 1}, ErrBadParam},
		{"no tokens", nil, 0, nil, ErrBadParam},
	} {
		if _, err := m.Forward(ctx, tc.tokens, tc.pos, tc.out); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
	// Chunked (batch 4) and token-by-token passes agree, and rollback
	// reproduces the same logits.
	seq := []int32{5, 6, 7, 8, 9, 10, 11, 12, 13, 14}
	all, err := m.Forward(ctx, seq, 0, allRows(len(seq)))
	if err != nil {
		t.Fatal(err)
	}
	want := append([]float32(nil), all[len(all)-100:]...)
	if err := m.Truncate(6); err != nil {
		t.Fatal(err)
	}
	var last []float32
	for i, tok := range seq[6:] {
		if last, err = m.Forward(ctx, []int32{tok}, 6+i, nil); err != nil {
			t.Fatal(err)
		}
	}
	for i := range want {
		if math.Abs(float64(last[i]-want[i])) > 1e-4*math.Abs(float64(want[i]))+1e-5 {
			t.Fatalf("logit %d after rollback and decode: %g, batched %g", i, last[i], want[i])
		}
	}
	ctxDone, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := m.Forward(ctxDone, seq, 0, nil); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled forward: %v", err)
	}
	// K and V, F32, for every block and position.
	p := m.Params()
	kv := int64(2 * p.Layers * 16 * p.KVHeads * p.HeadDim * 4)
	if got := m.Usage()[0][kernels.Label{Owner: "target", Cat: kernels.KV}]; got != kv {
		t.Errorf("KV usage %d, want %d", got, kv)
	}
}
