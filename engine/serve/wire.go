package serve

import (
	"encoding/json"

	"github.com/tandem-run/tandem/engine/chat"
)

// Request bodies. Every field a client may send is listed, so that decoding
// with DisallowUnknownFields turns anything else into a 400 naming the field;
// fields listed but not supported are rejected in params.go when they ask
// for something (tools, logprobs, n > 1, ...).

// sampleParams are the fields both completion endpoints share.
type sampleParams struct {
	Model             string             `json:"model"`
	MaxTokens         *int               `json:"max_tokens"`
	Temperature       *float64           `json:"temperature"`
	TopP              *float64           `json:"top_p"`
	TopK              *int               `json:"top_k"`              // extension (llama.cpp, vLLM)
	MinP              *float64           `json:"min_p"`              // extension (llama.cpp, vLLM)
	RepeatPenalty     *float64           `json:"repeat_penalty"`     // extension (llama.cpp's name)
	RepetitionPenalty *float64           `json:"repetition_penalty"` // extension (vLLM's name)
	PresencePenalty   *float64           `json:"presence_penalty"`
	FrequencyPenalty  *float64           `json:"frequency_penalty"`
	Seed              *int64             `json:"seed"`
	Stop              stopList           `json:"stop"`
	N                 *int               `json:"n"`
	Stream            bool               `json:"stream"`
	StreamOptions     *streamOptions     `json:"stream_options"`
	IgnoreEOS         bool               `json:"ignore_eos"` // extension (llama.cpp, vLLM)
	Grammar           string             `json:"grammar"`    // extension (llama.cpp): GBNF the output follows
	LogitBias         map[string]float64 `json:"logit_bias"`
	User              string             `json:"user"` // accepted and unused
}

type streamOptions struct {
	IncludeUsage       bool `json:"include_usage"`
	IncludeObfuscation bool `json:"include_obfuscation"` // accepted; there is nothing to obfuscate on loopback
}

type chatRequest struct {
	sampleParams
	Messages            []chatMessage   `json:"messages"`
	MaxCompletionTokens *int            `json:"max_completion_tokens"`
	Logprobs            *bool           `json:"logprobs"`
	TopLogprobs         *int            `json:"top_logprobs"`
	ResponseFormat      json.RawMessage `json:"response_format"`
	Tools               json.RawMessage `json:"tools"`
	ToolChoice          json.RawMessage `json:"tool_choice"`
	ParallelToolCalls   *bool           `json:"parallel_tool_calls"`
	Store               *bool           `json:"store"`    // accepted; nothing is stored
	Metadata            json.RawMessage `json:"metadata"` // accepted and unused
}

// chatMessage is one message as clients send it, including the fields an
// assistant message echoed back from a response carries.
type chatMessage struct {
	Role        string          `json:"role"`
	Content     messageContent  `json:"content"`
	Name        string          `json:"name"`
	Refusal     *string         `json:"refusal"`
	ToolCalls   json.RawMessage `json:"tool_calls"`
	ToolCallID  string          `json:"tool_call_id"`
	Annotations json.RawMessage `json:"annotations"`
}

type completionRequest struct {
	sampleParams
	Prompt   json.RawMessage `json:"prompt"`
	Echo     bool            `json:"echo"`
	Suffix   *string         `json:"suffix"`
	BestOf   *int            `json:"best_of"`
	Logprobs *int            `json:"logprobs"`
}

// Response bodies.

type usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

// tandemStats is the extension field with the speculative statistics.
type tandemStats struct {
	Drafted     int     `json:"drafted"`
	Accepted    int     `json:"accepted"`
	Acceptance  float64 `json:"acceptance"`
	Steps       int     `json:"steps"`
	PrefillTokS float64 `json:"prompt_tokens_per_second"`
	DecodeTokS  float64 `json:"decode_tokens_per_second"`
}

// completion is a chat completion, a text completion, or one chunk of
// either's stream; Object says which.
type completion struct {
	ID      string       `json:"id"`
	Object  string       `json:"object"`
	Created int64        `json:"created"`
	Model   string       `json:"model"`
	Choices []choice     `json:"choices"`
	Usage   *usage       `json:"usage,omitempty"`
	Tandem  *tandemStats `json:"tandem,omitempty"`
}

type choice struct {
	Index        int           `json:"index"`
	Message      *wholeMessage `json:"message,omitempty"` // whole chat answer
	Delta        *chatDelta    `json:"delta,omitempty"`   // chat stream chunk
	Text         *string       `json:"text,omitempty"`    // text completion
	Logprobs     *struct{}     `json:"logprobs"`          // always null
	FinishReason *string       `json:"finish_reason"`
}

type chatDelta struct {
	Role      string          `json:"role,omitempty"`
	Content   string          `json:"content,omitempty"`
	ToolCalls []toolCallDelta `json:"tool_calls,omitempty"`
}

// toolCallDelta is a piece of a streamed tool call: the first names the
// call (id, type, function name, arguments ""), later ones add to its
// arguments.
type toolCallDelta struct {
	Index    int           `json:"index"`
	ID       string        `json:"id,omitempty"`
	Type     string        `json:"type,omitempty"`
	Function functionDelta `json:"function"`
}

type functionDelta struct {
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments"`
}

// wholeMessage always carries its content, even when empty, except that
// an answer of tool calls alone has null content, as OpenAI's has.
type wholeMessage struct {
	Role      string          `json:"role"`
	Content   *string         `json:"content"`
	ToolCalls []chat.ToolCall `json:"tool_calls,omitempty"`
}

type modelList struct {
	Object string      `json:"object"`
	Data   []modelCard `json:"data"`
}

type modelCard struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
}
