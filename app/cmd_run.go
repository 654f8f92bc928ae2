package app

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/tandem-run/tandem/engine"
	"github.com/tandem-run/tandem/engine/chat"
	"github.com/tandem-run/tandem/engine/plan"
)

// engineFlags are the load-time flags that run, bench, perplexity and serve share.
type engineFlags struct {
	model, draft    string
	pull            bool // download hf:// models that are not cached
	lookup          bool
	backend         string
	gpu             int
	ctx             int
	kvType, kvTypeV string
	threads         int
	draftKnobs      engine.Drafting // the request's drafting settings (run, serve)
	place           placementFlags
	drafting        bool // the draft flags are registered
}

// register adds the flags of a command that generates: the target's and the draft's.
func (e *engineFlags) register(fs *flag.FlagSet) {
	e.registerTarget(fs)
	e.drafting = true
	fs.StringVar(&e.draft, "draft", "", "draft GGUF: a small model of the same vocabulary, or an EAGLE-3 draft")
	fs.BoolVar(&e.lookup, "lookup", false, "draft by prompt lookup (n-grams of the context); alone when no --draft")
	def := engine.DefaultDrafting()
	fs.IntVar(&e.draftKnobs.Max, "draft-max", def.Max, "most tokens drafted per step")
	fs.IntVar(&e.draftKnobs.Min, "draft-min", def.Min, "fewest tokens drafted per step while drafting is on (--draft-max too: a fixed length)")
	fs.Float64Var(&e.draftKnobs.PMin, "draft-p-min", def.PMin, "stop drafting when the draft's top probability is below this (sampled drafting, fixed length)")
}

// registerTarget adds the flags of a command that measures the target alone
// (bench, perplexity): the model, where it runs, and its cache.
func (e *engineFlags) registerTarget(fs *flag.FlagSet) {
	fs.StringVar(&e.model, "model", "", "target model GGUF, or a Hub model: hf://OWNER/NAME/FILE.gguf, OWNER/NAME:Q4_K_M (default: the bundled demo model)")
	fs.BoolVar(&e.pull, "pull", false, "download --model and --draft from the Hub when they are not in its cache")
	fs.StringVar(&e.backend, "backend", "cpu", "compute backend: cpu or cuda")
	fs.IntVar(&e.gpu, "gpu", 0, "GPU number for --backend cuda")
	fs.IntVar(&e.ctx, "ctx", 0, "context size in tokens (default: the model's, at most 4096)")
	fs.StringVar(&e.kvType, "kv-type", plan.KVTypeName(plan.DefaultKVType), "KV cache type of K and V: f16, q8_0, q4_0 or f32 (llama.cpp's -ctk)")
	fs.StringVar(&e.kvTypeV, "kv-type-v", "", "the V cache's type when it differs from --kv-type (llama.cpp's -ctv)")
	fs.IntVar(&e.threads, "threads", 0, "CPU threads (default: all cores)")
	e.place.register(fs)
}

// config resolves Hub models to their cached files, and the demo pair when
// no model was given.
func (e *engineFlags) config(ctx context.Context, errOut io.Writer) (engine.Config, error) {
	target, err := resolveModelPath(ctx, e.model, e.pull, errOut)
	if err != nil {
		return engine.Config{}, err
	}
	draft, err := resolveModelPath(ctx, e.draft, e.pull, errOut)
	if err != nil {
		return engine.Config{}, err
	}
	if target == "" {
		// --lookup alone asks for draftless decoding: no demo draft then.
		wantDraft := e.drafting && !(e.lookup && e.draft == "")
		if target, draft, err = modelOrDemo(target, draft, wantDraft, errOut); err != nil {
			return engine.Config{}, err
		}
	}
	place, err := e.place.placement()
	if err != nil {
		return engine.Config{}, err
	}
	return engine.Config{Target: target, Draft: draft, Lookup: e.lookup, Backend: e.backend, GPU: e.gpu, Context: e.ctx,
		KVType: e.kvType, KVTypeV: e.kvTypeV, Threads: e.threads, Placement: place}, nil
}

// samplingFlags are the per-request sampling settings.
type samplingFlags struct {
	preset                 string
	greedy                 bool
	temp, topP, minP       float64
	topK                   int
	repeat, presence, freq float64
	seed                   uint64
}

func (s *samplingFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&s.preset, "preset", "", "sampling preset, as in the window: precise (greedy), balanced or creative; the sampling flags given with it win")
	fs.BoolVar(&s.greedy, "greedy", false, "always pick the most likely token (the default when --temp is 0)")
	fs.Float64Var(&s.temp, "temp", 0, "temperature; 0 is greedy")
	fs.IntVar(&s.topK, "top-k", 40, "keep the k most likely tokens (0: off)")
	fs.Float64Var(&s.topP, "top-p", 0.95, "keep the most likely tokens up to this probability mass (1: off)")
	fs.Float64Var(&s.minP, "min-p", 0.05, "drop tokens less likely than this fraction of the top one (0: off)")
	fs.Float64Var(&s.repeat, "repeat-penalty", 1, "penalty for recently seen tokens (1: off)")
	fs.Float64Var(&s.presence, "presence-penalty", 0, "presence penalty")
	fs.Float64Var(&s.freq, "frequency-penalty", 0, "frequency penalty")
	fs.Uint64Var(&s.seed, "seed", 0, "random seed: the same seed gives the same output")
}

// sampling is the request's sampling: the flags' values, or with --preset
// the preset's, except for the flags fs was given.
func (s *samplingFlags) sampling(fs *flag.FlagSet) (engine.Sampling, error) {
	if s.preset != "" {
		p, err := findPreset(s.preset)
		if err != nil {
			return engine.Sampling{}, err
		}
		given := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
		for name, set := range map[string]func(){
			"temp":           func() { s.temp = p.s.Temperature },
			"top-k":          func() { s.topK = p.s.TopK },
			"top-p":          func() { s.topP = p.s.TopP },
			"min-p":          func() { s.minP = p.s.MinP },
			"repeat-penalty": func() { s.repeat = p.s.RepeatPenalty },
		} {
			if !given[name] {
				set()
			}
		}
	}
	return s.flagSampling(), nil
}

func (s *samplingFlags) flagSampling() engine.Sampling {
	if s.greedy || s.temp <= 0 {
		return engine.Sampling{RepeatPenalty: s.repeat, PresencePenalty: s.presence, FrequencyPenalty: s.freq}
	}
	return engine.Sampling{Temperature: s.temp, TopK: s.topK, TopP: s.topP, MinP: s.minP,
		RepeatPenalty: s.repeat, PresencePenalty: s.presence, FrequencyPenalty: s.freq, Seed: s.seed}
}

// runResult is what `tandem run --json` prints.
type runResult struct {
	Text            string  `json:"text"`
	IDs             []int32 `json:"ids"`
	PromptTokens    int     `json:"prompt_tokens"`
	GeneratedTokens int     `json:"generated_tokens"`
	PrefillTokS     float64 `json:"prefill_tok_s"`
	DecodeTokS      float64 `json:"decode_tok_s"`
	FinishReason    string  `json:"finish_reason"`
	Drafted         int     `json:"drafted"`
	Accepted        int     `json:"accepted"`
	Acceptance      float64 `json:"acceptance"`
	AcceptedAt      []int   `json:"accepted_at,omitempty"`
	// The draft length after the last step (engine.Stats): DraftK tokens
	// a step (0: the target alone), whether drafting is on and why not,
	// the speedup measured on the steps over the target alone's measured
	// pass, and the one expected of the next step.
	DraftK          int     `json:"draft_k"`
	Drafting        bool    `json:"drafting"`
	DraftOff        string  `json:"draft_off,omitempty"`
	Speedup         float64 `json:"speedup,omitempty"`
	ExpectedSpeedup float64 `json:"expected_speedup,omitempty"`
	// SpeedupVsTargetOnly is decode tokens/s with drafting over the target
	// alone on the same request (--compare).
	SpeedupVsTargetOnly float64 `json:"speedup_vs_target_only,omitempty"`
	TargetOnlyTokS      float64 `json:"target_only_tok_s,omitempty"`
	KVBytes             int64   `json:"kv_bytes"`
	ScratchBytes        int64   `json:"scratch_bytes"`
	WeightBytes         int64   `json:"weight_bytes"`
}

func runRun(ctx context.Context, args []string, out, errOut io.Writer) error {
	fs := newFlags("run", errOut)
	var ef engineFlags
	var sf samplingFlags
	ef.register(fs)
	sf.register(fs)
	prompt := fs.String("prompt", "", "raw prompt text (special tokens such as <|im_start|> are parsed)")
	promptIDs := fs.String("prompt-ids", "", "the prompt as comma-separated token ids, run as they are (no BOS added)")
	message := fs.String("chat", "", "a chat message, rendered with the model's chat template")
	system := fs.String("system", "", "system prompt for --chat")
	n := fs.Int("n", 256, "most tokens to generate")
	ignoreEOS := fs.Bool("ignore-eos", false, "generate exactly -n tokens")
	asJSON := fs.Bool("json", false, "print one JSON object instead of streaming text")
	compare := fs.Bool("compare", false, "also run the target alone on the same request and report the speedup")
	var stops stringList
	fs.Var(&stops, "stop", "stop before this text (repeatable)")
	fs.Usage = func() {
		fmt.Fprintln(errOut, "Usage: tandem run [--model M] [--draft D | --lookup] (--prompt P | --chat MESSAGE [--system S] | --prompt-ids 1,2,3) [flags]\n\nGenerates text, streaming it to standard output.")
		fs.PrintDefaults()
	}
	if _, err := parseFlags(fs, args); err != nil {
		return err
	}
	given := 0
	for _, v := range []string{*prompt, *message, *promptIDs} {
		if v != "" {
			given++
		}
	}
	if given != 1 {
		fmt.Fprintln(errOut, "tandem run: give exactly one of --prompt, --chat or --prompt-ids")
		return errUsage
	}
	ids, err := parseIDs(*promptIDs)
	if err != nil {
		fmt.Fprintln(errOut, "tandem run: --prompt-ids:", err)
		return errUsage
	}
	sampling, err := sf.sampling(fs)
	if err != nil {
		return err
	}
	cfg, err := ef.config(ctx, errOut)
	if err != nil {
		return err
	}
	req := engine.Request{Prompt: *prompt, PromptIDs: ids, MaxTokens: *n, IgnoreEOS: *ignoreEOS, Sampling: sampling, Stop: stops,
		Drafting: ef.draftKnobs}
	if *message != "" {
		if *system != "" {
			req.Messages = append(req.Messages, chat.Message{Role: "system", Content: *system})
		}
		req.Messages = append(req.Messages, chat.Message{Role: "user", Content: *message})
	}
	r, err := engine.Load(ctx, cfg, nil)
	if err != nil {
		return err
	}
	defer r.Close()
	res := runResult{}
	st, err := r.Generate(ctx, req, func(e engine.Event) {
		res.IDs = append(res.IDs, e.IDs...)
		res.Text += e.Text
		if !*asJSON {
			io.WriteString(out, e.Text)
		}
	})
	if errors.Is(err, chat.ErrTemplate) {
		return fmt.Errorf("%w\n(the model's chat template failed; use --prompt with a hand-written prompt)", err)
	}
	if err != nil {
		return err
	}
	if !*asJSON {
		fmt.Fprintln(out)
		fmt.Fprintf(errOut, "\n%d prompt tokens at %.0f tok/s, %d generated at %.1f tok/s", st.PromptTokens, st.PrefillTokS(), st.GeneratedTokens, st.DecodeTokS())
		if st.Drafted > 0 {
			fmt.Fprintf(errOut, "; drafted %d, accepted %d (%.0f%%)", st.Drafted, st.Accepted, 100*st.Acceptance())
		}
		if note := draftNoteOf(st); note != "" {
			fmt.Fprintf(errOut, "; %s", note)
		}
		fmt.Fprintln(errOut)
	}
	res.PromptTokens, res.GeneratedTokens = st.PromptTokens, st.GeneratedTokens
	res.PrefillTokS, res.DecodeTokS, res.FinishReason = st.PrefillTokS(), st.DecodeTokS(), st.FinishReason
	res.Drafted, res.Accepted, res.Acceptance, res.AcceptedAt = st.Drafted, st.Accepted, st.Acceptance(), st.AcceptedAt
	res.DraftK, res.Drafting, res.DraftOff = st.DraftK, st.Drafting, st.DraftOff
	res.Speedup, res.ExpectedSpeedup = st.Speedup, st.ExpectedSpeedup
	usage := r.Info().Usage
	for l, b := range usage {
		switch l.Cat.String() {
		case "kv":
			res.KVBytes += b
		case "scratch", "staging":
			res.ScratchBytes += b
		default:
			res.WeightBytes += b
		}
	}
	if *compare {
		req.NoDraft = true
		alone, err := r.Generate(ctx, req, nil)
		if err != nil {
			return err
		}
		res.TargetOnlyTokS = alone.DecodeTokS()
		if res.TargetOnlyTokS > 0 {
			res.SpeedupVsTargetOnly = res.DecodeTokS / res.TargetOnlyTokS
		}
		if !*asJSON {
			fmt.Fprintf(errOut, "target alone: %.1f tok/s; speedup %.2fx\n", res.TargetOnlyTokS, res.SpeedupVsTargetOnly)
		}
	}
	if *asJSON {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(res)
	}
	return nil
}

// parseIDs reads comma-separated token ids ("" is none). Whether each is in
// the model's vocabulary is the engine's to check.
func parseIDs(s string) ([]int32, error) {
	if s == "" {
		return nil, nil
	}
	var ids []int32
	for _, f := range strings.Split(s, ",") {
		v, err := strconv.ParseInt(strings.TrimSpace(f), 10, 32)
		if err != nil || v < 0 {
			return nil, fmt.Errorf("%q is not a token id", f)
		}
		ids = append(ids, int32(v))
	}
	return ids, nil
}

// stringList is a repeatable string flag.
type stringList []string

func (s *stringList) String() string     { return fmt.Sprint(*s) }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }
