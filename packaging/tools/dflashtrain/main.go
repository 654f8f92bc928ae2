// Command dflashtrain is the Go half of making a DFlash block draft for a
// target (dflashtrain.py, beside it, is the PyTorch half):
//
//	dflashtrain dump -target T.gguf -corpus corpus.jsonl -layers 1,4,6 -out DIR
//	dflashtrain pack -target T.gguf -weights DIR/draft -out D-F16.gguf [-type q8_0]
//
// dump runs the target over a corpus (one JSON string a line, chat markup
// parsed as special tokens) with the engine's own kernels and writes what
// training needs: the tokens, the target's next-token choice at each
// position, the inputs of the target blocks the draft reads (the states
// the engine hands a DFlash draft at run time, so training and use see the
// same numbers), and the target's token embedding, output norm and head,
// dequantized. pack writes the trained weights (a manifest and raw F32
// data, from dflashtrain.py) as a llama.cpp DFlash GGUF with the target's
// tokenizer, in F16 or Q8_0.
//
// The files dump writes, all little-endian:
//
//	tokens.i32   [N] token ids of every sequence, one after another
//	next.i32     [N] the target's argmax after each position
//	starts.i32   [S+1] offsets of the sequences in tokens (the last is N)
//	feats.f16    [N, L*n_embd] the captured block inputs, layer by layer
//	embd.f32     [vocab, n_embd]  head.f32 [vocab, n_embd]  norm.f32 [n_embd]
//	meta.json    shapes, layers, mask token, the target's norm epsilon
//
// The demo draft in engine/testdata was made this way on one H200, from
// the Q8_0 demo target (within its rounding of the F16 one):
//
//	python3 dflashtrain.py corpus --out corpus.jsonl --docs 12000 --seed 2
//	dflashtrain dump -target factory-target-Q8_0.gguf -corpus corpus.jsonl -layers 1,4,6 -out /tmp/dump -max-tokens 600000 -threads 16
//	python3 dflashtrain.py train --data /tmp/dump --out /tmp/draft --device cuda --minutes 4 --threads 0 --batch 32 --anchors 16 --lr 2e-3
//	dflashtrain pack -target factory-target-Q8_0.gguf -weights /tmp/draft -out factory-dflash-F16.gguf
//	dflashtrain pack -target factory-target-Q8_0.gguf -weights /tmp/draft -type q8_0 -out factory-dflash-Q8_0.gguf
//
// (4,510 steps in 4 minutes; held-out top-1 by slot 0.49, 0.44, 0.36,
// 0.31, 0.30, 0.28, 0.25; mean accepted run 1.76 tokens.)
package main

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/tandem-run/tandem/engine/gguf"
	"github.com/tandem-run/tandem/engine/model"
	"github.com/tandem-run/tandem/engine/tokenizer"
	"github.com/tandem-run/tandem/kernels"
	"github.com/tandem-run/tandem/kernels/cpu"
	"github.com/tandem-run/tandem/kernels/quant"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: dflashtrain dump|pack [flags]")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "dump":
		err = dump(context.Background(), os.Args[2:])
	case "pack":
		err = pack(os.Args[2:])
	default:
		err = fmt.Errorf("unknown command %q (dump or pack)", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "dflashtrain:", err)
		os.Exit(1)
	}
}

// meta is what dump tells the trainer about the target.
type meta struct {
	Tokens      int     `json:"tokens"`
	Sequences   int     `json:"sequences"`
	Embd        int     `json:"n_embd"`
	Vocab       int     `json:"n_vocab"`
	Layers      []int   `json:"target_layers"`
	TargetDepth int     `json:"target_blocks"`
	NormEps     float32 `json:"norm_eps"`
	RopeBase    float32 `json:"target_rope_base"`
	MaskToken   int32   `json:"mask_token"`
	Target      string  `json:"target"`
}

func dump(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("dump", flag.ContinueOnError)
	targetPath := fs.String("target", "", "target GGUF")
	corpusPath := fs.String("corpus", "", "corpus: one JSON string a line")
	layersFlag := fs.String("layers", "1,4,6", "target blocks whose inputs the draft reads")
	out := fs.String("out", "", "output directory")
	maxLen := fs.Int("ctx", 256, "longest sequence, in tokens (longer ones are cut)")
	maxTokens := fs.Int("max-tokens", 400000, "stop after this many tokens")
	mask := fs.String("mask", "<think>", "the token the draft's masked slots hold")
	threads := fs.Int("threads", 2, "CPU threads")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *targetPath == "" || *corpusPath == "" || *out == "" {
		return errors.New("dump needs -target, -corpus and -out")
	}
	var layers []int
	for _, s := range strings.Split(*layersFlag, ",") {
		l, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil {
			return fmt.Errorf("-layers %q: %w", *layersFlag, err)
		}
		layers = append(layers, l)
	}
	f, err := gguf.Open(*targetPath)
	if err != nil {
		return err
	}
	defer f.Close()
	tok, err := tokenizer.FromGGUF(f)
	if err != nil {
		return err
	}
	maskID, ok := tok.ID(*mask)
	if !ok {
		return fmt.Errorf("the target's vocabulary has no %q for the mask", *mask)
	}
	be := cpu.New(cpu.Options{Threads: *threads})
	defer be.Close()
	m, err := model.Load(ctx, f, be, model.Options{Context: *maxLen, Batch: *maxLen})
	if err != nil {
		return err
	}
	defer m.Close()
	p := m.Params()
	width := len(layers) * p.Embd
	buf, err := be.Alloc(kernels.Label{Owner: "dump", Cat: kernels.Scratch}, int64(*maxLen*width*4))
	if err != nil {
		return err
	}
	defer be.Free(buf)
	feats := kernels.NewTensor(buf, quant.F32, *maxLen, width, 0)
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return err
	}
	files := map[string]*bufio.Writer{}
	for _, name := range []string{"tokens.i32", "next.i32", "feats.f16"} {
		fh, err := os.Create(filepath.Join(*out, name))
		if err != nil {
			return err
		}
		defer fh.Close()
		w := bufio.NewWriterSize(fh, 1<<20)
		files[name] = w
	}
	host := make([]float32, *maxLen*width)
	half := make([]byte, 2*width)
	err = m.Capture(layers, be, feats, func(pos, n int) error {
		if err := be.Read(kernels.F32Bytes(host[:n*width]), feats.RowSlice(0, n)); err != nil {
			return err
		}
		for i := range n {
			if err := quant.Quantize(quant.F16, host[i*width:(i+1)*width], half); err != nil {
				return err
			}
			if _, err := files["feats.f16"].Write(half); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	corpus, err := os.Open(*corpusPath)
	if err != nil {
		return err
	}
	defer corpus.Close()
	sc := bufio.NewScanner(corpus)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	starts := []int32{0}
	total := 0
	for sc.Scan() && total < *maxTokens {
		var text string
		if err := json.Unmarshal(sc.Bytes(), &text); err != nil {
			return fmt.Errorf("corpus line %d: %w", len(starts), err)
		}
		ids, err := tok.Encode(text, tokenizer.EncodeOptions{ParseSpecial: true})
		if err != nil {
			return err
		}
		if len(ids) > *maxLen {
			ids = ids[:*maxLen]
		}
		if len(ids) < 2 {
			continue
		}
		every := make([]int, len(ids))
		for i := range every {
			every[i] = i
		}
		next, err := m.ForwardArgmax(ctx, ids, 0, every)
		if err != nil {
			return err
		}
		if len(next) != len(ids) {
			return fmt.Errorf("%d argmax rows for %d tokens", len(next), len(ids))
		}
		if err := binary.Write(files["tokens.i32"], binary.LittleEndian, ids); err != nil {
			return err
		}
		if err := binary.Write(files["next.i32"], binary.LittleEndian, next); err != nil {
			return err
		}
		total += len(ids)
		starts = append(starts, int32(total))
		if len(starts)%200 == 0 {
			fmt.Fprintf(os.Stderr, "%d sequences, %d tokens\n", len(starts)-1, total)
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	for _, w := range files {
		if err := w.Flush(); err != nil {
			return err
		}
	}
	if err := writeI32(filepath.Join(*out, "starts.i32"), starts); err != nil {
		return err
	}
	for _, t := range []struct{ name, file string }{
		{"token_embd.weight", "embd.f32"}, {"output.weight", "head.f32"}, {"output_norm.weight", "norm.f32"},
	} {
		if err := dequantTo(f, t.name, filepath.Join(*out, t.file)); err != nil {
			return err
		}
	}
	mt := meta{Tokens: total, Sequences: len(starts) - 1, Embd: p.Embd, Vocab: p.Vocab, Layers: layers,
		TargetDepth: p.Layers, NormEps: p.NormEps, RopeBase: p.RopeBase, MaskToken: maskID, Target: *targetPath}
	b, _ := json.MarshalIndent(mt, "", "  ")
	fmt.Fprintf(os.Stderr, "%d sequences, %d tokens\n", mt.Sequences, total)
	return os.WriteFile(filepath.Join(*out, "meta.json"), b, 0o644)
}

func writeI32(path string, v []int32) error {
	fh, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := binary.Write(fh, binary.LittleEndian, v); err != nil {
		fh.Close()
		return err
	}
	return fh.Close()
}

// dequantTo writes tensor name of f as F32.
func dequantTo(f *gguf.File, name, path string) error {
	info, ok := f.Tensor(name)
	if !ok {
		return fmt.Errorf("the target has no %s", name)
	}
	data, err := f.TensorData(info)
	if err != nil {
		return err
	}
	n := int64(1)
	for _, d := range info.Dims {
		n *= d
	}
	vals := make([]float32, n)
	if err := quant.Dequantize(info.Type, data, vals); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return os.WriteFile(path, kernels.F32Bytes(vals), 0o644)
}

// manifest lists the trained tensors in weights.f32 (from dflashtrain.py):
// GGUF names, dims ne0 first, offsets in floats; and the draft's
// hyper-parameters.
type manifest struct {
	Tensors []struct {
		Name   string  `json:"name"`
		Dims   []int64 `json:"dims"`
		Offset int64   `json:"offset"`
	} `json:"tensors"`
	Embd         int     `json:"n_embd"`
	Layers       int     `json:"n_layer"`
	Heads        int     `json:"n_head"`
	KVHeads      int     `json:"n_head_kv"`
	HeadDim      int     `json:"head_dim"`
	FF           int     `json:"n_ff"`
	Ctx          int     `json:"n_ctx"`
	RopeBase     float32 `json:"rope_base"`
	NormEps      float32 `json:"norm_eps"`
	BlockSize    int     `json:"block_size"`
	MaskToken    int32   `json:"mask_token"`
	TargetLayers []int32 `json:"target_layers"`
	Name         string  `json:"name"`
}

func pack(args []string) error {
	fs := flag.NewFlagSet("pack", flag.ContinueOnError)
	targetPath := fs.String("target", "", "the target GGUF (its tokenizer is copied)")
	weights := fs.String("weights", "", "the trainer's output prefix: PREFIX.json and PREFIX.f32")
	out := fs.String("out", "", "the DFlash GGUF to write")
	typ := fs.String("type", "f16", "matrix type: f16 or q8_0 (norms stay F32)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *targetPath == "" || *weights == "" || *out == "" {
		return errors.New("pack needs -target, -weights and -out")
	}
	mtype := quant.F16
	switch strings.ToLower(*typ) {
	case "f16":
	case "q8_0":
		mtype = quant.Q8_0
	default:
		return fmt.Errorf("-type %q (f16 or q8_0)", *typ)
	}
	var man manifest
	b, err := os.ReadFile(*weights + ".json")
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, &man); err != nil {
		return fmt.Errorf("%s.json: %w", *weights, err)
	}
	raw, err := os.ReadFile(*weights + ".f32")
	if err != nil {
		return err
	}
	if len(raw)%4 != 0 {
		return fmt.Errorf("%s.f32: %d bytes", *weights, len(raw))
	}
	vals := make([]float32, len(raw)/4)
	for i := range vals {
		vals[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
	}
	tf, err := gguf.Open(*targetPath)
	if err != nil {
		return err
	}
	defer tf.Close()
	var w gguf.Writer
	const arch = "dflash"
	w.AddKV("general.architecture", arch)
	w.AddKV("general.name", man.Name)
	fileType := uint32(1) // llama.cpp's MOSTLY_F16
	if mtype == quant.Q8_0 {
		fileType = 7
	}
	w.AddKV("general.file_type", fileType)
	w.AddKV(arch+".context_length", uint32(man.Ctx))
	w.AddKV(arch+".embedding_length", uint32(man.Embd))
	w.AddKV(arch+".block_count", uint32(man.Layers))
	w.AddKV(arch+".feed_forward_length", uint32(man.FF))
	w.AddKV(arch+".attention.head_count", uint32(man.Heads))
	w.AddKV(arch+".attention.head_count_kv", uint32(man.KVHeads))
	w.AddKV(arch+".attention.key_length", uint32(man.HeadDim))
	w.AddKV(arch+".attention.value_length", uint32(man.HeadDim))
	w.AddKV(arch+".rope.freq_base", man.RopeBase)
	w.AddKV(arch+".attention.layer_norm_rms_epsilon", man.NormEps)
	w.AddKV(arch+".target_layers", man.TargetLayers)
	w.AddKV(arch+".block_size", uint32(man.BlockSize))
	w.AddKV(arch+".attention.causal", false)
	for _, kv := range tf.KV {
		if strings.HasPrefix(kv.Key, "tokenizer.") && kv.Key != "tokenizer.ggml.mask_token_id" {
			w.AddKV(kv.Key, kv.Value)
		}
	}
	w.AddKV("tokenizer.ggml.mask_token_id", uint32(man.MaskToken))
	for _, t := range man.Tensors {
		n := int64(1)
		for _, d := range t.Dims {
			n *= d
		}
		if t.Offset < 0 || t.Offset+n > int64(len(vals)) {
			return fmt.Errorf("tensor %s: floats %d..%d of %d", t.Name, t.Offset, t.Offset+n, len(vals))
		}
		src := vals[t.Offset : t.Offset+n]
		tt := mtype
		if len(t.Dims) == 1 || t.Dims[0]%32 != 0 {
			tt = quant.F32 // norms stay exact, as llama.cpp's converter keeps them
		}
		data, err := encode(tt, src)
		if err != nil {
			return fmt.Errorf("tensor %s: %w", t.Name, err)
		}
		if err := w.AddTensor(t.Name, tt, t.Dims, data); err != nil {
			return err
		}
	}
	return w.WriteFile(*out)
}

func encode(t quant.Type, src []float32) ([]byte, error) {
	if t == quant.F32 {
		return append([]byte(nil), kernels.F32Bytes(src)...), nil
	}
	size, err := t.RowBytes(int64(len(src)))
	if err != nil {
		return nil, err
	}
	dst := make([]byte, size)
	if err := quant.Quantize(t, src, dst); err != nil {
		return nil, err
	}
	return dst, nil
}
