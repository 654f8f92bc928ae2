// Command synthmodel writes GGUF files of real model shapes, so speed and
// memory can be measured without downloading models. With random weights:
//
//	synthmodel -shape qwen3-1.7b -type Q4_K_M -vocab vocab-qwen3.gguf -o q.gguf
//
// or inflated from a small trained model, keeping its next-token function
// (inflate.go says how), and then its EAGLE-3 draft against that target:
//
//	synthmodel -inflate factory-target-F16.gguf -shape qwen3-8b -type Q4_K_M -o t.gguf
//	synthmodel -inflate factory-eagle3-F16.gguf -target t.gguf -shape qwen3-8b -type F16 -o e.gguf
//
// or its DFlash draft, at the shape of a real DFlash draft for that target
// (inflate_dflash.go):
//
//	synthmodel -inflate factory-dflash-F16.gguf -target t.gguf -shape qwen3-8b -type F16 -o d.gguf
//
// qwen3-30b-a3b is a qwen3moe (128 experts, 8 a token) and takes random
// weights only:
//
//	synthmodel -shape qwen3-30b-a3b -type Q4_K_M -vocab vocab-qwen3.gguf -o moe.gguf
//
// The tokenizer (and so the vocabulary size) is copied from a vocabulary
// GGUF such as ../shared/testdata/vocab/vocab-qwen3.gguf, padded as the
// Hugging Face conversion pads Qwen's to the embedding's row count. Weight
// types follow llama.cpp's choices for each file type (Q4_K_M puts Q6_K on
// the head and on some attn_v/ffn_down), so file sizes match real files.
//
// Weights are a pool of random rows per (type, width) repeated in a
// shifted order: the bytes a kernel reads are as many as a real model's,
// and writing gigabytes takes seconds.
package main

import (
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"strings"

	"github.com/tandem-run/tandem/engine/gguf"
	"github.com/tandem-run/tandem/engine/spec"
	"github.com/tandem-run/tandem/kernels/quant"
	"github.com/tandem-run/tandem/kernels/synth"
)

// shape is a Qwen3 model's hyper-parameters (from its config.json).
// experts > 0 makes it a qwen3moe: every block's FFN is experts routed
// experts of width expertFF, used of them a token.
type shape struct {
	embd, layers, heads, kvHeads, headDim, ff, vocab int
	tied                                             bool
	experts, used, expertFF                          int
}

var shapes = map[string]shape{
	"qwen3-0.6b": {1024, 28, 16, 8, 128, 3072, 151936, true, 0, 0, 0},
	"qwen3-1.7b": {2048, 28, 16, 8, 128, 6144, 151936, true, 0, 0, 0},
	"qwen3-4b":   {2560, 36, 32, 8, 128, 9728, 151936, true, 0, 0, 0},
	"qwen3-8b":   {4096, 36, 32, 8, 128, 12288, 151936, false, 0, 0, 0},
	// Qwen3-30B-A3B's config.json: hidden 2048, 48 layers, 32 query and 4
	// KV heads of 128, intermediate_size 6144 (no dense block uses it:
	// decoder_sparse_step 1, no mlp_only_layers), 128 experts of
	// moe_intermediate_size 768, 8 a token, untied head.
	"qwen3-30b-a3b": {2048, 48, 32, 4, 128, 6144, 151936, false, 128, 8, 768},
}

// defaultDraftVocab is the draft_vocab_size of real EAGLE-3 drafts
// (SpecForge's configs for Qwen3 8B and 32B, Llama 3 8B, DeepSeek V3).
const defaultDraftVocab = 32000

// fileTypes maps a llama.cpp file type name to its general.file_type.
var fileTypes = map[string]uint32{"F16": 1, "Q8_0": 7, "Q4_K_M": 15}

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "synthmodel:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("synthmodel", flag.ContinueOnError)
	shapeName := fs.String("shape", "qwen3-1.7b", "model shape: "+strings.Join(shapeNames(), ", "))
	ftype := fs.String("type", "Q4_K_M", "file type: F16, Q8_0 or Q4_K_M")
	vocabPath := fs.String("vocab", "", "GGUF holding the tokenizer (random weights)")
	inflatePath := fs.String("inflate", "", "trained qwen3 model, or EAGLE-3 or DFlash draft, to inflate to the shape")
	targetPath := fs.String("target", "", "the inflated target an inflated EAGLE-3 or DFlash draft serves")
	draftVocab := fs.Int("draft-vocab", defaultDraftVocab, "an inflated EAGLE-3 draft's own vocabulary: a head over that many target ids and a d2t map (0: borrow the target's head)")
	out := fs.String("o", "", "output path (required)")
	seed := fs.Uint64("seed", 1, "random seed")
	if err := fs.Parse(args); err != nil {
		return err
	}
	s, ok := shapes[*shapeName]
	if !ok {
		return fmt.Errorf("unknown shape %q (have %s)", *shapeName, strings.Join(shapeNames(), ", "))
	}
	if _, ok := fileTypes[*ftype]; !ok || *out == "" || (*vocabPath == "") == (*inflatePath == "") {
		fs.Usage()
		return fmt.Errorf("need -type F16|Q8_0|Q4_K_M, -o, and one of -vocab and -inflate")
	}
	rng := rand.New(rand.NewPCG(*seed, 0x5eed))
	if *inflatePath != "" {
		if s.experts > 0 {
			return fmt.Errorf("shape %s is a mixture of experts: it takes random weights (-vocab), not -inflate", *shapeName)
		}
		return inflateFile(*inflatePath, *targetPath, s, *shapeName, *ftype, *draftVocab, *out, rng)
	}
	w, err := build(s, *shapeName, *ftype, *vocabPath, rng)
	if err != nil {
		return err
	}
	return w.WriteFile(*out)
}

// inflateFile inflates the model at path (with target for an EAGLE-3 or
// DFlash draft) and writes it to out.
func inflateFile(path, target string, s shape, shapeName, ftype string, draftVocab int, out string, rng *rand.Rand) error {
	src, err := openSource(path)
	if err != nil {
		return err
	}
	defer src.f.Close()
	var w *gguf.Writer
	switch {
	case (src.arch == "eagle3" || src.arch == "dflash") && target == "":
		return fmt.Errorf("%s is an %s draft: give -target, the inflated target it serves", path, src.arch)
	case src.arch == "eagle3" || src.arch == "dflash":
		t, err := openInflatedTarget(target)
		if err != nil {
			return err
		}
		defer t.f.Close()
		if src.arch == "dflash" {
			w, err = inflateDFlash(src, t, s, shapeName, ftype, rng)
		} else {
			w, err = inflateEagle3(src, t, s, shapeName, ftype, draftVocab, rng)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
	default:
		if w, _, err = inflateTarget(src, s, shapeName, ftype, 0, rng); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
	}
	return w.WriteFile(out)
}

func shapeNames() []string {
	return []string{"qwen3-0.6b", "qwen3-1.7b", "qwen3-4b", "qwen3-8b", "qwen3-30b-a3b"}
}

// build lays out the metadata and tensors of one synthetic file.
func build(s shape, name, ftype, vocabPath string, rng *rand.Rand) (*gguf.Writer, error) {
	w := &gguf.Writer{}
	arch := "qwen3"
	if s.experts > 0 {
		arch = "qwen3moe"
	}
	w.AddKV("general.architecture", arch)
	w.AddKV("general.name", "synthetic "+name+" "+ftype)
	w.AddKV("general.file_type", fileTypes[ftype])
	w.AddKV("general.quantization_version", uint32(2))
	w.AddKV(arch+".block_count", uint32(s.layers))
	w.AddKV(arch+".context_length", uint32(40960))
	w.AddKV(arch+".embedding_length", uint32(s.embd))
	w.AddKV(arch+".feed_forward_length", uint32(s.ff))
	w.AddKV(arch+".attention.head_count", uint32(s.heads))
	w.AddKV(arch+".attention.head_count_kv", uint32(s.kvHeads))
	w.AddKV(arch+".attention.key_length", uint32(s.headDim))
	w.AddKV(arch+".attention.value_length", uint32(s.headDim))
	w.AddKV(arch+".rope.freq_base", float32(1e6))
	w.AddKV(arch+".attention.layer_norm_rms_epsilon", float32(1e-6))
	if s.experts > 0 {
		w.AddKV(arch+".expert_count", uint32(s.experts))
		w.AddKV(arch+".expert_used_count", uint32(s.used))
		w.AddKV(arch+".expert_feed_forward_length", uint32(s.expertFF))
	}
	if err := addTokenizer(w, vocabPath, s.vocab); err != nil {
		return nil, err
	}

	pools := map[[2]int]*rowPool{}
	// matrix writes a tensor of rows x cols, or with experts > 1 a 3-D
	// expert tensor {cols, rows, experts} (the rows of each expert in turn).
	tensor := func(tname string, typ quant.Type, cols, rows, experts int) error {
		key := [2]int{int(typ), cols}
		p, ok := pools[key]
		if !ok {
			var err error
			if p, err = newRowPool(rng, typ, cols); err != nil {
				return fmt.Errorf("%s: %w", tname, err)
			}
			pools[key] = p
		}
		start := rng.IntN(len(p.rows))
		dims := []int64{int64(cols), int64(rows)}
		if experts > 1 {
			dims = append(dims, int64(experts))
		}
		return w.AddTensorFunc(tname, typ, dims, func(out io.Writer) error {
			return p.write(out, start, rows*max(experts, 1))
		})
	}
	matrix := func(tname string, typ quant.Type, cols, rows int) error { return tensor(tname, typ, cols, rows, 1) }
	norm := func(tname string, n int) error {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(1 + 0.1*rng.NormFloat64())
		}
		data := make([]byte, 4*n)
		if err := quant.Quantize(quant.F32, v, data); err != nil {
			return err
		}
		return w.AddTensor(tname, quant.F32, []int64{int64(n)}, data)
	}

	types := typesFor(ftype, s)
	q, kv := s.heads*s.headDim, s.kvHeads*s.headDim
	if err := matrix("token_embd.weight", types.embd, s.embd, s.vocab); err != nil {
		return nil, err
	}
	for l := 0; l < s.layers; l++ {
		b := fmt.Sprintf("blk.%d.", l)
		for _, err := range []error{
			norm(b+"attn_norm.weight", s.embd),
			matrix(b+"attn_q.weight", types.base, s.embd, q),
			matrix(b+"attn_k.weight", types.base, s.embd, kv),
			matrix(b+"attn_v.weight", types.more(l, s.layers), s.embd, kv),
			matrix(b+"attn_output.weight", types.base, q, s.embd),
			norm(b+"attn_q_norm.weight", s.headDim),
			norm(b+"attn_k_norm.weight", s.headDim),
			norm(b+"ffn_norm.weight", s.embd),
		} {
			if err != nil {
				return nil, err
			}
		}
		var ffn []error
		if s.experts == 0 {
			ffn = []error{
				matrix(b+"ffn_gate.weight", types.base, s.embd, s.ff),
				matrix(b+"ffn_up.weight", types.base, s.embd, s.ff),
				matrix(b+"ffn_down.weight", types.more(l, s.layers), s.ff, s.embd),
			}
		} else {
			// llama.cpp keeps the router in F32 whatever the file type and
			// gives the down experts the more-bits rule of ffn_down.
			ffn = []error{
				matrix(b+"ffn_gate_inp.weight", quant.F32, s.embd, s.experts),
				tensor(b+"ffn_gate_exps.weight", types.base, s.embd, s.expertFF, s.experts),
				tensor(b+"ffn_up_exps.weight", types.base, s.embd, s.expertFF, s.experts),
				tensor(b+"ffn_down_exps.weight", types.more(l, s.layers), s.expertFF, s.embd, s.experts),
			}
		}
		for _, err := range ffn {
			if err != nil {
				return nil, err
			}
		}
	}
	if err := norm("output_norm.weight", s.embd); err != nil {
		return nil, err
	}
	if !s.tied {
		if err := matrix("output.weight", types.head, s.embd, s.vocab); err != nil {
			return nil, err
		}
	}
	return w, nil
}

// tensorTypes are the weight types of one file type.
type tensorTypes struct {
	base, embd, head quant.Type
	// moreBits is the type of attn_v and ffn_down in the layers llama.cpp
	// gives more bits (Q4_K_M: the first and last eighth, every third
	// between).
	moreBits quant.Type
}

func (t tensorTypes) more(layer, layers int) quant.Type {
	if layer < layers/8 || layer >= 7*layers/8 || (layer-layers/8)%3 == 2 {
		return t.moreBits
	}
	return t.base
}

func typesFor(ftype string, s shape) tensorTypes {
	switch ftype {
	case "F16":
		return tensorTypes{quant.F16, quant.F16, quant.F16, quant.F16}
	case "Q8_0":
		return tensorTypes{quant.Q8_0, quant.Q8_0, quant.Q8_0, quant.Q8_0}
	}
	t := tensorTypes{base: quant.Q4_K, embd: quant.Q4_K, head: quant.Q6_K, moreBits: quant.Q6_K}
	if s.tied { // the embedding is the head
		t.embd = quant.Q6_K
	}
	return t
}

// addTokenizer copies every tokenizer.* entry of the vocabulary file,
// padding the token list to rows entries as the Qwen conversion does.
func addTokenizer(w *gguf.Writer, path string, rows int) error {
	f, err := gguf.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	tokens, ok := f.Strings("tokenizer.ggml.tokens")
	if !ok || len(tokens) == 0 || len(tokens) > rows {
		return fmt.Errorf("%s: %d tokens for %d embedding rows", path, len(tokens), rows)
	}
	types, _ := f.Int32s("tokenizer.ggml.token_type")
	for _, kv := range f.KV {
		switch {
		case !strings.HasPrefix(kv.Key, "tokenizer."):
		case kv.Key == "tokenizer.ggml.tokens":
			padded := append([]string(nil), tokens...)
			for i := len(tokens); i < rows; i++ {
				padded = append(padded, fmt.Sprintf("[PAD%d]", i))
			}
			w.AddKV(kv.Key, padded)
		case kv.Key == "tokenizer.ggml.token_type" && len(types) == len(tokens):
			padded := append([]int32(nil), types...)
			for i := len(types); i < rows; i++ {
				padded = append(padded, spec.TokenTypeUnused) // as the conversion marks padding
			}
			w.AddKV(kv.Key, padded)
		default:
			w.AddKV(kv.Key, kv.Value)
		}
	}
	return nil
}

// rowPool holds distinct random rows of one type and width.
type rowPool struct {
	rows [][]byte
}

const poolRows = 61 // prime, so shifted repeats do not line up with shapes

func newRowPool(rng *rand.Rand, typ quant.Type, cols int) (*rowPool, error) {
	rb, err := typ.RowBytes(int64(cols))
	if err != nil {
		return nil, err
	}
	p := &rowPool{rows: make([][]byte, poolRows)}
	for i := range p.rows {
		p.rows[i] = make([]byte, rb)
		if err := synth.Fill(rng, typ, p.rows[i], 0.02); err != nil {
			return nil, err
		}
	}
	return p, nil
}

func (p *rowPool) write(out io.Writer, start, rows int) error {
	for r := 0; r < rows; r++ {
		if _, err := out.Write(p.rows[(start+r)%len(p.rows)]); err != nil {
			return err
		}
	}
	return nil
}
