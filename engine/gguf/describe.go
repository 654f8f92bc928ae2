package gguf

import "sort"

// Description is a model file summarised for people: what `tandem info`
// prints and what the window's model card shows. Fields a file does not
// carry are zero.
type Description struct {
	Path           string      `json:"path"`
	FileBytes      int64       `json:"file_bytes"`
	Architecture   string      `json:"architecture"`
	Name           string      `json:"name"`
	Parameters     int64       `json:"parameters"`
	Layers         int         `json:"layers"`
	EmbeddingWidth int         `json:"embedding_width"`
	Heads          int         `json:"heads"`
	KVHeads        int         `json:"kv_heads"`
	ContextLength  int         `json:"context_length"`
	VocabSize      int         `json:"vocab_size"`
	Tokenizer      string      `json:"tokenizer"`
	PreTokenizer   string      `json:"pre_tokenizer"`
	TiedHead       bool        `json:"tied_head"`
	HasHead        bool        `json:"has_head"`
	HasEmbedding   bool        `json:"has_embedding"`
	ChatTemplate   bool        `json:"chat_template"`
	TensorCount    int         `json:"tensor_count"`
	TypeBytes      []TypeBytes `json:"types"`
	Split          int         `json:"split_files"`
	Version        uint32      `json:"gguf_version"`
}

// TypeBytes is how much of a model is stored in one ggml type.
type TypeBytes struct {
	Type    string `json:"type"`
	Tensors int    `json:"tensors"`
	Bytes   int64  `json:"bytes"`
}

// Describe summarises f from its header alone.
func (f *File) Describe() Description {
	d := Description{
		Path:         f.Path,
		FileBytes:    f.Size,
		Architecture: f.Arch(),
		TensorCount:  len(f.Tensors),
		Split:        len(f.parts),
		Version:      f.Version,
	}
	d.Name, _ = f.String("general.name")
	d.Tokenizer, _ = f.String("tokenizer.ggml.model")
	d.PreTokenizer, _ = f.String("tokenizer.ggml.pre")
	_, d.ChatTemplate = f.String("tokenizer.chat_template")
	d.Layers = f.archInt("block_count")
	d.EmbeddingWidth = f.archInt("embedding_length")
	d.Heads = f.archInt("attention.head_count")
	d.KVHeads = f.archInt("attention.head_count_kv")
	if d.KVHeads == 0 {
		d.KVHeads = d.Heads
	}
	d.ContextLength = f.archInt("context_length")
	if toks, ok := f.Get("tokenizer.ggml.tokens"); ok {
		if a, ok := toks.(Array); ok {
			d.VocabSize = a.Len()
		}
	}
	if d.VocabSize == 0 {
		d.VocabSize = f.archInt("vocab_size")
	}
	_, d.HasHead = f.Tensor("output.weight")
	_, d.HasEmbedding = f.Tensor("token_embd.weight")
	d.TiedHead = !d.HasHead && d.HasEmbedding

	byType := map[string]*TypeBytes{}
	for i := range f.Tensors {
		t := &f.Tensors[i]
		d.Parameters += t.Elements()
		name := t.Type.String()
		tb := byType[name]
		if tb == nil {
			tb = &TypeBytes{Type: name}
			byType[name] = tb
		}
		tb.Tensors++
		tb.Bytes += t.Bytes
	}
	for _, tb := range byType {
		d.TypeBytes = append(d.TypeBytes, *tb)
	}
	sort.Slice(d.TypeBytes, func(i, j int) bool {
		a, b := d.TypeBytes[i], d.TypeBytes[j]
		if a.Bytes != b.Bytes {
			return a.Bytes > b.Bytes
		}
		return a.Type < b.Type
	})
	return d
}

func (f *File) archInt(suffix string) int {
	n, _ := f.ArchUint(suffix)
	return int(n)
}
