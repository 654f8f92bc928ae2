// Command hfconvert turns a small Hugging Face checkpoint (config.json and
// model.safetensors) of a qwen3_moe or gemma3_text model into a GGUF file
// laid out as llama.cpp's converter lays it out: its tensor names and
// shapes, its metadata keys, Gemma's norms stored as 1 + w, norms and the
// MoE router in F32. It exists so that the random-weight fixtures of
// packaging/tools/familyfixtures.py become files Tandem and llama.cpp both
// read, at F16, Q8_0 and Q4_K_M:
//
//	hfconvert -in dir -vocab ../shared/models/factory-target-F16.gguf -type F16 -o model.gguf
//
// The tokenizer (every tokenizer.* entry) is copied from -vocab, whose
// token count must equal the config's vocab_size. Given a GGUF as -in (an
// F16 file it wrote), it re-encodes it at -type by the same rules instead:
//
//	hfconvert -in qwen3moe-tiny-F16.gguf -type Q4_K_M -o qwen3moe-tiny-Q4_K_M.gguf
//
// Q4_K_M follows llama.cpp's main rule, not its every special case: Q4_K,
// with Q6_K for the head (the embedding when tied) and for attn_v and
// ffn_down(_exps) in the blocks llama.cpp gives more bits; rows whose
// length is not a multiple of 256 fall back to Q5_0 (for Q4_K) and Q8_0
// (for Q6_K) as llama.cpp's do.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/tandem-run/tandem/engine/gguf"
	"github.com/tandem-run/tandem/kernels/quant"
	"github.com/tandem-run/tandem/kernels/synth"
)

// fileTypes maps a file type name to general.file_type.
var fileTypes = map[string]uint32{"F16": 1, "Q8_0": 7, "Q4_K_M": 15}

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "hfconvert:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("hfconvert", flag.ContinueOnError)
	in := fs.String("in", "", "directory holding config.json and model.safetensors, or a GGUF to re-encode")
	vocab := fs.String("vocab", "", "GGUF whose tokenizer.* entries the output gets")
	ftype := fs.String("type", "F16", "F16, Q8_0 or Q4_K_M")
	name := fs.String("name", "", "general.name (default: the input directory's name)")
	out := fs.String("o", "", "output GGUF")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if strings.HasSuffix(*in, ".gguf") && *out != "" {
		w, err := requantize(*in, *ftype)
		if err != nil {
			return err
		}
		return w.WriteFile(*out)
	}
	if *in == "" || *vocab == "" || *out == "" {
		return fmt.Errorf("-in, -vocab and -o are required")
	}
	if *name == "" {
		*name = filepath.Base(filepath.Clean(*in))
	}
	w, err := build(*in, *vocab, *ftype, *name)
	if err != nil {
		return err
	}
	return w.WriteFile(*out)
}

// build converts the checkpoint in dir to a GGUF writer of file type ftype.
func build(dir, vocab, ftype, name string) (*gguf.Writer, error) {
	ft, ok := fileTypes[ftype]
	if !ok {
		return nil, fmt.Errorf("file type %q (F16, Q8_0 or Q4_K_M)", ftype)
	}
	c, err := readConfig(filepath.Join(dir, "config.json"))
	if err != nil {
		return nil, err
	}
	st, err := readSafetensors(filepath.Join(dir, "model.safetensors"))
	if err != nil {
		return nil, err
	}
	conv, err := convert(st, c)
	if err != nil {
		return nil, err
	}
	w := &gguf.Writer{}
	w.AddKV("general.architecture", conv.arch)
	w.AddKV("general.name", name)
	w.AddKV("general.file_type", ft)
	w.AddKV("general.quantization_version", uint32(2))
	for _, kv := range conv.kv {
		w.AddKV(kv.Key, kv.Value)
	}
	if err := addTokenizer(w, vocab, c.VocabSize); err != nil {
		return nil, err
	}
	for _, t := range conv.tensors {
		typ := typeFor(t, ftype, c.Layers, conv.tied)
		data, err := encode(typ, t.data)
		if err != nil {
			return nil, fmt.Errorf("%s as %v: %w", t.name, typ, err)
		}
		if err := w.AddTensor(t.name, typ, t.dims, data); err != nil {
			return nil, err
		}
	}
	return w, nil
}

// requantize re-encodes the GGUF at path (float weights) as file type
// ftype, its metadata kept but general.file_type.
func requantize(path, ftype string) (*gguf.Writer, error) {
	ft, ok := fileTypes[ftype]
	if !ok {
		return nil, fmt.Errorf("file type %q (F16, Q8_0 or Q4_K_M)", ftype)
	}
	f, err := gguf.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	layers, _ := f.ArchUint("block_count")
	_, hasHead := f.Tensor("output.weight")
	w := &gguf.Writer{}
	for _, kv := range f.KV {
		if kv.Key == "general.file_type" {
			w.AddKV(kv.Key, ft)
			continue
		}
		w.AddKV(kv.Key, kv.Value)
	}
	for i := range f.Tensors {
		info := &f.Tensors[i]
		switch info.Type {
		case quant.F32, quant.F16, quant.BF16:
		default:
			return nil, fmt.Errorf("%s: tensor %q is %v: only float files are re-encoded", path, info.Name, info.Type)
		}
		raw, err := f.TensorData(info)
		if err != nil {
			return nil, err
		}
		t := outTensor{name: info.Name, dims: info.Dims, data: make([]float32, info.Elements()), layer: -1,
			vector: len(info.Dims) == 1 || strings.HasSuffix(info.Name, ".ffn_gate_inp.weight")}
		if err := quant.Dequantize(info.Type, raw, t.data); err != nil {
			return nil, fmt.Errorf("%s: %q: %w", path, info.Name, err)
		}
		if rest, ok := strings.CutPrefix(info.Name, "blk."); ok {
			num, _, _ := strings.Cut(rest, ".")
			if t.layer, err = strconv.Atoi(num); err != nil {
				return nil, fmt.Errorf("%s: tensor %q: block number: %w", path, info.Name, err)
			}
		}
		typ := typeFor(t, ftype, int(layers), !hasHead)
		data, err := encode(typ, t.data)
		if err != nil {
			return nil, fmt.Errorf("%s as %v: %w", t.name, typ, err)
		}
		if err := w.AddTensor(t.name, typ, t.dims, data); err != nil {
			return nil, err
		}
	}
	return w, nil
}

// addTokenizer copies every tokenizer.* entry of the GGUF at path, whose
// vocabulary must have vocab tokens.
func addTokenizer(w *gguf.Writer, path string, vocab int) error {
	f, err := gguf.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	tokens, ok := f.Strings("tokenizer.ggml.tokens")
	if !ok || len(tokens) != vocab {
		return fmt.Errorf("%s: %d tokens, the config's vocab_size is %d", path, len(tokens), vocab)
	}
	for _, kv := range f.KV {
		if strings.HasPrefix(kv.Key, "tokenizer.") {
			w.AddKV(kv.Key, kv.Value)
		}
	}
	return nil
}

// moreBits is llama.cpp's choice of the blocks whose attn_v and ffn_down
// get more bits under Q4_K_M: the first and last eighth, and every third
// between.
func moreBits(layer, layers int) bool {
	return layer < layers/8 || layer >= 7*layers/8 || (layer-layers/8)%3 == 2
}

// typeFor is the storage type of t in a file of type ftype.
func typeFor(t outTensor, ftype string, layers int, tied bool) quant.Type {
	if t.vector {
		return quant.F32
	}
	var typ quant.Type
	switch ftype {
	case "F16":
		return quant.F16
	case "Q8_0":
		typ = quant.Q8_0
	default:
		typ = quant.Q4_K
		head := t.name == "output.weight" || tied && t.name == "token_embd.weight"
		more := t.layer >= 0 && moreBits(t.layer, layers) &&
			(strings.HasSuffix(t.name, ".attn_v.weight") || strings.HasSuffix(t.name, ".ffn_down.weight") ||
				strings.HasSuffix(t.name, ".ffn_down_exps.weight"))
		if head || more {
			typ = quant.Q6_K
		}
	}
	row := t.dims[0]
	if typ.BlockSize() > 0 && row%int64(typ.BlockSize()) != 0 {
		switch typ {
		case quant.Q4_K:
			typ = quant.Q5_0
		case quant.Q6_K:
			typ = quant.Q8_0
		}
	}
	if bs := typ.BlockSize(); bs > 0 && row%int64(bs) != 0 {
		typ = quant.F16
	}
	return typ
}

// encode stores x (whole rows of t's row length) as typ.
func encode(typ quant.Type, x []float32) ([]byte, error) {
	n, err := typ.RowBytes(int64(len(x)))
	if err != nil {
		return nil, err
	}
	dst := make([]byte, n)
	if typ == quant.Q5_0 {
		quantizeQ5_0(x, dst)
		return dst, nil
	}
	if err := synth.Quantize(typ, x, dst); err != nil {
		return nil, err
	}
	return dst, nil
}
