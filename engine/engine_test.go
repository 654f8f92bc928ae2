package engine

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"math"
	"os"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/tandem-run/tandem/engine/chat"
	"github.com/tandem-run/tandem/kernels/sharedtest"
)

type oraclePrompt struct {
	Text   string  `json:"text"`
	IDs    []int32 `json:"ids"`
	Target struct {
		Greedy  []int32 `json:"greedy"`
		Teacher struct {
			TopIDs    [][]int32   `json:"top_ids"`
			TopLogits [][]float64 `json:"top_logits"`
		} `json:"teacher"`
	} `json:"target"`
	Speculative struct {
		K        int     `json:"k"`
		Tokens   []int32 `json:"tokens"`
		Drafted  int     `json:"drafted"`
		Accepted int     `json:"accepted"`
	} `json:"speculative"`
}

func loadOracle(t *testing.T) []oraclePrompt {
	t.Helper()
	b, err := os.ReadFile(sharedtest.Path(t, "oracle", "oracle.json"))
	if err != nil {
		t.Fatal(err)
	}
	var o struct {
		Prompts []oraclePrompt `json:"prompts"`
	}
	if err := json.Unmarshal(b, &o); err != nil {
		t.Fatal(err)
	}
	return o.Prompts
}

// backend runs the engine tests on another backend: the GPU machine runs
// them with -engine.backend=cuda.
var backend = flag.String("engine.backend", "cpu", "backend the engine tests load models on")

func load(t *testing.T, cfg Config) *Runner {
	t.Helper()
	cfg.Backend = *backend
	r, err := Load(context.Background(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

func modelPath(t *testing.T, name string) string { return sharedtest.Path(t, "models", name) }

// Greedy speculative output is the target's own greedy output, token for
// token, for every oracle prompt, with a draft model and with prompt lookup
// drafting 4 tokens every step (a fixed length: left to choose, a runner
// may turn drafting off where it does not pay).
func TestGreedySpeculativeIsTheTargets(t *testing.T) {
	prompts := loadOracle(t)
	target := modelPath(t, "factory-target-F16.gguf")
	runners := map[string]*Runner{
		"target alone": load(t, Config{Target: target}),
		"draft Q8_0":   load(t, Config{Target: target, Draft: modelPath(t, "factory-draft-Q8_0.gguf")}),
		"lookup":       load(t, Config{Target: target, Lookup: true}),
	}
	for name, r := range runners {
		var drafted, accepted int
		for i, p := range prompts {
			var ids []int32
			st, err := r.Generate(context.Background(), Request{Prompt: p.Text, MaxTokens: len(p.Target.Greedy), IgnoreEOS: true,
				Drafting: Drafting{Max: 4, Min: 4, PMin: -1}},
				func(e Event) { ids = append(ids, e.IDs...) })
			if err != nil {
				t.Fatalf("%s: prompt %d: %v", name, i, err)
			}
			if st.PromptTokens != len(p.IDs) {
				t.Errorf("%s: prompt %d: %d prompt tokens, oracle %d", name, i, st.PromptTokens, len(p.IDs))
			}
			if !slices.Equal(ids, p.Target.Greedy) {
				t.Errorf("%s: prompt %d:\n got %v\nwant %v", name, i, ids, p.Target.Greedy)
			}
			if !slices.Equal(p.Speculative.Tokens, p.Target.Greedy[:len(p.Speculative.Tokens)]) {
				t.Errorf("oracle prompt %d: its speculative tokens differ from its greedy ones", i)
			}
			drafted += st.Drafted
			accepted += st.Accepted
		}
		t.Logf("%s: drafted %d, accepted %d (%.0f%%)", name, drafted, accepted, 100*float64(accepted)/max(1, float64(drafted)))
		if name == "draft Q8_0" && accepted == 0 {
			t.Errorf("%s: no drafted token was accepted", name)
		}
	}
}

// With a quantized target too, greedy speculative output is the target's
// own, token for token: on CUDA a verification pass rounds each row as
// decode rounds it (kernels/cuda: pathOf, workspace.VerifyRows), so near
// ties between the top two logits go the same way. Draft model and prompt
// lookup, 4 and 7 tokens drafted (passes of 5 and 8 rows), EOS ignored
// and respected, each request after the one before on the same runner.
func TestQuantizedGreedySpeculativeIsTheTargets(t *testing.T) {
	prompts := loadOracle(t)
	target := modelPath(t, "factory-target-Q4_K_M.gguf")
	alone := load(t, Config{Target: target})
	runners := []struct {
		name string
		r    *Runner
	}{
		{"draft Q8_0", load(t, Config{Target: target, Draft: modelPath(t, "factory-draft-Q8_0.gguf")})},
		{"lookup", load(t, Config{Target: target, Lookup: true})},
	}
	generate := func(r *Runner, prompt string, ignoreEOS bool, k int) ([]int32, Stats) {
		t.Helper()
		var ids []int32
		st, err := r.Generate(context.Background(), Request{Prompt: prompt, MaxTokens: 48, IgnoreEOS: ignoreEOS,
			Drafting: Drafting{Max: k, Min: k, PMin: -1}},
			func(e Event) { ids = append(ids, e.IDs...) })
		if err != nil {
			t.Fatal(err)
		}
		return ids, st
	}
	for _, ru := range runners {
		for _, k := range []int{4, 7} {
			drafted, accepted := 0, 0
			for i, p := range prompts {
				for _, ignore := range []bool{true, false} {
					want, _ := generate(alone, p.Text, ignore, 0)
					got, st := generate(ru.r, p.Text, ignore, k)
					if !slices.Equal(got, want) {
						t.Errorf("%s, k=%d, prompt %d, EOS ignored %v:\n got %v\nwant %v", ru.name, k, i, ignore, got, want)
					}
					drafted += st.Drafted
					accepted += st.Accepted
				}
			}
			t.Logf("%s, k=%d: drafted %d, accepted %d", ru.name, k, drafted, accepted)
		}
	}
}

// With sampling, the draft changes nothing about the distribution of the
// output: the first two tokens under many seeds are distributed alike with
// and without the draft (a chi-square test of homogeneity), for a draft
// model and for an EAGLE-3 draft, with the target's head and with a
// reduced vocabulary of its own (sampled over its rows; fewer samples: the
// test's power is still ample at these counts, and it keeps the runtime
// down).
func TestSampledSpeculativeKeepsDistribution(t *testing.T) {
	if testing.Short() {
		t.Skip("48,000 sampled generations")
	}
	target := modelPath(t, "factory-target-Q8_0.gguf")
	alone, _ := sampledPairs(t, load(t, Config{Target: target}), 20000, 1<<32)
	cases := []struct {
		name, draft string
		n           int
	}{
		{"draft model", modelPath(t, "factory-draft-Q8_0.gguf"), 20000},
		{"EAGLE-3", modelPath(t, "factory-eagle3-F16.gguf"), 8000},
		{"EAGLE-3 with a reduced vocabulary", eagle3WithD2T(t, target), 8000},
	}
	// Four checks (two drafts, two positions) share a false-alarm rate of
	// 0.01: each is held to 0.01/4 (Bonferroni), so the test as a whole
	// fails a correct sampler one time in a hundred at most.
	const familyAlpha = 0.01
	alpha := familyAlpha / float64(2*len(cases))
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			with := load(t, Config{Target: target, Draft: c.draft})
			counts, drafted := sampledPairs(t, with, c.n, 0)
			if drafted == 0 {
				t.Fatal("the draft proposed nothing")
			}
			sameDistribution(t, counts, alone, alpha)
		})
	}
}

// sampledPairs counts the first two tokens of n sampled generations with
// seeds from seedBase on, and the tokens drafted for them.
func sampledPairs(t *testing.T, r *Runner, n int, seedBase uint64) (map[[2]int32]int, int) {
	t.Helper()
	return sampledPairsAt(t, r, Sampling{Temperature: 1.5, TopK: 20}, n, seedBase)
}

// sampledPairsAt is sampledPairs under other sampling settings.
func sampledPairsAt(t *testing.T, r *Runner, sampling Sampling, n int, seedBase uint64) (map[[2]int32]int, int) {
	t.Helper()
	prompt := "<|im_start|>user\nTell me a fortune.<|im_end|>\n<|im_start|>assistant\n"
	c := map[[2]int32]int{}
	drafted := 0
	for i := range uint64(n) {
		s := sampling
		s.Seed = seedBase + i
		var ids []int32
		st, err := r.Generate(context.Background(), Request{Prompt: prompt, MaxTokens: 2, IgnoreEOS: true, Sampling: s,
			Drafting: Drafting{Max: 3, Min: 3, PMin: -1}},
			func(e Event) { ids = append(ids, e.IDs...) })
		if err != nil || len(ids) != 2 {
			t.Fatalf("sample %d: %v %v", i, ids, err)
		}
		drafted += st.Drafted
		c[[2]int32{ids[0], ids[1]}]++
	}
	return c, drafted
}

// sameDistribution fails t when the first tokens, or the pairs, of the
// sampled generations counts and alone differ at significance alpha
// (each of the two checks is held to alpha).
func sameDistribution(t *testing.T, counts, alone map[[2]int32]int, alpha float64) {
	t.Helper()
	for _, pos := range []int{0, -1} { // the first token alone, then the pair
		chi, df := homogeneity(counts, alone, pos)
		p := chiSquareSF(chi, df)
		t.Logf("position %v: chi2 = %.1f, df = %d, p = %.3f", pos, chi, df, p)
		if p < alpha {
			t.Errorf("distributions differ with the draft: chi2 = %.1f, df = %d, p = %.4f < %.4f", chi, df, p, alpha)
		}
	}
}

// homogeneity is Pearson's chi-square for two samples over the same bins
// (the first token when pos is 0, the pair otherwise); bins expected fewer
// than 5 times are pooled.
func homogeneity(a, b map[[2]int32]int, pos int) (float64, int) {
	key := func(k [2]int32) [2]int32 {
		if pos == 0 {
			return [2]int32{k[0], -1}
		}
		return k
	}
	ca, cb := map[[2]int32]int{}, map[[2]int32]int{}
	var na, nb float64
	for k, v := range a {
		ca[key(k)] += v
		na += float64(v)
	}
	for k, v := range b {
		cb[key(k)] += v
		nb += float64(v)
	}
	keys := map[[2]int32]bool{}
	for k := range ca {
		keys[k] = true
	}
	for k := range cb {
		keys[k] = true
	}
	var sorted [][2]int32
	for k := range keys {
		sorted = append(sorted, k)
	}
	sort.Slice(sorted, func(i, j int) bool { return slices.Compare(sorted[i][:], sorted[j][:]) < 0 })
	var bins [][2]float64
	var pool [2]float64
	total := na + nb
	for _, k := range sorted {
		x, y := float64(ca[k]), float64(cb[k])
		if (x+y)*na/total < 5 || (x+y)*nb/total < 5 {
			pool[0] += x
			pool[1] += y
			continue
		}
		bins = append(bins, [2]float64{x, y})
	}
	if pool[0]+pool[1] > 0 {
		bins = append(bins, pool)
	}
	var chi float64
	for _, bin := range bins {
		s := bin[0] + bin[1]
		ea, eb := s*na/total, s*nb/total
		chi += (bin[0]-ea)*(bin[0]-ea)/ea + (bin[1]-eb)*(bin[1]-eb)/eb
	}
	return chi, len(bins) - 1
}

// chiSquareSF is P(X > x) for X chi-square with k degrees of freedom, by
// the regularised upper incomplete gamma function Q(k/2, x/2).
func chiSquareSF(x float64, k int) float64 {
	a, z := float64(k)/2, x/2
	if z < a+1 { // series for P, then Q = 1 - P
		sum, term := 1/a, 1/a
		for n := 1; n < 1000; n++ {
			term *= z / (a + float64(n))
			sum += term
		}
		lg, _ := math.Lgamma(a)
		return 1 - sum*math.Exp(-z+a*math.Log(z)-lg)
	}
	// continued fraction for Q (Lentz)
	lg, _ := math.Lgamma(a)
	b := z + 1 - a
	c, d := 1/1e-300, 1/b
	h := d
	for i := 1; i < 1000; i++ {
		an := -float64(i) * (float64(i) - a)
		b += 2
		d = an*d + b
		if math.Abs(d) < 1e-300 {
			d = 1e-300
		}
		c = b + an/c
		if math.Abs(c) < 1e-300 {
			c = 1e-300
		}
		d = 1 / d
		h *= d * c
	}
	return math.Exp(-z+a*math.Log(z)-lg) * h
}

func TestChiSquareSF(t *testing.T) {
	// Reference values of the chi-square survival function.
	for _, c := range []struct {
		x    float64
		k    int
		want float64
	}{{3.841, 1, 0.05}, {18.307, 10, 0.05}, {6.635, 1, 0.01}, {124.342, 100, 0.05}, {10, 10, 0.4405}} {
		if got := chiSquareSF(c.x, c.k); math.Abs(got-c.want) > 1e-3 {
			t.Errorf("SF(%v, %d) = %v, want %v", c.x, c.k, got, c.want)
		}
	}
}

// Cancelling from another goroutine stops a generation within one step, and
// the runner serves the next request correctly.
func TestCancelKeepsRunnerUsable(t *testing.T) {
	r := load(t, Config{Target: modelPath(t, "factory-target-Q4_K_M.gguf"), Draft: modelPath(t, "factory-draft-Q8_0.gguf")})
	ctx, cancel := context.WithCancel(context.Background())
	events := 0
	st, err := r.Generate(ctx, Request{Prompt: "In the beginning", MaxTokens: 2000, IgnoreEOS: true}, func(Event) {
		events++
		if events == 3 {
			// Cancelled from another goroutine, which has done so when
			// the third step ends (a goroutine merely started may not run
			// for several of the target-alone steps a runner takes once it
			// has turned drafting off).
			done := make(chan struct{})
			go func() { cancel(); close(done) }()
			<-done
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if st.FinishReason != "cancelled" || events > 3 {
		t.Errorf("finish %q after %d events", st.FinishReason, events)
	}
	prompts := loadOracle(t)
	var ids []int32
	if _, err := r.Generate(context.Background(), Request{Prompt: prompts[0].Text, MaxTokens: 16, IgnoreEOS: true, NoDraft: true},
		func(e Event) { ids = append(ids, e.IDs...) }); err != nil {
		t.Fatal(err)
	}
	var again []int32
	if _, err := r.Generate(context.Background(), Request{Prompt: prompts[0].Text, MaxTokens: 16, IgnoreEOS: true},
		func(e Event) { again = append(again, e.IDs...) }); err != nil || !slices.Equal(ids, again) {
		t.Errorf("after cancel: %v vs %v (%v)", again, ids, err)
	}
}

func TestRequestLimits(t *testing.T) {
	r := load(t, Config{Target: modelPath(t, "factory-target-Q4_K_M.gguf"), Context: 64})
	long := ""
	for range 100 {
		long += "In the beginning "
	}
	if _, err := r.Generate(context.Background(), Request{Prompt: long}, nil); !errors.Is(err, ErrPromptTooLong) {
		t.Errorf("long prompt: %v", err)
	}
	st, err := r.Generate(context.Background(), Request{Prompt: "In the", MaxTokens: 1000, IgnoreEOS: true}, nil)
	if err != nil || st.FinishReason != "length" || st.PromptTokens+st.GeneratedTokens != 64 {
		t.Errorf("context full: %+v %v", st, err)
	}
	// Stop strings end the text before them and never leak a part.
	var text string
	st, err = r.Generate(context.Background(), Request{
		Messages: []chat.Message{{Role: "user", Content: "Quote Genesis 1:3."}}, MaxTokens: 40, Stop: []string{"light"},
	}, func(e Event) { text += e.Text })
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(text, "light") || strings.HasSuffix(text, "l") && st.FinishReason == "stop" {
		t.Errorf("stop string leaked: %q", text)
	}
	t.Logf("stopped text: %q (%s)", text, st.FinishReason)
}

func TestIncompatibleDraftRefused(t *testing.T) {
	_, err := Load(context.Background(), Config{Target: modelPath(t, "factory-target-Q8_0.gguf"),
		Draft: sharedtest.Path(t, "testdata", "vocab", "vocab-qwen3.gguf")}, nil)
	if err == nil {
		t.Fatal("loaded a draft with another vocabulary")
	}
	t.Log(err)
}

func BenchmarkDemoPair(b *testing.B) {
	// The bundled pair, which the GPU machine has too.
	target := sharedtest.Path(b, "models", "factory-target-Q4_K_M.gguf")
	draft := sharedtest.Path(b, "models", "factory-draft-Q8_0.gguf")
	prompt := "<|im_start|>user\nQuote Genesis 1:1.<|im_end|>\n<|im_start|>assistant\n"
	for _, c := range []struct {
		name     string
		cfg      Config
		drafting Drafting
	}{
		{"target", Config{Target: target}, Drafting{}},
		{"draft", Config{Target: target, Draft: draft}, Drafting{}},
		{"draft-k4", Config{Target: target, Draft: draft}, Drafting{Max: 4, Min: 4, PMin: -1}},
		{"lookup", Config{Target: target, Lookup: true}, Drafting{}},
	} {
		b.Run(c.name, func(b *testing.B) {
			c.cfg.Backend = *backend
			r, err := Load(context.Background(), c.cfg, nil)
			if err != nil {
				b.Fatal(err)
			}
			defer r.Close()
			var tokens int
			var secs float64
			for b.Loop() {
				st, err := r.Generate(context.Background(), Request{Prompt: prompt, MaxTokens: 64, IgnoreEOS: true, Drafting: c.drafting}, nil)
				if err != nil {
					b.Fatal(err)
				}
				tokens += st.GeneratedTokens
				secs += st.DecodeSeconds
			}
			b.ReportMetric(float64(tokens)/secs, "tok/s")
		})
	}
}
