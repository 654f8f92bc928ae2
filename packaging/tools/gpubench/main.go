// Command gpubench measures a model's prefill and decode speed and its
// device memory on one backend, printing one Markdown table row:
//
//	gpubench -model m.gguf -backend cuda -pp 512 -tg 128 -anchor-tg 586
//
// Decode is greedy, as a chat at temperature 0 runs: each step runs one
// token and takes the arg-max of its logits on the device, reading back
// only the token id (model.ForwardArgmax). Bandwidth is the weight bytes one
// decode step reads (every block and the head) over the step time, set
// against the 4.3 TB/s device-to-device copy of ../shared/bench/anchors.md.
// packaging/bench-cuda.sh runs it over the benchmark models.
//
// With -rows 1,2,4,8,16 it then prints, for each row count r, the time of
// one pass over r tokens that returns each row's arg-max, as speculative
// verification of r-1 drafted tokens runs, at the position after the
// prompt: the curve of step time over rows.
//
// With -eagle DRAFT it instead splits a speculative round of that EAGLE-3
// draft (drafting one token) into the target's pass, the capture and fuse
// of its states and the draft's call (eagle.go).
package main

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/tandem-run/tandem/engine/device"
	"github.com/tandem-run/tandem/engine/gguf"
	"github.com/tandem-run/tandem/engine/model"
	"github.com/tandem-run/tandem/engine/plan"
	"github.com/tandem-run/tandem/kernels"
	"github.com/tandem-run/tandem/kernels/cpu"
	"github.com/tandem-run/tandem/kernels/cuda"
	"github.com/tandem-run/tandem/kernels/quant"
	"github.com/tandem-run/tandem/packaging/tools/internal/cpuclock"
)

const copyRoofline = 4.3e12 // bytes/s, read + written, anchors.md

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "gpubench:", err)
		os.Exit(1)
	}
}

type config struct {
	path      string
	backend   string
	gpu       int
	pp, tg    int
	reps      int
	anchorTG  float64
	anchorPP  float64
	header    bool
	kernels   string
	profile   bool
	serial    bool
	kvType    quant.Type
	contextSz int
	rows      []int
	vecRows   int
	wRows     int
	pTile     int
	pF32      bool
	pDepth    int
	pRing     int
	pWG       int
	profRows  int
	eagle     string
	mvxRows   int
	mvxpRows  int
	blocking  bool
	threads   int
	rowsRuns  int
	clock     func() time.Time // what -rows times passes on
}

func run(args []string) error {
	var c config
	fs := flag.NewFlagSet("gpubench", flag.ContinueOnError)
	fs.StringVar(&c.path, "model", "", "GGUF model (required)")
	fs.StringVar(&c.backend, "backend", "cuda", "cuda or cpu")
	fs.IntVar(&c.gpu, "gpu", 0, "CUDA device")
	fs.IntVar(&c.threads, "threads", 0, "worker threads (cpu; 0: all cores)")
	fs.IntVar(&c.rowsRuns, "rows-runs", 20, "timed passes of each -rows count (the median is reported)")
	clock := fs.String("clock", "wall", "what -rows times passes on: wall, or cpu: the process's CPU time (a CPU run on a machine others load, with -threads 1)")
	fs.IntVar(&c.pp, "pp", 512, "prompt tokens for the prefill measure")
	fs.IntVar(&c.tg, "tg", 128, "generated tokens for the decode measure")
	fs.IntVar(&c.reps, "r", 3, "repetitions (the median is reported)")
	fs.Float64Var(&c.anchorTG, "anchor-tg", 0, "llama.cpp decode tok/s to compare with")
	fs.Float64Var(&c.anchorPP, "anchor-pp", 0, "llama.cpp prefill tok/s to compare with")
	fs.StringVar(&c.kernels, "kernels", "", "directory holding ptx/*.ptx to load instead of the embedded kernels")
	fs.BoolVar(&c.header, "header", false, "print the table header first")
	fs.BoolVar(&c.profile, "profile", false, "after the row, print GPU time per kernel of a decode step (cuda)")
	fs.IntVar(&c.profRows, "profile-rows", 1, "with -profile: the rows of the profiled pass (1: a decode step; 512: a prefill chunk)")
	fs.BoolVar(&c.serial, "serial-launch", false, "launch kernels without programmatic dependent launch (cuda, sm_90+)")
	fs.IntVar(&c.mvxRows, "mvx-rows", 0, "weight rows a block of the Q4_K verification kernel takes for 2-8 rows, 16 or 32 (cuda; 0: the backend's default)")
	fs.IntVar(&c.mvxpRows, "mvxp-rows", 0, "most rows the Q4_K verification products run on mvxp_q4_k, 2 or 4, -1 none (cuda; 0: the backend's default)")
	fs.BoolVar(&c.blocking, "blocking", false, "the device thread and its callers park at once instead of polling first (cuda; for measuring what the polling saves)")
	fs.StringVar(&c.eagle, "eagle", "", "an EAGLE-3 draft of -model: time a k=1 speculative round's parts (with -profile, their kernels) instead of the row")
	kv := fs.String("kv", "F16", "KV cache type: F16, F32, Q8_0 or Q4_0")
	capacity := fs.Int("ctx", 0, "KV cache capacity in tokens (0: -pp + -tg + 16); the window's default is 4096")
	rows := fs.String("rows", "", "comma-separated row counts: time a verification pass of each (e.g. 1,2,4,8,16)")
	fs.IntVar(&c.vecRows, "matvec-rows", 0, "products of up to this many rows on the matrix-vector kernels (cuda; 0: the backend's default)")
	fs.IntVar(&c.wRows, "matvec-weight-rows", 0, "weight rows a warp of the matrix-vector kernels takes, 1 or 2 (cuda; 0: the backend's default)")
	fs.IntVar(&c.pTile, "prefill-tile", 0, "tensor-core tile of products above 32 rows: 64 or 128 batch rows (shared-memory tiles), -1 register tiles (cuda; 0: the backend's default)")
	fs.BoolVar(&c.pF32, "prefill-f32", false, "prefill tiles of integer weights read F32 activations, not 8-bit ones (cuda)")
	fs.IntVar(&c.pDepth, "prefill-depth", 0, "steps of 32 the prefill tiles load ahead, 2 to 4 (cuda; 0: the backend's default)")
	fs.IntVar(&c.pRing, "prefill-ring", 0, "shared-memory stages of the cp.async prefill tiles, 3 or 4, or -1 for the register-set tiles (cuda; 0: the backend's default)")
	fs.IntVar(&c.pWG, "prefill-wgmma", 0, "shared-memory stages of the wgmma prefill tiles of F16 weights, 4 to 6, or -1 for none (cuda, compute capability 9.0; 0: the backend's default)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if c.path == "" {
		return fmt.Errorf("-model is required")
	}
	switch *clock {
	case "wall":
		c.clock = time.Now
	case "cpu":
		if c.clock = cpuclock.Process(); c.clock == nil {
			return fmt.Errorf("-clock cpu: no process CPU time on this system")
		}
	default:
		return fmt.Errorf("-clock %q: wall or cpu", *clock)
	}
	if c.rowsRuns < 1 {
		return fmt.Errorf("-rows-runs %d: at least 1", c.rowsRuns)
	}
	var err error
	if c.kvType, err = quant.ParseType(*kv); err != nil {
		return err
	}
	for _, f := range strings.Split(*rows, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		r, err := strconv.Atoi(f)
		if err != nil || r < 1 || r > c.pp {
			return fmt.Errorf("-rows: %q is not a row count from 1 to -pp", f)
		}
		c.rows = append(c.rows, r)
	}
	c.contextSz = c.pp + c.tg + 16
	if *capacity != 0 {
		if *capacity < c.contextSz {
			return fmt.Errorf("-ctx %d: the run needs %d tokens", *capacity, c.contextSz)
		}
		c.contextSz = *capacity
	}
	if c.header {
		fmt.Println("| model | size GiB | prefill tok/s | llama.cpp | decode tok/s | llama.cpp | ratio | weights GB/s | of roofline | device MiB after load / after decode | accounted MiB |")
		fmt.Println("|---|---|---|---|---|---|---|---|---|---|---|")
	}
	return bench(context.Background(), c)
}

func bench(ctx context.Context, c config) error {
	f, err := gguf.Open(c.path)
	if err != nil {
		return err
	}
	defer f.Close()

	var be kernels.Backend
	var gpu *cuda.Backend
	switch c.backend {
	case "cuda":
		o := cuda.Options{Ordinal: c.gpu, SerialLaunch: c.serial, MatVecRows: c.vecRows, MatVecWeightRows: c.wRows, PrefillTile: c.pTile, PrefillF32: c.pF32, PrefillDepth: c.pDepth, PrefillRing: c.pRing, PrefillWGMMA: c.pWG, MVXBlockRows: c.mvxRows, MVXPairRows: c.mvxpRows, Blocking: c.blocking}
		if c.kernels != "" {
			o.Kernels = os.DirFS(c.kernels)
		}
		if gpu, err = cuda.Open(o); err != nil {
			return err
		}
		be = gpu
	case "cpu":
		be = cpu.New(cpu.Options{Threads: c.threads})
	default:
		return fmt.Errorf("unknown backend %q", c.backend)
	}
	defer be.Close()
	free0 := deviceFree(gpu)

	// The one-device plan of this backend: the executor every layout runs.
	dev := device.Device{Kind: device.CPU, Name: be.Name(), Physical: -1, Virtual: true, MemoryTotal: 1 << 50}
	if gpu != nil {
		dev = device.Device{Index: c.gpu, Kind: device.CUDA, Name: gpu.Info().Name, MemoryTotal: uint64(gpu.Info().TotalMemory)}
	}
	if c.eagle != "" {
		return eagleRound(ctx, c, be, gpu, dev, f)
	}
	m, err := model.Load(ctx, f, be, model.Options{Device: dev, Context: c.contextSz, KV: plan.SameKV(c.kvType)})
	if err != nil {
		return err
	}
	defer m.Close()
	if err := be.Sync(); err != nil {
		return err
	}
	afterLoad := free0 - deviceFree(gpu)
	p := m.Params()
	rng := rand.New(rand.NewPCG(3, 4))
	prompt := make([]int32, c.pp)
	for i := range prompt {
		prompt[i] = int32(rng.IntN(p.Vocab))
	}

	// prefill: the whole prompt in one pass (the first run compiles and
	// captures, and is not counted)
	var ppTimes []float64
	for r := 0; r < c.reps+1; r++ {
		t0 := time.Now()
		if _, err := m.Forward(ctx, prompt, 0, nil); err != nil {
			return err
		}
		if err := be.Sync(); err != nil {
			return err
		}
		if r > 0 {
			ppTimes = append(ppTimes, time.Since(t0).Seconds())
		}
	}

	// decode: greedy steps after the prompt; the first 2 steps (compile,
	// capture) are not counted
	var tgTimes []float64
	for r := 0; r < c.reps; r++ {
		tok := prompt[c.pp-1]
		pos := c.pp
		var t0 time.Time
		for i := 0; i < c.tg+2; i++ {
			if i == 2 {
				t0 = time.Now()
			}
			ids, err := m.ForwardArgmax(ctx, []int32{tok}, pos, nil)
			if err != nil {
				return err
			}
			tok = ids[0]
			pos++
		}
		tgTimes = append(tgTimes, time.Since(t0).Seconds()/float64(c.tg))
	}
	afterDecode := free0 - deviceFree(gpu)

	ppRate := float64(c.pp) / median(ppTimes)
	step := median(tgTimes)
	tgRate := 1 / step
	u := be.Usage()
	read := weightBytesPerToken(f)
	gbs := float64(read) / step
	ratio := ""
	if c.anchorTG > 0 {
		ratio = fmt.Sprintf("%.2fx", tgRate/c.anchorTG)
	}
	name := filepath.Base(c.path)
	if gpu != nil && !gpu.DependentLaunch() {
		name += " (serial launch)"
	}
	fmt.Printf("| %s | %.2f | %.0f | %s | %.0f | %s | %s | %.0f | %.0f%% | %s / %s | %.0f |\n",
		name, float64(fileWeights(f))/(1<<30), ppRate, anchor(c.anchorPP), tgRate, anchor(c.anchorTG), ratio,
		gbs/1e9, 100*gbs/copyRoofline, mib(afterLoad), mib(afterDecode), float64(u.Total())/(1<<20))
	if len(c.rows) > 0 {
		if err := benchRows(ctx, m, be, prompt, c); err != nil {
			return err
		}
	}
	if c.profile && gpu != nil {
		return profilePass(ctx, m, gpu, prompt, c.pp, c.profRows)
	}
	return nil
}

// benchRows times verification-shaped passes: r tokens at the position
// after the prompt, every row's arg-max read back, the median of
// -rows-runs runs after 3 (compile, capture, first replay). It prints one
// line per model: milliseconds per pass and the ratio to one row. On the
// CPU the row counts take turns, one pass each a round, so that a shared
// machine's slow spells fall on every count alike; on a GPU each count's
// passes run back to back, as they always have.
func benchRows(ctx context.Context, m *model.Model, be kernels.Backend, prompt []int32, c config) error {
	passes := make([]func() error, len(c.rows))
	for i, r := range c.rows {
		out := make([]int, r)
		for j := range out {
			out[j] = j
		}
		passes[i] = func() error {
			_, err := m.ForwardArgmax(ctx, prompt[:r], c.pp, out)
			return err
		}
	}
	times := make([]float64, len(c.rows))
	if c.backend == "cpu" {
		runs := make([][]float64, len(c.rows))
		for round := range c.rowsRuns + 3 {
			for i, pass := range passes {
				t, err := medianCall(c.clock, 1, 0, pass)
				if err != nil {
					return err
				}
				if round >= 3 {
					runs[i] = append(runs[i], t)
				}
			}
		}
		for i := range runs {
			times[i] = median(runs[i])
		}
	} else {
		for i, pass := range passes {
			t, err := medianCall(c.clock, c.rowsRuns, 3, pass)
			if err != nil {
				return err
			}
			times[i] = t
		}
	}
	line := fmt.Sprintf("| %s rows |", filepath.Base(c.path))
	for i, r := range c.rows {
		line += fmt.Sprintf(" r=%d %.3f ms (%.2fx) |", r, times[i]*1e3, times[i]/times[0])
	}
	fmt.Println(line)
	return be.Sync()
}

// profilePass times each kernel over 8 eager passes of rows tokens and
// prints the kernels by share of a pass: one row, decode steps from pos;
// up to 63, verification passes at pos; more, prefill passes of the
// prompt's first rows from position 0.
func profilePass(ctx context.Context, m *model.Model, gpu *cuda.Backend, prompt []int32, pos, rows int) error {
	const steps = 8
	if rows >= 64 {
		pos = 0
	}
	if rows < 1 || rows > len(prompt) || pos+max(rows, steps) > m.Context() {
		return fmt.Errorf("-profile-rows %d: from 1 to -pp", rows)
	}
	head := func(us float64) string {
		return fmt.Sprintf("\n%s: %.0f us of kernels per pass of %d rows\n", gpu.Name(), us, rows)
	}
	return profiled(gpu, steps, 14, "/pass", head, func(i int) error {
		p, toks := pos+i, []int32{1}
		if rows > 1 {
			p, toks = pos, prompt[:rows]
		}
		_, err := m.Forward(ctx, toks, p, nil)
		return err
	})
}

// profiled runs fn runs times, eagerly, with the GPU's kernel profiler on,
// and prints head's line (given the microseconds of kernels a run), then
// the top kernels, the largest first, with their calls and time a run
// (unit after each: "" or "/pass").
func profiled(gpu *cuda.Backend, runs, top int, unit string, head func(us float64) string, fn func(i int) error) error {
	if err := gpu.SetProfiling(true); err != nil {
		return err
	}
	defer gpu.SetProfiling(false)
	for i := range runs {
		if err := fn(i); err != nil {
			return err
		}
	}
	prof, err := gpu.Profile()
	if err != nil {
		return err
	}
	var total float64
	for _, k := range prof {
		total += k.Seconds
	}
	fmt.Print(head(total / float64(runs) * 1e6))
	for _, k := range prof[:min(top, len(prof))] {
		fmt.Printf("  %-22s %-10s %5d calls%s %8.1f us%s %5.1f%%\n", k.Kernel, k.Op, k.Calls/runs, unit,
			k.Seconds/float64(runs)*1e6, unit, 100*k.Seconds/total)
	}
	return nil
}

// deviceFree is the GPU's free memory, or 0 without a GPU.
func deviceFree(gpu *cuda.Backend) int64 {
	if gpu == nil {
		return 0
	}
	free, _, err := gpu.MemoryInfo()
	if err != nil {
		return 0
	}
	return free
}

func mib(n int64) string {
	if n == 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f", float64(n)/(1<<20))
}

func anchor(v float64) string {
	if v == 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f", v)
}

// fileWeights is the bytes of all tensors.
func fileWeights(f *gguf.File) int64 {
	var n int64
	for _, t := range f.Tensors {
		n += t.Bytes
	}
	return n
}

// weightBytesPerToken is what one decode step must read: every tensor but
// the token embedding (one row of it), plus the embedding again when it is
// the head as well.
func weightBytesPerToken(f *gguf.File) int64 {
	n := fileWeights(f)
	if emb, ok := f.Tensor("token_embd.weight"); ok {
		if _, untied := f.Tensor("output.weight"); untied {
			n -= emb.Bytes
		}
	}
	return n
}

// medianCall is the median time on clock of runs calls of fn, in seconds,
// after warm untimed ones (compile, capture, first replay); the host's
// read of the result ends each call, as the engine sees it.
func medianCall(clock func() time.Time, runs, warm int, fn func() error) (float64, error) {
	ts := make([]float64, 0, runs)
	for i := range runs + warm {
		t0 := clock()
		if err := fn(); err != nil {
			return 0, err
		}
		if i >= warm {
			ts = append(ts, clock().Sub(t0).Seconds())
		}
	}
	return median(ts), nil
}

func median(v []float64) float64 {
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	return s[len(s)/2]
}
