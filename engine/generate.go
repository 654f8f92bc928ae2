package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/tandem-run/tandem/engine/chat"
	"github.com/tandem-run/tandem/engine/grammar"
	"github.com/tandem-run/tandem/engine/sample"
	"github.com/tandem-run/tandem/engine/spec"
	"github.com/tandem-run/tandem/engine/tokenizer"
)

// Generate runs one request to completion, calling emit on this goroutine
// as tokens are accepted. Cancelling ctx stops it within one step; the
// runner stays usable, and the returned Stats say "cancelled".
func (r *Runner) Generate(ctx context.Context, req Request, emit func(Event)) (Stats, error) {
	if r.batch != nil {
		return r.generateTogether(ctx, req, emit)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	g, err := r.newGeneration(ctx, req, emit)
	if g == nil {
		return Stats{}, err
	} else if err != nil {
		return g.stats, err
	}
	return g.finished(ctx, g.run(ctx))
}

// generateTogether is Generate on a runner that decodes several requests
// together (batch.go): the runner is locked only while a pass runs.
func (r *Runner) generateTogether(ctx context.Context, req Request, emit func(Event)) (Stats, error) {
	r.mu.Lock()
	g, err := r.newGeneration(ctx, req, emit)
	r.mu.Unlock()
	if g == nil {
		return Stats{}, err
	} else if err != nil {
		return g.stats, err
	}
	return g.finished(ctx, r.generateBatched(ctx, g))
}

// finished is a generation's result after it ran to err: a cancelled one
// says so in its statistics and is no error.
func (g *generation) finished(ctx context.Context, err error) (Stats, error) {
	if ctx.Err() != nil && (err == nil || errors.Is(err, ctx.Err())) {
		g.stats.FinishReason = "cancelled"
		return g.stats, nil
	}
	return g.stats, err
}

// newGeneration checks req and prepares its generation. A nil generation
// comes with the error; a prompt too long for the context comes as a
// generation with the error, for its statistics. The caller holds r.mu.
func (r *Runner) newGeneration(ctx context.Context, req Request, emit func(Event)) (*generation, error) {
	if r.target == nil {
		return nil, errors.New("engine: runner is closed")
	}
	prompt, err := r.promptTokens(ctx, req)
	if err != nil {
		return nil, err
	}
	n := r.target.m.Context()
	switch {
	case len(prompt) == 0:
		return nil, errors.New("engine: empty prompt")
	case len(prompt) >= n:
		return &generation{stats: Stats{PromptTokens: len(prompt)}}, fmt.Errorf("engine: %w: %d prompt tokens, %d-token context", ErrPromptTooLong, len(prompt), n)
	}
	if err := r.checkConstraint(req.Constraint); err != nil {
		return nil, err
	}
	g := &generation{r: r, req: req, drafting: req.Drafting.Resolve(), emit: emit, sampler: sample.NewSeeded(req.Sampling),
		history: prompt, stream: r.tok.NewStreamDecoder()}
	if req.Constraint != nil {
		g.m = req.Constraint.NewMatcher()
	}
	g.stats.PromptTokens = len(prompt)
	switch {
	case r.draft != nil && r.batch != nil:
		switch {
		case r.batch.gpu:
			g.stats.DraftOff = ReasonBatchedGPU
		case r.batchDraft() == nil:
			g.stats.DraftOff = ReasonBatched
		case req.NoDraft:
			g.stats.DraftOff = ReasonNoDraft
		case !onDevice(req):
			g.stats.DraftOff = ReasonBatchedSample
		}
	case r.draft != nil && req.NoDraft:
		g.stats.DraftOff = ReasonNoDraft
	case r.draft != nil:
		g.chooser = r.chooser(req)
		g.report()
	}
	// Greedy drafting runs every pass of a round on the device, so cutting
	// it short where the draft is unsure saves no draft time, only rows
	// of the verification, which the chooser already weighs against the
	// tokens they bring when it picks the length (and unsure tokens are
	// still accepted often enough to be worth a row on a GPU).
	//
	// A sampled draft is not cut either: its token is kept with chance
	// sum(min(p, q)), which a flat q does not make small (where the draft
	// is unsure the target mostly is too), so the cut threw away drawn
	// tokens that verification would often have kept, and the chooser
	// counted each as a rejection. On the H200's 8B targets at T=0.7 the
	// adaptive length then turned drafting off (1.01x) where k = 4 made
	// 1.67x. The cut stays for a fixed length and for greedy drafting
	// through the host (penalised or under a grammar), where the draft's
	// top probability is the chance its argmax is the target's.
	g.pMin = g.drafting.PMin
	if !g.drafting.Fixed() && (onDevice(req) || !req.Sampling.Greedy()) {
		g.pMin = -1
	}
	if emit == nil {
		g.emit = func(Event) {}
	}
	return g, nil
}

// promptTokens tokenizes the prompt or renders and tokenizes the messages.
func (r *Runner) promptTokens(ctx context.Context, req Request) ([]int32, error) {
	if len(req.PromptIDs) > 0 {
		return slices.Clone(req.PromptIDs), nil
	}
	text := req.Prompt
	if len(req.Messages) > 0 {
		var err error
		// Message text cannot make special tokens; the template's markup can.
		text, err = r.renderChat(ctx, chat.Defused(req.Messages, r.tok.Defuse), chatOptions(req, r.tok.Defuse), req.ChatMLFallback && len(req.Tools) == 0)
		if err != nil {
			return nil, err
		}
	}
	ids, err := r.tok.Encode(text, tokenizer.EncodeOptions{ParseSpecial: true, AddSpecial: r.tok.AddBOS(), Defused: len(req.Messages) > 0})
	if err != nil {
		return nil, fmt.Errorf("engine: %w", err)
	}
	return ids, nil
}

// RenderChat renders messages with the model's chat template and a
// generation prompt. Without a template, or when it fails to render, it is
// an error wrapping chat.ErrTemplate unless fallback allows plain ChatML.
func (r *Runner) RenderChat(ctx context.Context, msgs []chat.Message, fallback bool) (string, error) {
	return r.renderChat(ctx, msgs, chat.Options{AddGenerationPrompt: true}, fallback)
}

// chatOptions are the template variables of a request: its tools (defused
// like the messages), and no thinking when a grammar forces the output,
// since the grammar leaves no room for a reasoning block (Qwen3's
// template then writes an empty one itself).
func chatOptions(req Request, defuse func(string) string) chat.Options {
	opts := chat.Options{AddGenerationPrompt: true, Tools: chat.DefusedTools(req.Tools, defuse)}
	if req.Constraint != nil {
		thinking := false
		opts.EnableThinking = &thinking
	}
	return opts
}

func (r *Runner) renderChat(ctx context.Context, msgs []chat.Message, opts chat.Options, fallback bool) (string, error) {
	if len(opts.Tools) > 0 && r.ToolSyntax() == chat.NoToolSyntax {
		return "", fmt.Errorf("engine: %w", chat.ErrNoTools)
	}
	if r.template != nil {
		text, err := r.template.Render(ctx, msgs, opts)
		if err == nil || !fallback {
			return text, err
		}
	} else if !fallback {
		return "", fmt.Errorf("engine: the model has no chat template: %w", chat.ErrTemplate)
	}
	return chat.ChatML(msgs, true), nil
}

// generation is the state of one Generate call.
type generation struct {
	r        *Runner
	req      Request
	drafting Drafting // req.Drafting resolved
	pMin     float64  // the draft's confidence cut (see Generate)
	emit     func(Event)
	sampler  *sample.Sampler
	history  []int32 // prompt and every accepted token
	stream   *tokenizer.StreamDecoder
	stats    Stats
	text     strings.Builder // everything emitted, for stop strings
	held     string          // decoded text held back: it may begin a stop string
	probs    []float32
	certain  []float32 // a one-hot draft distribution (oneHot)
	rows     []float32 // the target's softmax rows of a round (verifyProbs)

	// chooser chooses the draft length (nil: the target alone). drafted
	// is the last step's drafted tokens, proposed or cut; took and made
	// are the steps' wall time (spec.Chooser.LastRound) and the tokens
	// they made.
	chooser *spec.Chooser
	drafted int
	took    time.Duration
	made    int
	m       *grammar.Matcher // the output so far under req.Constraint; nil without one
}

func (g *generation) run(ctx context.Context) error {
	// Every pass outside the steps (this prompt's prefill, the next
	// request) captures: only a step pauses, for its own pass.
	if g.r.sharesHead() {
		g.r.target.m.PauseCapture(false)
		defer g.r.target.m.PauseCapture(false)
	}
	// Prefill all but the last prompt token; the last one starts the first
	// speculative step, so even the first generated token is drafted.
	now := g.r.now
	start := now()
	if n := len(g.history); n > 1 {
		if _, err := g.r.target.run(ctx, g.history[:n-1], 1); err != nil {
			return err
		}
	}
	// A new prompt may make a probe due (spec.Chooser.Begin). The draft
	// reads the prompt too, unless drafting is off on this pair and the
	// first round does not draft: a probe then catches up when it comes.
	if g.chooser != nil {
		g.chooser.Begin()
	}
	if g.chooser != nil && (g.drafting.Fixed() || g.chooser.Decision().Reason == "" || g.chooser.Decision().Drafting) {
		t := g.now()
		if err := g.r.draft.prefill(ctx, g.history); err != nil {
			return err
		}
		if !g.drafting.Fixed() {
			g.chooser.DraftPrefilled(t) // a probe's cost, where the first round is one
		}
	}
	g.stats.PrefillSeconds = now().Sub(start).Seconds()
	start = now()
	defer func() { g.stats.DecodeSeconds = now().Sub(start).Seconds() }()
	if g.grammarComplete() { // a grammar of the empty text: nothing to ask
		g.stats.FinishReason = "stop"
		return nil
	}
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		done, err := g.step(ctx)
		if err != nil || done {
			return err
		}
	}
}

// step drafts, verifies the drafts in one target pass and accepts the
// result. It reports whether generation is finished.
func (g *generation) step(ctx context.Context) (bool, error) {
	var drafted []int32
	var dists [][]float32
	tried := 0 // drafted tokens proposed or cut short (the chooser's evidence)
	// One reading of the clock starts the round's calls and one ends
	// each: the target's pass starts where the draft's call ended, so the
	// host's work between them counts in the pass, and what lies between
	// rounds is the chooser's time outside the calls (spec.Chooser).
	start := g.now()
	if n := g.draftLength(); n > 0 {
		p, err := g.r.draft.draft(ctx, g.history, n, g.pMin, g.sampler, g.forkMatcher())
		if err != nil {
			return false, err
		}
		drafted, dists = p.tokens, p.dists
		start = start.Add(g.chooser.Drafted(start, g.draftSize(p)))
		tried = max(p.passes, len(p.tokens))
	}
	drafted, dists, masks, err := g.speculate(drafted, dists)
	if err != nil {
		return false, err
	}
	capturing := g.pauseCapture()
	out, err := g.verifyPass(ctx, drafted, dists, masks)
	if err != nil {
		return false, err
	}
	g.verified(start, len(drafted)+1, capturing)
	g.stats.Steps++
	if len(drafted) > 0 {
		g.stats.Drafted += len(drafted)
		g.stats.Accepted += len(out) - 1
		for len(g.stats.AcceptedAt) < len(drafted) {
			g.stats.AcceptedAt = append(g.stats.AcceptedAt, 0)
		}
		for i := range len(out) - 1 {
			g.stats.AcceptedAt[i]++
		}
	}
	g.learn(tried, len(out))
	if out, err = g.advanceGrammar(out); err != nil {
		return false, err
	}
	return g.accept(out), nil
}

// verifyPass runs the target on the history and the drafted tokens in one
// pass and returns the accepted drafts followed by the target's own next
// token: greedy on the device (argmax rows), sampling at a temperature on
// the head's softmax rows, or on the host's logits, masked by a grammar's
// masks where it has them.
func (g *generation) verifyPass(ctx context.Context, drafted []int32, dists [][]float32, masks []grammar.Mask) ([]int32, error) {
	batch := append(g.history[:len(g.history):len(g.history)], drafted...)
	rows := len(drafted) + 1
	switch {
	case onDevice(g.req):
		ids, err := g.r.target.runArgmax(ctx, batch, rows)
		if err != nil {
			return nil, err
		}
		n := spec.GreedyAccepted(drafted, ids)
		return append(drafted[:n:n], ids[n]), nil
	case g.probsOnHead():
		probs, err := g.r.target.runProbs(ctx, batch, rows, g.sampler.Params().Temperature, g.rows)
		if err != nil {
			return nil, err
		}
		g.rows = probs
		return g.verifyProbs(probs, drafted, dists)
	}
	logits, err := g.r.target.run(ctx, batch, rows)
	if err != nil {
		return nil, err
	}
	maskRows(logits, masks)
	return g.verify(logits, drafted, dists)
}

// captureLead is how many rounds before a probe falls due a paused
// capture resumes, so that the probe's draft reads current states for the
// last positions before it.
const captureLead = 2

// pauseCapture pauses the target's capture for a head-sharing draft
// (EAGLE-3, DFlash) while the chooser keeps drafting off: the states this
// pass captures are read by the next round's draft only, and a paused
// pass costs what the target alone does (on a launch-bound GPU target,
// the copies are a tenth of a step). A draft that finds states missing
// after a paused stretch drafts on stale ones or not at all; only what it
// proposes changes, never the output. It reports whether the pass
// captures.
func (g *generation) pauseCapture() bool {
	switch {
	case g.chooser == nil || !g.r.sharesHead():
		return false
	case g.drafting.Fixed():
		return true // a fixed length drafts every round
	}
	capture := g.chooser.MayDraftSoon(captureLead) && !g.chooser.Recalibrating()
	g.r.target.m.PauseCapture(!capture)
	return capture
}

// sharesHead reports whether the draft reads the target's captured states.
func (r *Runner) sharesHead() bool {
	return r.draft != nil && (r.draftKind == spec.DraftEagle3 || r.draftKind == spec.DraftDFlash)
}

// now reads the chooser's clock; the zero time without a chooser.
func (g *generation) now() time.Time {
	if g.chooser == nil {
		return time.Time{}
	}
	return g.chooser.Now()
}

// verified times the target's pass of rows rows from start, for the
// chooser; capturing says it also captured states for the draft.
func (g *generation) verified(start time.Time, rows int, capturing bool) {
	switch {
	case g.chooser == nil:
	case capturing:
		g.chooser.VerifiedCapturing(start, rows)
	default:
		g.chooser.Verified(start, rows)
	}
}

// learn tells the chooser how the step went, tried drafted tokens and out
// made, and reports its next choice. A drafted token the draft's
// confidence cut counts as a rejected one: the chooser's acceptance is
// the chance that a drafted position brings a token.
func (g *generation) learn(tried, out int) {
	if g.chooser == nil {
		return
	}
	g.chooser.Accepted(tried, out-1)
	g.drafted, g.took, g.made = tried, g.took+g.chooser.LastRound(), g.made+out
	g.report()
}

// draftLength is how many tokens this step drafts: the request's fixed
// length, or the chooser's (at least the request's Min while drafting is
// on), within the tokens the request has left.
func (g *generation) draftLength() int {
	if g.chooser == nil {
		return 0
	}
	k := g.drafting.Max
	if !g.drafting.Fixed() {
		if k = g.chooser.Next(k); k > 0 {
			k = max(k, g.drafting.Min)
		}
	}
	return max(0, min(k, g.remaining()-1))
}

// passes are the draft passes a proposal's time is the cost of, for the
// chooser: none when the draft caught up on more than the last step left
// it behind (the first step after steps it sat out), which is not a
// step's cost.
func (g *generation) passes(p proposal) int {
	if p.behind > g.drafted+1 {
		return 0
	}
	return p.passes
}

// draftSize is what the chooser measures a proposal's draft call by: its
// passes (g.passes), or for a block drafter the block's length, which its
// one pass costs by.
func (g *generation) draftSize(p proposal) int {
	n := g.passes(p)
	if n > 0 && p.block > 0 {
		return p.block
	}
	return n
}

// report puts the draft length's state into the statistics.
func (g *generation) report() {
	d := g.chooser.Decision()
	s := &g.stats
	s.DraftK, s.Drafting, s.DraftOff, s.ExpectedSpeedup = d.K, d.Reason == "", d.Reason, d.ExpectedSpeedup
	switch {
	case g.drafting.Fixed():
		s.DraftK, s.Drafting, s.DraftOff = g.drafting.Max, true, ""
	case d.K > 0:
		s.DraftK = max(g.drafting.Min, min(d.K, g.drafting.Max))
	}
	if d.Alone > 0 && g.took > 0 {
		s.Speedup = float64(g.made) * float64(d.Alone) / float64(g.took)
	}
}

// verify returns the accepted drafted tokens followed by the target's own
// next token: greedy keeps drafts while they equal the target's choice;
// sampling keeps each with probability min(1, p/q) and replaces the first
// rejected one by a draw from the residual max(0, p - q).
func (g *generation) verify(logits []float32, drafted []int32, dists [][]float32) ([]int32, error) {
	vocab := len(logits) / (len(drafted) + 1)
	row := func(i int) []float32 { return logits[i*vocab : (i+1)*vocab] }
	hist := append(g.history[:len(g.history):len(g.history)], drafted...)
	out := make([]int32, 0, len(drafted)+1)
	greedy := g.req.Sampling.Greedy()
	for i, d := range drafted {
		h := hist[:len(g.history)+i]
		if greedy {
			t, err := g.sampler.Sample(row(i), h)
			if err != nil || t != d {
				return append(out, t), err
			}
			out = append(out, t)
			continue
		}
		p, err := g.sampler.Probs(g.probs, row(i), h)
		if err != nil {
			return nil, err
		}
		g.probs = p
		q := g.oneHot(dists, i, d)
		if spec.Accept(p, q, d, g.sampler.Uniform()) {
			out = append(out, d)
			continue
		}
		return append(out, spec.Residual(p, q, g.sampler.Uniform())), nil
	}
	t, err := g.sampler.Sample(row(len(drafted)), hist)
	return append(out, t), err
}

// probsOnHead reports whether this round samples on the target's head's
// softmax rows (verifyProbs): sampling at a temperature alone,
// unconstrained, with the head on a GPU (Runner.probs); a round that
// drafted nothing too, so that the target alone pays no host pass of
// exponentials for its token either (it draws as verify would, with the
// same randomness).
func (g *generation) probsOnHead() bool {
	return g.r.probs && g.req.Constraint == nil && g.sampler.Params().TemperatureOnly()
}

// verifyProbs is verify for sampling at a temperature alone, on the
// target's distributions as its head computed them (model.ForwardProbs):
// each drafted token is kept with probability min(1, p/q), one look-up
// each; the first rejected one is replaced by a draw from the residual,
// and a round that keeps every draft draws the next token from the last
// row. The randomness is drawn as verify draws it.
func (g *generation) verifyProbs(probs []float32, drafted []int32, dists [][]float32) ([]int32, error) {
	vocab := len(probs) / (len(drafted) + 1)
	out := make([]int32, 0, len(drafted)+1)
	for i, d := range drafted {
		p := probs[i*vocab : (i+1)*vocab]
		if err := finiteProbs(p); err != nil {
			return nil, fmt.Errorf("engine: verify: %w", err)
		}
		q := g.oneHot(dists, i, d)
		if spec.Accept(p, q, d, g.sampler.Uniform()) {
			out = append(out, d)
			continue
		}
		return append(out, spec.Residual(p, q, g.sampler.Uniform())), nil
	}
	t, _, err := drawProbs(g.sampler, probs[len(drafted)*vocab:], 0)
	if err != nil {
		return nil, fmt.Errorf("engine: verify: %w", err)
	}
	return append(out, t), nil
}

// oneHot is dists[i], or a certain distribution on d when the drafter gave
// none: zeros up to d and 1 at d (spec.Accept and spec.Residual take the
// tokens past it as 0), valid until the next call.
func (g *generation) oneHot(dists [][]float32, i int, d int32) []float32 {
	if dists != nil {
		return dists[i]
	}
	if cap(g.certain) <= int(d) {
		g.certain = make([]float32, d+1)
	}
	clear(g.certain)
	g.certain = g.certain[:d+1]
	g.certain[d] = 1
	return g.certain
}

// remaining is how many more tokens the request allows.
func (g *generation) remaining() int {
	left := g.r.target.m.Context() - len(g.history)
	if g.req.MaxTokens > 0 {
		left = min(left, g.req.MaxTokens-g.stats.GeneratedTokens)
	}
	return left
}

// accept appends tokens to the output up to the first end-of-generation
// token, the token limit or a stop string, emits them, and reports whether
// generation is finished.
func (g *generation) accept(tokens []int32) bool {
	var ids []int32
	var text strings.Builder
	finish := ""
	for _, t := range tokens {
		if g.remaining() <= 0 {
			finish = "length"
			break
		}
		g.history = append(g.history, t)
		g.stats.GeneratedTokens++
		ids = append(ids, t)
		if g.r.tok.IsEOG(t) && !g.req.IgnoreEOS {
			finish = "stop"
			break
		}
		if g.r.tok.TokenType(t) != tokenizer.TypeControl { // <|im_end|> and the like are not text
			text.WriteString(g.stream.Add(t))
		}
	}
	if finish == "" && g.grammarComplete() {
		finish = "stop"
	}
	if finish == "" && g.remaining() <= 0 {
		finish = "length"
	}
	if finish != "" {
		text.WriteString(g.stream.Flush())
	}
	piece, stopped := g.applyStop(text.String(), finish != "")
	if stopped {
		finish = "stop"
	}
	g.stats.FinishReason = finish
	g.emit(Event{Kind: EventToken, Text: piece, IDs: ids, Stats: g.stats})
	return finish != ""
}

// applyStop cuts the text at the first stop string and holds back a tail
// that could be the start of one, so a stop string never reaches the user.
func (g *generation) applyStop(piece string, final bool) (string, bool) {
	if len(g.req.Stop) == 0 {
		return piece, false
	}
	buf := g.held + piece
	for _, s := range g.req.Stop {
		if s == "" {
			continue
		}
		if i := strings.Index(g.text.String()+buf, s); i >= 0 {
			out := (g.text.String() + buf)[g.text.Len():max(i, g.text.Len())]
			g.text.WriteString(out)
			g.held = ""
			return out, true
		}
	}
	keep := 0
	if !final {
		for _, s := range g.req.Stop {
			for k := min(len(s)-1, len(buf)); k > keep; k-- {
				if strings.HasSuffix(buf, s[:k]) {
					keep = k
					break
				}
			}
		}
	}
	out := buf[:len(buf)-keep]
	g.held = buf[len(buf)-keep:]
	g.text.WriteString(out)
	return out, false
}
