package main

// DFlash rows. A DFlash draft proposes its k tokens in one pass over a
// block of k+1 rows, so its cost is a block's, not k steps': blockCosts
// times Runner.DraftBlock for every block length the draft has (the curve
// that shows whether a block costs about one pass), and idealBlocks prices
// a round of k as block(k) + verify(k+1).

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/tandem-run/tandem/engine"
	"github.com/tandem-run/tandem/engine/chat"
	"github.com/tandem-run/tandem/engine/tokenizer"
)

// dflashMode is the name of the DFlash rows (modeFor).
const dflashMode = "DFlash adaptive"

// dflashBlocks is the block curve of the runner's DFlash draft, timed on
// its first rows and kept in curves by draft.
func dflashBlocks(ctx context.Context, r *engine.Runner, o options, curves map[string][]time.Duration) ([]time.Duration, error) {
	if c, ok := curves[o.dflash]; ok {
		return c, nil
	}
	c, err := blockCosts(ctx, r, promptSets["known"][0], 15, o.reps, o.clock)
	if err != nil {
		return nil, err
	}
	logBlocks(o, c)
	curves[o.dflash] = c
	return c, nil
}

// blockCosts times DFlash blocks of 1..maxK drafted tokens after a chat
// prompt: the median of reps each (the first run of a length compiles
// its pass). It stops at the draft's own block: costs[k] for k = 1 up to
// it.
func blockCosts(ctx context.Context, r *engine.Runner, message string, maxK, reps int, clock func() time.Time) ([]time.Duration, error) {
	text, err := r.RenderChat(ctx, []chat.Message{{Role: "user", Content: message}}, true)
	if err != nil {
		return nil, err
	}
	prompt, err := r.Tokenizer().Encode(text, tokenizer.EncodeOptions{ParseSpecial: true, AddSpecial: r.Tokenizer().AddBOS()})
	if err != nil {
		return nil, err
	}
	if _, err := r.Forward(ctx, prompt, 0, nil); err != nil {
		return nil, err
	}
	costs := []time.Duration{0}
	for k := 1; k <= maxK; k++ {
		times := make([]time.Duration, 0, reps)
		for i := 0; i <= reps; i++ {
			start := clock()
			ids, err := r.DraftBlock(ctx, prompt[0], len(prompt), k)
			if err != nil {
				return nil, err
			}
			if len(ids) < k { // past the draft's block
				return costs, nil
			}
			if i > 0 {
				times = append(times, clock().Sub(start))
			}
		}
		costs = append(costs, median(times))
	}
	return costs, nil
}

// logBlocks prints the block curve at 1, 2, 4, 8 and 15 drafted tokens
// (7 for the demo draft's block of 8), each against one token's block.
func logBlocks(o options, blocks []time.Duration) {
	var parts []string
	for _, k := range []int{1, 2, 4, 7, 8, 15} {
		if k < len(blocks) && (k != 7 || len(blocks) == 8) {
			parts = append(parts, fmt.Sprintf("%d: %.3f (%.2fx)", k, float64(blocks[k])/1e6, float64(blocks[k])/float64(blocks[1])))
		}
	}
	fmt.Fprintf(os.Stderr, "specbench: %s on %s: DFlash block ms by drafted tokens (x one) %s\n",
		filepath.Base(o.dflash), o.label, strings.Join(parts, ", "))
}

// blockMS is the curve as JSON keeps it: ms by drafted tokens.
func blockMS(blocks []time.Duration) map[int]float64 {
	out := map[int]float64{}
	for k := 1; k < len(blocks); k++ {
		out[k] = float64(blocks[k]) / 1e6
	}
	return out
}

// idealBlocks is ideal for a block draft: a round drafting k tokens costs
// blocks[k] + verify(k+1) (the longest block measured where k passes it).
func idealBlocks(out *row, rounds []round, verify, blocks []time.Duration) {
	v := func(rows int) float64 { return float64(verify[min(rows, len(verify)-1)]) }
	out.DraftCost = "measured block"
	if len(blocks) < 2 {
		return
	}
	out.DraftStep = float64(blocks[1]) / 1e6
	out.BlockMS = blockMS(blocks)
	a := out.Acceptance
	var tokens, cost float64
	for _, r := range rounds {
		k := r.drafted
		if a >= 1 {
			tokens += float64(k + 1)
		} else {
			tokens += (1 - math.Pow(a, float64(k+1))) / (1 - a)
		}
		cost += v(k + 1)
		if k > 0 {
			cost += float64(blocks[min(k, len(blocks)-1)])
		}
	}
	if cost > 0 {
		out.Ideal = tokens / cost * v(1)
	}
}

// tokensOf is the tokens the rounds accepted, in order.
func tokensOf(rounds []round) []int32 {
	var ids []int32
	for _, r := range rounds {
		ids = append(ids, r.ids...)
	}
	return ids
}
