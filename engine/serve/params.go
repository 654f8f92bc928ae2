package serve

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/tandem-run/tandem/engine"
	"github.com/tandem-run/tandem/engine/chat"
)

// maxStops bounds the stop strings of one request: each is looked for after
// every token.
const maxStops = 16

// defaultCompletionTokens is /v1/completions' max_tokens when a request
// leaves it out, as OpenAI documents it for that endpoint (chat has none).
const defaultCompletionTokens = 16

// request turns the fields both endpoints share into an engine request,
// checking each against the range OpenAI documents. newSeed seeds a sampled
// request that names no seed.
func (p *sampleParams) request(newSeed func() uint64) (engine.Request, *APIError) {
	req := engine.Request{IgnoreEOS: p.IgnoreEOS}
	s := engine.Sampling{Temperature: 1} // OpenAI's default
	if p.N != nil && *p.N != 1 {
		return req, badRequest("n", "n must be 1: this server generates one choice per request")
	}
	if p.MaxTokens != nil {
		if *p.MaxTokens < 1 {
			return req, badRequest("max_tokens", "max_tokens must be at least 1, not %d", *p.MaxTokens)
		}
		req.MaxTokens = *p.MaxTokens
	}
	if v := p.Temperature; v != nil {
		if *v < 0 || *v > 2 {
			return req, badRequest("temperature", "temperature must be between 0 and 2, not %g", *v)
		}
		s.Temperature = *v
	}
	if v := p.TopP; v != nil {
		if *v < 0 || *v > 1 {
			return req, badRequest("top_p", "top_p must be between 0 and 1, not %g", *v)
		}
		s.TopP = *v
		if *v == 0 { // a nucleus of probability 0 keeps only the likeliest token
			s.Temperature, s.TopP = 0, 0
		}
	}
	if v := p.TopK; v != nil {
		if *v < -1 {
			return req, badRequest("top_k", "top_k must be 0 or -1 (off) or positive, not %d", *v)
		}
		s.TopK = max(*v, 0)
	}
	if v := p.MinP; v != nil {
		if *v < 0 || *v > 1 {
			return req, badRequest("min_p", "min_p must be between 0 and 1, not %g", *v)
		}
		s.MinP = *v
	}
	rp := p.RepeatPenalty
	if v := p.RepetitionPenalty; v != nil {
		if rp != nil && *rp != *v {
			return req, badRequest("repetition_penalty", "set repeat_penalty or repetition_penalty, not both")
		}
		rp = v
	}
	if rp != nil {
		if *rp < 0 {
			return req, badRequest("repeat_penalty", "repeat_penalty must not be negative, not %g", *rp)
		}
		s.RepeatPenalty = *rp
	}
	for _, f := range []struct {
		name string
		v    *float64
		dst  *float64
	}{{"presence_penalty", p.PresencePenalty, &s.PresencePenalty}, {"frequency_penalty", p.FrequencyPenalty, &s.FrequencyPenalty}} {
		if f.v == nil {
			continue
		}
		if *f.v < -2 || *f.v > 2 {
			return req, badRequest(f.name, "%s must be between -2 and 2, not %g", f.name, *f.v)
		}
		*f.dst = *f.v
	}
	if p.Seed != nil {
		s.Seed = uint64(*p.Seed)
	} else {
		s.Seed = newSeed()
	}
	if len(p.Stop) > maxStops {
		return req, badRequest("stop", "stop holds %d strings; at most %d are allowed", len(p.Stop), maxStops)
	}
	req.Stop = p.Stop
	if len(p.LogitBias) > 0 {
		return req, badRequest("logit_bias", "logit_bias is not supported")
	}
	if p.IgnoreEOS && req.MaxTokens == 0 {
		return req, badRequest("ignore_eos", "ignore_eos needs max_tokens")
	}
	req.Sampling = s
	return req, nil
}

// request turns a chat request into an engine request.
func (c *chatRequest) request(newSeed func() uint64) (engine.Request, *APIError) {
	req, e := c.sampleParams.request(newSeed)
	if e != nil {
		return req, e
	}
	if v := c.MaxCompletionTokens; v != nil {
		if *v < 1 {
			return req, badRequest("max_completion_tokens", "max_completion_tokens must be at least 1, not %d", *v)
		}
		req.MaxTokens = *v
	}
	switch {
	case c.Logprobs != nil && *c.Logprobs, c.TopLogprobs != nil && *c.TopLogprobs > 0:
		return req, badRequest("logprobs", "logprobs are not supported")
	case len(c.Messages) == 0:
		return req, badRequest("messages", "messages must hold at least one message")
	}
	for i, m := range c.Messages {
		param := fmt.Sprintf("messages[%d]", i)
		role := m.Role
		switch role {
		case "system", "user", "assistant", "tool":
		case "developer": // OpenAI's newer name for system
			role = "system"
		case "":
			return req, badRequest(param+".role", "%s has no role", param)
		default:
			return req, badRequest(param+".role", "role %q is not supported (system, developer, user, assistant, tool are)", role)
		}
		msg := chat.Message{Role: role, Content: string(m.Content), Name: m.Name}
		switch {
		case present(m.ToolCalls) && role != "assistant":
			return req, badRequest(param+".tool_calls", "only assistant messages carry tool_calls")
		case present(m.ToolCalls):
			calls, err := chat.ParseToolCalls(m.ToolCalls, param+".tool_calls")
			if err != nil {
				return req, fieldError(err)
			}
			msg.ToolCalls = calls
		case m.ToolCallID != "" && role != "tool":
			return req, badRequest(param+".tool_call_id", "only tool messages carry a tool_call_id")
		case role == "tool" && m.ToolCallID == "":
			return req, badRequest(param+".tool_call_id", "a tool message must say which call it answers (tool_call_id)")
		}
		msg.ToolCallID = m.ToolCallID
		req.Messages = append(req.Messages, msg)
	}
	// A model whose GGUF has no usable chat template still chats, in ChatML,
	// as llama.cpp's server does; refusing would leave such models unusable
	// from any client.
	req.ChatMLFallback = true
	return req, nil
}

// request turns a text completion request into an engine request.
func (c *completionRequest) request(newSeed func() uint64) (engine.Request, *APIError) {
	req, e := c.sampleParams.request(newSeed)
	if e != nil {
		return req, e
	}
	if c.MaxTokens == nil {
		req.MaxTokens = defaultCompletionTokens
	}
	switch {
	case c.Echo:
		return req, badRequest("echo", "echo is not supported")
	case c.Suffix != nil && *c.Suffix != "":
		return req, badRequest("suffix", "suffix (fill in the middle) is not supported")
	case c.BestOf != nil && *c.BestOf != 1:
		return req, badRequest("best_of", "best_of must be 1")
	case c.Logprobs != nil && *c.Logprobs > 0:
		return req, badRequest("logprobs", "logprobs are not supported")
	}
	prompt, e := parsePrompt(c.Prompt)
	req.Prompt = prompt
	return req, e
}

// parsePrompt accepts a string or an array of exactly one string.
func parsePrompt(raw json.RawMessage) (string, *APIError) {
	if !present(raw) {
		return "", badRequest("prompt", "prompt is required")
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		if s == "" {
			return "", badRequest("prompt", "prompt is empty: there is nothing to complete")
		}
		return s, nil
	}
	var list []json.RawMessage
	if json.Unmarshal(raw, &list) != nil {
		return "", badRequest("prompt", "prompt must be a string")
	}
	switch {
	case len(list) == 0:
		return "", badRequest("prompt", "prompt is empty")
	case json.Unmarshal(list[0], &s) != nil:
		return "", badRequest("prompt", "prompts of token ids are not supported; send text")
	case len(list) != 1:
		return "", badRequest("prompt", "this server completes one prompt per request, not %d", len(list))
	case s == "":
		return "", badRequest("prompt", "prompt is empty: there is nothing to complete")
	}
	return s, nil
}

// present reports whether a raw field holds something other than null or
// an empty array.
func present(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) > 0 && !bytes.Equal(raw, []byte("null")) && !bytes.Equal(raw, []byte("[]"))
}
