package app

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"time"

	"github.com/tandem-run/tandem/engine/model"
)

func runBench(ctx context.Context, args []string, out, errOut io.Writer) error {
	fs := newFlags("bench", errOut)
	path := fs.String("model", "", "GGUF `file` to time")
	prefill := fs.Int("p", 512, "prompt `tokens` processed as one batch")
	decode := fs.Int("n", 128, "`tokens` decoded one at a time")
	reps := fs.Int("r", 3, "timed `repetitions` after one warm-up")
	kv := fs.String("kv-type", "f16", "KV cache `type`: f16 or f32")
	threads := fs.Int("threads", 0, "CPU `threads` (0: all cores)")
	asJSON := fs.Bool("json", false, "print a JSON object")
	fs.Usage = func() {
		fmt.Fprintln(errOut, "Usage: tandem bench --model M [-p 512] [-n 128] [-r 3] [--json]\n\n"+
			"Times prefill (-p tokens in one batch) and decode (-n tokens one by one from an empty\n"+
			"context), as llama-bench's pp and tg tests do; prints tokens/s, mean and spread.")
		fs.PrintDefaults()
	}
	if rest, err := parseFlags(fs, args); err != nil {
		return err
	} else if len(rest) > 0 || *path == "" || *prefill < 0 || *decode < 0 || *prefill+*decode == 0 || *reps < 1 {
		fs.Usage()
		return errUsage
	}
	kvType, err := parseKVType(*kv)
	if err != nil {
		return err
	}
	n := max(*prefill, *decode, 1)
	lm, err := openLocalModel(ctx, *path, *threads, model.Options{Context: n, Batch: max(*prefill, 1), KVType: kvType})
	if err != nil {
		return err
	}
	defer lm.Close()

	// Random token ids, as llama-bench uses: what is measured is arithmetic,
	// not any particular text.
	rng := rand.New(rand.NewPCG(1, 2))
	vocab := lm.m.Params().Vocab
	tokens := make([]int32, n)
	for i := range tokens {
		tokens[i] = int32(rng.IntN(vocab))
	}
	var pp, tg []float64
	for rep := range *reps + 1 {
		if *prefill > 0 {
			secs, err := timeIt(func() error {
				_, err := lm.m.Forward(ctx, tokens[:*prefill], 0, nil)
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
				for i := range *decode {
					if _, err := lm.m.Forward(ctx, tokens[i:i+1], i, nil); err != nil {
						return err
					}
				}
				return nil
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
	mem := lm.memory()
	wb := weightBytes(lm.be.Usage())
	if *asJSON {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(map[string]any{
			"model": *path, "backend": lm.be.Name(), "threads": lm.be.Threads(),
			"p": *prefill, "n": *decode, "reps": *reps,
			"prefill_tok_s": ppMean, "prefill_tok_s_std": ppStd,
			"decode_tok_s": tgMean, "decode_tok_s_std": tgStd,
			"decode_weight_gb_s": tgMean * float64(wb) / 1e9,
			"memory_bytes":       mem,
		})
	}
	fmt.Fprintf(out, "%s on %s, %d threads\n", *path, lm.be.Name(), lm.be.Threads())
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
