package app

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/tandem-run/tandem/engine"
)

func runPerplexity(ctx context.Context, args []string, out, errOut io.Writer) error {
	fs := newFlags("perplexity", errOut)
	var ef engineFlags
	ef.registerTarget(fs)
	file := fs.String("file", "", "text `file` to score")
	asJSON := fs.Bool("json", false, "print a JSON object")
	fs.Usage = func() {
		fmt.Fprintln(errOut, "Usage: tandem perplexity [--model M] --file F [--ctx 256] [--backend cpu|cuda] [placement flags] [--json]\n\n"+
			"Scores a text as llama.cpp's perplexity tool does: windows of --ctx tokens, each from an\n"+
			"empty cache, the second half of each scored; prints exp(mean negative log-likelihood).")
		fs.PrintDefaults()
	}
	if rest, err := parseFlags(fs, args); err != nil {
		return err
	} else if len(rest) > 0 || *file == "" {
		fs.Usage()
		return errUsage
	}
	text, err := os.ReadFile(*file)
	if err != nil {
		return err
	}
	cfg, err := ef.config(ctx, errOut)
	if err != nil {
		return err
	}
	// As llama.cpp's -c: the window is the context.
	window := cfg.Context
	if window == 0 {
		window = 256
		cfg.Context = window
	}
	r, err := engine.Load(ctx, cfg, nil)
	if err != nil {
		return err
	}
	defer r.Close()
	start := time.Now()
	res, err := r.Perplexity(ctx, string(text), window, func(done, total int) {
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
			"model": cfg.Target, "file": *file, "ctx": window, "ppl": res.PPL, "nll": res.NLL,
			"scored_tokens": res.Scored, "windows": res.Windows,
			"seconds": secs, "tok_s": float64(res.Windows*window) / secs,
		})
	}
	_, err = fmt.Fprintf(out, "perplexity %.4f (%d tokens scored in %d windows of %d; %.0f tok/s)\n",
		res.PPL, res.Scored, res.Windows, window, float64(res.Windows*window)/secs)
	return err
}
