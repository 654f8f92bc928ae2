// Package engine is Tandem's runtime facade: it loads a target model and an
// optional draft, and generates text with speculative decoding. Calls are
// synchronous; the caller owns the goroutine and the cancel (ctx). The
// window, the command line and the server all drive it through Load,
// Runner.Generate and Runner.Close.
package engine

import (
	"time"

	"github.com/tandem-run/tandem/engine/chat"
	"github.com/tandem-run/tandem/engine/grammar"
	"github.com/tandem-run/tandem/engine/plan"
	"github.com/tandem-run/tandem/engine/sample"
)

// Config says what to load. Context, Batch, the KV types and Placement are
// what the memory planner plans (the defaults are plan.Input.Resolve's);
// Plan, when set, is such a plan made beforehand, loaded as it is.
type Config struct {
	Target string // path of the target GGUF
	// Draft is an optional draft GGUF: a small model of the same vocabulary,
	// or an EAGLE-3 draft that borrows the target's embedding and head.
	Draft string
	// Lookup drafts from the context itself (prompt lookup / n-grams); with
	// no Draft it is the whole drafting scheme.
	Lookup  bool
	Backend string // "cpu" (default) or "cuda": the one device when Placement is nil
	GPU     int    // CUDA device number for the cuda backend (PCI bus order)
	Context int    // KV-cache length in tokens; 0 = min(trained context, 4096)
	Batch   int    // most tokens per forward pass; 0 = 512, at most Context
	// KVType is the K and V caches' type: "f16" (default), "q8_0", "q4_0"
	// or "f32"; KVTypeV, when set, is V's (llama.cpp's -ctk and -ctv).
	KVType, KVTypeV string
	Threads         int // CPU worker threads; 0 = all cores
	// Parallel is how many requests the runner decodes together (tandem
	// serve --parallel): concurrent Generate calls each take one of the
	// target's Parallel KV caches of Context tokens and are decoded in one
	// target pass a step, without a draft (Stats.DraftOff says so).
	// 0 or 1: one at a time, with the draft.
	Parallel int
	// padBatch runs a batch's passes over every slot, as on a GPU, on
	// any device: for tests of that layout on the CPU.
	padBatch bool
	// Placement spreads the models over several devices (placement.go);
	// nil runs both on the one device of Backend and GPU.
	Placement *Placement
	// Plan is the plan to load, as a preview made it (PlanFor, or
	// plan.Make on the window's layout): the models load exactly as it
	// says, and Context, Batch, the KV types and Placement are not read.
	// It must be a plan of Target and Draft.
	Plan *plan.Plan
	// Clock times prefill, decode and the draft and target passes the
	// draft length is chosen by (nil: time.Now).
	Clock func() time.Time
	// WarmUp bounds the pair's warm-up at load, on Clock: with a draft
	// model, Load times every draft length and verification a request
	// may run and starts the draft length's choice from those costs
	// (warmup.go). 0 takes the default (a second); negative skips it, and
	// the first requests measure the costs themselves.
	WarmUp time.Duration
}

// Sampling are the settings that turn logits into a token; the zero value
// is greedy. Drafts are verified under exactly these settings.
type Sampling = sample.Params

// Request is one generation.
type Request struct {
	// Prompt is raw text, tokenized with special tokens parsed
	// ("<|im_start|>user..."): the way to write special tokens yourself.
	// Used when Messages is empty.
	Prompt string
	// Messages are rendered with the model's chat template and a generation
	// prompt. Their text is tokenized as text: "<|im_end|>" typed in a
	// message is not the special token (only the template's markup makes
	// those). A template that fails to render is an error wrapping
	// chat.ErrTemplate; set ChatMLFallback to use plain ChatML instead.
	Messages       []chat.Message
	ChatMLFallback bool
	// PromptIDs, when set, are the prompt's token ids, run as they are (no
	// BOS added): Prompt and Messages are then not used. For checks against
	// reference outputs given as ids.
	PromptIDs []int32
	// Tools are the functions the model may call, rendered into the prompt
	// by the model's chat template: a template without tool syntax is an
	// error wrapping chat.ErrNoTools, and there is no ChatML fallback.
	// The calls come back as text in the template's syntax
	// (chat.ToolParser reads them).
	Tools []chat.Tool
	// Constraint, when set, limits the output to its grammar's language
	// (from Runner.Constraint): every token, drafted ones too, is chosen
	// under the grammar's mask, and generation stops with "stop" once the
	// output is complete, even with IgnoreEOS.
	Constraint *grammar.Constraint

	MaxTokens int  // 0 = until end of generation or the context is full
	IgnoreEOS bool // generate exactly MaxTokens tokens
	Stop      []string
	Sampling  Sampling
	// NoDraft generates with the target alone even when a draft is loaded.
	NoDraft bool
	// Drafting bounds the drafts of this request; the zero value is
	// DefaultDrafting.
	Drafting Drafting
}

// Drafting are the per-request settings of speculative drafting, changeable
// between requests without reloading the models. Zero fields take
// DefaultDrafting's.
//
// Below Max, the Runner chooses each round's draft length from the costs
// and acceptance it measures on the loaded pair (spec.Chooser), down to 0,
// the target alone, where drafting does not pay; Min is the fewest it
// drafts while drafting is on. Min == Max fixes the length: every round
// drafts exactly Max tokens (or fewer where PMin cuts them short), whatever
// it costs.
type Drafting struct {
	Max int // most tokens drafted per step
	Min int // fewest drafted per step while drafting is on (at most Max)
	// PMin stops a round's drafting where the draft's top probability is
	// below it (negative: never), for sampled, penalised or constrained
	// drafting and a fixed length; unconstrained greedy drafting of a
	// chosen length runs every pass on the device, where the cut would
	// save no draft time (generate.go).
	PMin float64
}

// Fixed reports whether every round drafts Max tokens.
func (d Drafting) Fixed() bool { return d.Min == d.Max }

// DefaultDrafting is what a zero Drafting field means.
func DefaultDrafting() Drafting { return Drafting{Max: 8, Min: 1, PMin: 0.5} }

// Resolve fills the zero fields from DefaultDrafting and keeps Min at most
// Max.
func (d Drafting) Resolve() Drafting {
	def := DefaultDrafting()
	if d.Max <= 0 {
		d.Max = def.Max
	}
	if d.Min <= 0 {
		d.Min = def.Min
	}
	d.Min = min(d.Min, d.Max)
	if d.PMin == 0 {
		d.PMin = def.PMin
	}
	return d
}

// EventKind says what an Event carries.
type EventKind uint8

const (
	// EventToken carries newly accepted text (complete UTF-8) and token ids.
	EventToken EventKind = iota
	// EventStep carries the statistics after one speculative step.
	EventStep
)

// Event is emitted while generating, on the caller's goroutine.
type Event struct {
	Kind  EventKind
	Text  string  // EventToken: text of IDs, held back until UTF-8 is complete
	IDs   []int32 // EventToken: tokens accepted in this step
	Stats Stats   // running totals
}

// Stats are the totals of a generation, also emitted as running totals.
type Stats struct {
	PromptTokens    int     `json:"prompt_tokens"`
	GeneratedTokens int     `json:"generated_tokens"`
	Drafted         int     `json:"drafted"`
	Accepted        int     `json:"accepted"`
	Steps           int     `json:"steps"`
	PrefillSeconds  float64 `json:"prefill_seconds"`
	DecodeSeconds   float64 `json:"decode_seconds"`
	// AcceptedAt[i] counts steps whose i-th drafted token was accepted.
	AcceptedAt   []int  `json:"accepted_at,omitempty"`
	FinishReason string `json:"finish_reason"` // "stop" (EOS or a stop string), "length", "cancelled"

	// The draft length after the last step, when a drafter is loaded:
	// DraftK tokens the next step drafts (0: the target alone), Drafting
	// whether it drafts, DraftOff why not (spec.ReasonCosts: it does not
	// pay on this pair; ReasonNoDraft: the request said so).
	DraftK   int    `json:"draft_k"`
	Drafting bool   `json:"drafting"`
	DraftOff string `json:"draft_off,omitempty"`
	// Speedup is the steps' measured tokens per second over the target
	// alone's, one token per its measured one-row pass (0: not measured
	// yet). ExpectedSpeedup is what the chooser expects of the next step
	// (of the best length when drafting is off).
	Speedup         float64 `json:"speedup,omitempty"`
	ExpectedSpeedup float64 `json:"expected_speedup,omitempty"`
}

// ReasonNoDraft is why drafting is off when the request turned it off.
const ReasonNoDraft = "drafting is off for this request"

// Acceptance is the fraction of drafted tokens that were accepted.
func (s Stats) Acceptance() float64 {
	if s.Drafted == 0 {
		return 0
	}
	return float64(s.Accepted) / float64(s.Drafted)
}

// PrefillTokS is prompt tokens per second.
func (s Stats) PrefillTokS() float64 { return rate(s.PromptTokens, s.PrefillSeconds) }

// DecodeTokS is generated tokens per second.
func (s Stats) DecodeTokS() float64 { return rate(s.GeneratedTokens, s.DecodeSeconds) }

func rate(n int, secs float64) float64 {
	if secs <= 0 {
		return 0
	}
	return float64(n) / secs
}

// Progress reports loading: bytes of weights placed out of the total.
type Progress struct {
	// Model is "target" or "draft" while weights are placed, then
	// "warm-up" while the pair's costs are timed (TensorsDone of Tensors
	// draft lengths timed; no bytes).
	Model       string
	BytesDone   int64
	BytesTotal  int64
	TensorsDone int
	Tensors     int
}
