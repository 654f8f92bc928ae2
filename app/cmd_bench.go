package app

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"time"

	"github.com/tandem-run/tandem/engine"
	"github.com/tandem-run/tandem/kernels"
)

func runBench(ctx context.Context, args []string, out, errOut io.Writer) error {
	fs := newFlags("bench", errOut)
	var ef engineFlags
	ef.registerTarget(fs)
	prefill := fs.Int("p", 512, "prompt `tokens` processed as one batch")
	decode := fs.Int("n", 128, "`tokens` decoded one at a time")
	reps := fs.Int("r", 3, "timed `repetitions` after one warm-up")
	asJSON := fs.Bool("json", false, "print a JSON object")
	fs.Usage = func() {
		fmt.Fprintln(errOut, "Usage: tandem bench [--model M] [-p 512] [-n 128] [-r 3] [--backend cpu|cuda] [placement flags] [--json]\n\n"+
			"Times prefill (-p tokens in one batch) and greedy decode (-n tokens one by one from an\n"+
			"empty context, as a chat decodes), as llama-bench's pp and tg tests do; prints tokens/s,\n"+
			"mean and spread.")
		fs.PrintDefaults()
	}
	if rest, err := parseFlags(fs, args); err != nil {
		return err
	} else if len(rest) > 0 || *prefill < 0 || *decode < 0 || *prefill+*decode == 0 || *reps < 1 {
		fs.Usage()
		return errUsage
	}
	cfg, err := ef.config(ctx, errOut)
	if err != nil {
		return err
	}
	n := max(*prefill, *decode, 1)
	if cfg.Context == 0 {
		cfg.Context = n
	}
	r, err := engine.Load(ctx, cfg, nil)
	if err != nil {
		return err
	}
	defer r.Close()
	info := r.Info()

	// Random token ids, as llama-bench uses: what is measured is arithmetic,
	// not any particular text.
	rng := rand.New(rand.NewPCG(1, 2))
	tokens := make([]int32, n)
	for i := range tokens {
		tokens[i] = int32(rng.IntN(info.Target.VocabSize))
	}
	var pp, tg []float64
	for rep := range *reps + 1 {
		if *prefill > 0 {
			secs, err := timeIt(func() error {
				_, err := r.Forward(ctx, tokens[:*prefill], 0, nil)
				return err
			})
			if err != nil {
				return err
			}
			if rep > 0 {
				pp = append(pp, float64(*prefill)/secs)
			}
		}
		if *decode > 0 {
			secs, err := timeIt(func() error {
				_, err := r.Decode(ctx, tokens[0], 0, *decode)
				return err
			})
			if err != nil {
				return err
			}
			if rep > 0 {
				tg = append(tg, float64(*decode)/secs)
			}
		}
	}

	ppMean, ppStd := meanStd(pp)
	tgMean, tgStd := meanStd(tg)
	mem := map[string]int64{}
	for l, b := range info.Usage {
		mem[l.Cat.String()] += b
	}
	wb := weightBytes(info.Usage)
	where := cfg.Backend
	if cfg.Placement != nil {
		where = fmt.Sprintf("%d devices", len(r.DeviceUsage()))
	}
	if *asJSON {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(map[string]any{
			"model": cfg.Target, "backend": where, "threads": cfg.Threads,
			"p": *prefill, "n": *decode, "reps": *reps,
			"prefill_tok_s": ppMean, "prefill_tok_s_std": ppStd,
			"decode_tok_s": tgMean, "decode_tok_s_std": tgStd,
			"decode_weight_gb_s": tgMean * float64(wb) / 1e9,
			"memory_bytes":       mem,
		})
	}
	fmt.Fprintf(out, "%s on %s\n", cfg.Target, where)
	if *prefill > 0 {
		fmt.Fprintf(out, "prefill pp%-5d %10.1f ± %.1f tok/s\n", *prefill, ppMean, ppStd)
	}
	if *decode > 0 {
		fmt.Fprintf(out, "decode  tg%-5d %10.1f ± %.1f tok/s  (%.1f GB/s of weights)\n", *decode, tgMean, tgStd, tgMean*float64(wb)/1e9)
	}
	return nil
}

func timeIt(fn func() error) (float64, error) {
	start := time.Now()
	err := fn()
	return time.Since(start).Seconds(), err
}

func meanStd(v []float64) (mean, std float64) {
	if len(v) == 0 {
		return 0, 0
	}
	for _, x := range v {
		mean += x
	}
	mean /= float64(len(v))
	for _, x := range v {
		std += (x - mean) * (x - mean)
	}
	return mean, math.Sqrt(std / float64(len(v)))
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
