package chat

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/ardanlabs/jinja"

	"github.com/tandem-run/tandem/engine/gguf"
)

// ErrTemplate marks a chat template that cannot be used: absent, refused,
// failing to render or over a limit. Callers may offer ChatML instead.
var ErrTemplate = errors.New("chat template unusable")

// Message is one turn of a conversation.
type Message struct {
	Role    string `json:"role"` // "system", "user", "assistant" or "tool"
	Content string `json:"content"`
	// ToolCalls are the calls an assistant turn made.
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
	// ToolCallID and Name say which call a tool message answers.
	ToolCallID string `json:"tool_call_id,omitempty"`
	Name       string `json:"name,omitempty"`
}

// Options are the per-render template variables.
type Options struct {
	AddGenerationPrompt bool  // end with the header of the assistant's next turn
	EnableThinking      *bool // Qwen3's switch; nil leaves it undefined
	// Now, when set, is passed as date_string ("02 Jan 2006"), which Llama
	// 3.1-style templates print instead of asking the clock.
	Now time.Time
	// Tools are the functions the model may call (the template's tools
	// variable; absent when empty).
	Tools []Tool
}

// Limits bound one render. Each is checked as the render goes (see
// instrument.go), so a render over one stops there.
type Limits struct {
	Time   time.Duration // wall-clock time
	Output int           // bytes of output, and of any one value or piece printed
	Range  int           // elements all range() calls together may make
	Items  int           // elements of any one list or dict, and iterations of any one loop
	// Work is the bytes all strings made, and all output printed, may add up
	// to, plus eight times the bytes of the messages: real templates make a
	// few copies of each message, hostile ones make values without end.
	Work int64
}

// Default limits: generous for real templates (which render in
// microseconds into a few kilobytes), small enough to stop a hostile one.
const (
	DefaultTimeLimit   = 2 * time.Second
	DefaultOutputLimit = 4 << 20
	DefaultRangeLimit  = 100_000
	DefaultItemLimit   = 1 << 17
	DefaultWorkLimit   = 32 << 20
	MaxTemplateBytes   = 256 << 10
)

// DefaultLimits are the limits New gives a template.
func DefaultLimits() Limits {
	return Limits{Time: DefaultTimeLimit, Output: DefaultOutputLimit, Range: DefaultRangeLimit,
		Items: DefaultItemLimit, Work: DefaultWorkLimit}
}

// Template is a compiled chat template with its special-token strings. It is
// immutable and safe for concurrent use.
type Template struct {
	source   string
	compiled *jinja.Template
	bos, eos string
	limits   Limits
	tools    func() ToolSyntax // probed once, on first use
}

// New compiles a template; bos and eos are the texts of the model's BOS and
// EOS tokens ("" if it has none).
func New(source, bos, eos string) (*Template, error) {
	if err := check(source); err != nil {
		return nil, err
	}
	compiled, err := compile(source)
	if err != nil {
		return nil, fmt.Errorf("chat: %w: %w", err, ErrTemplate)
	}
	t := &Template{source: source, compiled: compiled, bos: bos, eos: eos, limits: DefaultLimits()}
	t.tools = sync.OnceValue(t.probeTools)
	return t, nil
}

// compile guards the parser too (it is recursive descent over untrusted
// text), then puts the render's guards into the tree.
func compile(source string) (t *jinja.Template, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("parser failed: %v", r)
		}
	}()
	if t, err = jinja.Compile(source); err != nil {
		return nil, err
	}
	return t, instrument(t)
}

// FromGGUF reads tokenizer.chat_template and the BOS/EOS token texts.
func FromGGUF(f *gguf.File) (*Template, error) {
	source, ok := f.String("tokenizer.chat_template")
	if !ok || source == "" {
		return nil, fmt.Errorf("chat: %s has no tokenizer.chat_template: %w", f.Path, ErrTemplate)
	}
	tokens, _ := f.Strings("tokenizer.ggml.tokens")
	text := func(key string) string {
		id, ok := f.Int("tokenizer.ggml." + key)
		if !ok || id < 0 || id >= int64(len(tokens)) {
			return ""
		}
		return tokens[id]
	}
	t, err := New(source, text("bos_token_id"), text("eos_token_id"))
	if err != nil {
		return nil, fmt.Errorf("chat: %s: %w", f.Path, err)
	}
	return t, nil
}

// Source is the template text.
func (t *Template) Source() string { return t.source }

// WithLimits returns a copy of t that renders under l; zero fields keep
// their defaults.
func (t *Template) WithLimits(l Limits) *Template {
	d := DefaultLimits()
	c := *t
	c.limits = Limits{Time: cmp.Or(l.Time, d.Time), Output: cmp.Or(l.Output, d.Output),
		Range: cmp.Or(l.Range, d.Range), Items: cmp.Or(l.Items, d.Items), Work: cmp.Or(l.Work, d.Work)}
	return &c
}

// Render returns the prompt for messages. It fails with an error wrapping
// ErrTemplate when the template raises an exception, breaks or overruns a
// limit, and with ctx's error when ctx ends first. The render runs on the
// caller's goroutine and checks ctx and its limits at every guarded
// operation, so when Render returns nothing of it goes on running.
func (t *Template) Render(ctx context.Context, messages []Message, opts Options) (_ string, err error) {
	if err := ctx.Err(); err != nil {
		return "", fmt.Errorf("chat: %w", err)
	}
	rctx, cancel := context.WithTimeout(ctx, t.limits.Time)
	defer cancel()
	vars, err := t.variables(messages, opts)
	if err != nil {
		return "", fmt.Errorf("chat: %w: %w", err, ErrTemplate)
	}
	newSandbox(rctx, t.limits, messages, opts.Tools).vars(vars)
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("chat: template engine failed: %v: %w", r, ErrTemplate)
		}
	}()
	out, err := t.compiled.RenderValues(vars)
	switch {
	case ctx.Err() != nil:
		return "", fmt.Errorf("chat: %w", ctx.Err())
	case rctx.Err() != nil:
		return "", fmt.Errorf("chat: rendering took over %v: %w", t.limits.Time, ErrTemplate)
	case err != nil:
		return "", fmt.Errorf("chat: rendering: %w: %w", err, ErrTemplate)
	case len(out) > t.limits.Output:
		return "", fmt.Errorf("chat: rendering made %d bytes, over the %d-byte limit: %w", len(out), t.limits.Output, ErrTemplate)
	}
	return out, nil
}

// variables are what HF transformers passes to a chat template.
func (t *Template) variables(messages []Message, opts Options) (map[string]jinja.Value, error) {
	msgs := make([]jinja.Value, len(messages))
	for i, m := range messages {
		msgs[i] = messageValue(m)
	}
	budget := t.limits.Range
	vars := map[string]jinja.Value{
		"messages":              jinja.NewList(msgs),
		"add_generation_prompt": jinja.NewBool(opts.AddGenerationPrompt),
		"range":                 boundedRange(&budget),
	}
	// HF leaves a token the tokenizer lacks undefined rather than empty.
	if t.bos != "" {
		vars["bos_token"] = jinja.NewString(t.bos)
	}
	if t.eos != "" {
		vars["eos_token"] = jinja.NewString(t.eos)
	}
	if opts.EnableThinking != nil {
		vars["enable_thinking"] = jinja.NewBool(*opts.EnableThinking)
	}
	if !opts.Now.IsZero() {
		vars["date_string"] = jinja.NewString(opts.Now.Format("02 Jan 2006"))
	}
	if len(opts.Tools) > 0 {
		tools, err := toolsValue(opts.Tools)
		if err != nil {
			return nil, err
		}
		vars["tools"] = tools
	}
	return vars, nil
}
