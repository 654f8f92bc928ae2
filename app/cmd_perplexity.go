package app

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/tandem-run/tandem/engine/gguf"
	"github.com/tandem-run/tandem/engine/model"
	"github.com/tandem-run/tandem/engine/tokenizer"
	"github.com/tandem-run/tandem/kernels"
	"github.com/tandem-run/tandem/kernels/cpu"
)

func runPerplexity(ctx context.Context, args []string, out, errOut io.Writer) error {
	fs := newFlags("perplexity", errOut)
	path := fs.String("model", "", "GGUF `file` to score")
	file := fs.String("file", "", "text `file` to score")
	window := fs.Int("ctx", 256, "window length in `tokens`; the second half of each is scored")
	kv := fs.String("kv-type", "f16", "KV cache `type`: f16 or f32")
	threads := fs.Int("threads", 0, "CPU `threads` (0: all cores)")
	asJSON := fs.Bool("json", false, "print a JSON object")
	fs.Usage = func() {
		fmt.Fprintln(errOut, "Usage: tandem perplexity --model M --file F [--ctx 256] [--json]\n\n"+
			"Scores a text as llama.cpp's perplexity tool does: windows of --ctx tokens, each from an\n"+
			"empty cache, the second half of each scored; prints exp(mean negative log-likelihood).")
		fs.PrintDefaults()
	}
	if rest, err := parseFlags(fs, args); err != nil {
		return err
	} else if len(rest) > 0 || *path == "" || *file == "" || *window < 4 {
		fs.Usage()
		return errUsage
	}
	kvType, err := parseKVType(*kv)
	if err != nil {
		return err
	}
	text, err := os.ReadFile(*file)
	if err != nil {
		return err
	}
	lm, err := openLocalModel(ctx, *path, *threads, model.Options{
		Context: *window, Batch: *window, Outputs: *window / 2, KVType: kvType,
	})
	if err != nil {
		return err
	}
	defer lm.Close()
	tokens, err := lm.tok.Encode(string(text), tokenizer.EncodeOptions{ParseSpecial: false, AddSpecial: lm.tok.AddBOS()})
	if err != nil {
		return err
	}
	start := time.Now()
	res, err := model.Perplexity(ctx, lm.m, tokens, *window, func(done, total int) {
		if !*asJSON {
			fmt.Fprintf(errOut, "\rwindow %d/%d", done, total)
		}
	})
	if !*asJSON {
		fmt.Fprintln(errOut)
	}
	if err != nil {
		return err
	}
	secs := time.Since(start).Seconds()
	if *asJSON {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(map[string]any{
			"model": *path, "file": *file, "ctx": *window, "ppl": res.PPL, "nll": res.NLL,
			"scored_tokens": res.Scored, "windows": res.Windows, "text_tokens": len(tokens),
			"seconds": secs, "tok_s": float64(res.Windows**window) / secs,
		})
	}
	_, err = fmt.Fprintf(out, "perplexity %.4f (%d tokens scored in %d windows of %d; %.0f tok/s)\n",
		res.PPL, res.Scored, res.Windows, *window, float64(res.Windows**window)/secs)
	return err
}

// localModel is a model on a CPU backend with its tokenizer, for the
// commands that measure the model itself (perplexity, bench) rather than
// generate through the engine.
type localModel struct {
	f   *gguf.File
	be  *cpu.Backend
	m   *model.Model
	tok *tokenizer.Tokenizer
}

func openLocalModel(ctx context.Context, path string, threads int, opts model.Options) (_ *localModel, err error) {
	lm := &localModel{}
	defer func() {
		if err != nil {
			lm.Close()
		}
	}()
	if lm.f, err = gguf.Open(path); err != nil {
		return nil, err
	}
	if lm.tok, err = tokenizer.FromGGUF(lm.f); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	lm.be = cpu.New(cpu.Options{Threads: threads})
	if lm.m, err = model.Load(ctx, lm.f, lm.be, opts); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return lm, nil
}

// memory is the backend's usage by category, for --json reports.
func (lm *localModel) memory() map[string]int64 {
	out := map[string]int64{}
	for l, n := range lm.be.Usage() {
		out[l.Cat.String()] += n
	}
	return out
}

func (lm *localModel) Close() {
	if lm.m != nil {
		lm.m.Close()
	}
	if lm.be != nil {
		lm.be.Close()
	}
	if lm.f != nil {
		lm.f.Close()
	}
}

// weightBytes is what one decoded token streams: every weight but the
// token embedding, of which it reads one row.
func weightBytes(u kernels.Usage) int64 {
	var n int64
	for l, b := range u {
		if l.Cat == kernels.Weights || l.Cat == kernels.Head {
			n += b
		}
	}
	return n
}
