package serve

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"

	"github.com/tandem-run/tandem/engine"
	"github.com/tandem-run/tandem/engine/gguf"
	"github.com/tandem-run/tandem/engine/internal/schematest"
	"github.com/tandem-run/tandem/kernels/sharedtest"
)

func openaiClient(srv *httptest.Server) *openai.Client {
	c := openai.NewClient(option.WithBaseURL(srv.URL+"/v1/"), option.WithAPIKey("unused"),
		option.WithHTTPClient(srv.Client()), option.WithMaxRetries(0))
	return &c
}

// chatOnce runs params whole or streamed (through the client's
// accumulator) and returns the one choice.
func chatOnce(t *testing.T, client *openai.Client, params openai.ChatCompletionNewParams, stream bool) openai.ChatCompletionChoice {
	t.Helper()
	if !stream {
		resp, err := client.Chat.Completions.New(t.Context(), params)
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Choices) != 1 {
			t.Fatalf("%d choices", len(resp.Choices))
		}
		return resp.Choices[0]
	}
	s := client.Chat.Completions.NewStreaming(t.Context(), params)
	var acc openai.ChatCompletionAccumulator
	for s.Next() {
		if !acc.AddChunk(s.Current()) {
			t.Fatalf("the accumulator refused %s", s.Current().RawJSON())
		}
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if len(acc.Choices) != 1 {
		t.Fatalf("%d choices", len(acc.Choices))
	}
	return acc.Choices[0]
}

func jsonSchemaFormat(schema string) openai.ChatCompletionNewParamsResponseFormatUnion {
	return openai.ChatCompletionNewParamsResponseFormatUnion{OfJSONSchema: &shared.ResponseFormatJSONSchemaParam{
		JSONSchema: shared.ResponseFormatJSONSchemaJSONSchemaParam{Name: "person", Strict: openai.Bool(true), Schema: json.RawMessage(schema)}}}
}

// TestJSONSchemaOverHTTP: with the official client on the demo pair, a
// json_schema request returns JSON that validates, streamed and whole,
// greedy and sampled, with the draft and with the target alone; greedy
// output with the draft is the masked target's alone.
func TestJSONSchemaOverHTTP(t *testing.T) {
	target := sharedtest.Path(t, "models", "factory-target-Q8_0.gguf")
	load := func(draft string) *engine.Runner {
		r, err := engine.Load(t.Context(), engine.Config{Target: target, Draft: draft, Context: 1024}, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { r.Close() })
		return r
	}
	servers := map[string]*openai.Client{
		"draft":        openaiClient(startServer(t, load(sharedtest.Path(t, "models", "factory-draft-Q8_0.gguf")), Options{})),
		"target alone": openaiClient(startServer(t, load(""), Options{})),
	}
	valid := schematest.Validator(t, schematest.Person)
	greedy := map[string]string{}
	for name, client := range servers {
		for _, sampled := range []bool{false, true} {
			for _, stream := range []bool{false, true} {
				params := openai.ChatCompletionNewParams{
					Model:          "demo",
					Messages:       []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Tell me a fortune.")},
					MaxTokens:      openai.Int(400),
					Temperature:    openai.Float(0),
					Seed:           openai.Int(3),
					ResponseFormat: jsonSchemaFormat(schematest.Person),
				}
				if sampled {
					params.Temperature = openai.Float(0.8)
				}
				c := chatOnce(t, client, params, stream)
				what := fmt.Sprintf("%s, sampled %v, stream %v", name, sampled, stream)
				t.Logf("%s: %s", what, c.Message.Content)
				if err := valid(c.Message.Content); err != nil || c.FinishReason != "stop" {
					t.Errorf("%s: %q (%s): %v", what, c.Message.Content, c.FinishReason, err)
				}
				if !sampled {
					if prev, ok := greedy[name]; ok && prev != c.Message.Content {
						t.Errorf("%s: streamed %q, whole %q", what, c.Message.Content, prev)
					}
					greedy[name] = c.Message.Content
				}
			}
		}
	}
	if greedy["draft"] != greedy["target alone"] {
		t.Errorf("greedy with the draft %q, target alone %q", greedy["draft"], greedy["target alone"])
	}
}

// qwen3Fixture is the demo target with the real Qwen3 chat template
// (../shared/testdata/vocab/qwen3-tokenizer_config.json), whose tool
// syntax is Hermes': a model that can be asked to call tools.
func qwen3Fixture(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(sharedtest.Path(t, "testdata", "vocab", "qwen3-tokenizer_config.json"))
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		ChatTemplate string `json:"chat_template"`
	}
	if err := json.Unmarshal(b, &cfg); err != nil || !strings.Contains(cfg.ChatTemplate, "<tool_call>") {
		t.Fatalf("qwen3 template: %v", err)
	}
	f, err := gguf.Open(sharedtest.Path(t, "models", "factory-target-Q8_0.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var w gguf.Writer
	for _, kv := range f.KV {
		if kv.Key == "tokenizer.chat_template" {
			kv.Value = cfg.ChatTemplate
		}
		w.AddKV(kv.Key, kv.Value)
	}
	for i := range f.Tensors {
		ti := &f.Tensors[i]
		data, err := f.TensorData(ti)
		if err != nil {
			t.Fatal(err)
		}
		if err := w.AddTensor(ti.Name, ti.Type, ti.Dims, data); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(t.TempDir(), "factory-target-qwen3-template.gguf")
	if err := w.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	return path
}

const weatherParams = `{"type": "object",
 "properties": {"city": {"type": "string", "maxLength": 16}, "unit": {"enum": ["celsius", "fahrenheit"]}},
 "required": ["city", "unit"]}`

func weatherTools(t *testing.T) []openai.ChatCompletionToolUnionParam {
	t.Helper()
	var p shared.FunctionParameters
	if err := json.Unmarshal([]byte(weatherParams), &p); err != nil {
		t.Fatal(err)
	}
	return []openai.ChatCompletionToolUnionParam{
		openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{Name: "get_weather", Description: openai.String("The weather in a city"), Parameters: p}),
		openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{Name: "get_time", Parameters: shared.FunctionParameters{"type": "object", "properties": map[string]any{}}}),
	}
}

// TestToolRoundTrip: on a model with the Qwen3 template, tool_choice
// required always yields a well-formed call (streamed and whole, greedy
// and sampled), parsed into tool_calls with content null and finish
// reason tool_calls; a named choice calls that function; and the call
// sent back with a tool message is answered (tool_choice auto: the demo
// model, trained on no calls, answers in words).
func TestToolRoundTrip(t *testing.T) {
	// A sampled request's tokens follow from its seed and from the
	// lengths the pair drafts (a drafted token is accepted or resampled
	// with draws a token drawn alone does not use), and the engine
	// chooses those lengths from the times it measures: on the wall
	// clock a seed that made a call on one run rambled in a string
	// argument to the 200-token limit on another. A clock that ticks a
	// millisecond a reading makes the choices, and so the tries, the
	// same on every run.
	r, err := engine.Load(t.Context(), engine.Config{Target: qwen3Fixture(t),
		Draft: sharedtest.Path(t, "models", "factory-draft-Q8_0.gguf"), Context: 1024, Clock: tickClock()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	srv := startServer(t, r, Options{})
	client := openaiClient(srv)
	valid := schematest.Validator(t, weatherParams)
	base := openai.ChatCompletionNewParams{
		Model:      "demo",
		Messages:   []openai.ChatCompletionMessageParamUnion{openai.UserMessage("What is the weather in Paris?")},
		MaxTokens:  openai.Int(200),
		Tools:      weatherTools(t),
		ToolChoice: openai.ChatCompletionToolChoiceOptionUnionParam{OfAuto: openai.String("required")},
	}
	var first openai.ChatCompletionChoice
	for i := range 6 {
		params := base
		params.Seed = openai.Int(int64(i))
		params.Temperature = openai.Float(float64(i%3) * 0.5)
		params.ParallelToolCalls = openai.Bool(i%2 == 0)
		c := chatOnce(t, client, params, i%2 == 1)
		calls := c.Message.ToolCalls
		if len(calls) == 0 || c.FinishReason != "tool_calls" || c.Message.Content != "" {
			t.Errorf("required, try %d: %d calls, finish %q, content %q", i, len(calls), c.FinishReason, c.Message.Content)
			continue
		}
		for _, call := range calls {
			if !strings.HasPrefix(call.ID, "call_") || call.Type != "function" {
				t.Errorf("try %d: call %+v", i, call)
			}
			switch call.Function.Name {
			case "get_weather":
				if err := valid(call.Function.Arguments); err != nil {
					t.Errorf("try %d: arguments %q: %v", i, call.Function.Arguments, err)
				}
			case "get_time":
				if !json.Valid([]byte(call.Function.Arguments)) || !strings.HasPrefix(call.Function.Arguments, "{") {
					t.Errorf("try %d: arguments %q", i, call.Function.Arguments)
				}
			default:
				t.Errorf("try %d: called %q", i, call.Function.Name)
			}
		}
		if i == 0 {
			first = c
		}
		t.Logf("try %d: %s(%s)", i, calls[0].Function.Name, calls[0].Function.Arguments)
	}

	named := base
	named.ToolChoice = openai.ChatCompletionToolChoiceOptionUnionParam{OfFunctionToolChoice: &openai.ChatCompletionNamedToolChoiceParam{
		Function: openai.ChatCompletionNamedToolChoiceFunctionParam{Name: "get_weather"}}}
	named.ParallelToolCalls = openai.Bool(false)
	c := chatOnce(t, client, named, true)
	if len(c.Message.ToolCalls) != 1 || c.Message.ToolCalls[0].Function.Name != "get_weather" || valid(c.Message.ToolCalls[0].Function.Arguments) != nil {
		t.Errorf("named: %+v", c.Message.ToolCalls)
	}

	if len(first.Message.ToolCalls) == 0 {
		t.Fatal("no call to answer")
	}
	call := first.Message.ToolCalls[0]
	answer := base
	answer.ToolChoice = openai.ChatCompletionToolChoiceOptionUnionParam{OfAuto: openai.String("auto")}
	answer.Temperature = openai.Float(0)
	answer.Messages = append(answer.Messages,
		openai.ChatCompletionMessageParamUnion{OfAssistant: &openai.ChatCompletionAssistantMessageParam{
			ToolCalls: []openai.ChatCompletionMessageToolCallUnionParam{call.ToParam()}}},
		openai.ToolMessage(`{"temperature": 21, "sky": "clear"}`, call.ID))
	resp, err := client.Chat.Completions.New(t.Context(), answer)
	if err != nil {
		t.Fatal(err)
	}
	if m := resp.Choices[0].Message; len(m.ToolCalls) != 0 || m.Content == "" || resp.Usage.PromptTokens <= 0 {
		t.Errorf("the answer to a tool message: %s", resp.RawJSON())
	}
}

// TestToolMessagesReachTheEngine: an assistant turn's tool_calls and a
// tool message come to the engine as the chat package's messages, with
// the call's arguments as sent.
func TestToolMessagesReachTheEngine(t *testing.T) {
	gen := &echo{}
	srv := startServer(t, gen, testOptions())
	status, body, _ := call(t, srv, "POST", "/v1/chat/completions", `{"messages":[
		{"role":"user","content":"weather?"},
		{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\": \"Paris\"}"}}]},
		{"role":"tool","tool_call_id":"call_1","content":"21 C"}]}`)
	if status != 200 {
		t.Fatalf("%d %s", status, body)
	}
	msgs := gen.lastRequest().Messages
	if len(msgs) != 3 || msgs[1].Role != "assistant" || len(msgs[1].ToolCalls) != 1 ||
		msgs[1].ToolCalls[0].ID != "call_1" || msgs[1].ToolCalls[0].Function.Name != "get_weather" || msgs[1].ToolCalls[0].Function.Arguments != `{"city": "Paris"}` ||
		msgs[2].Role != "tool" || msgs[2].ToolCallID != "call_1" || msgs[2].Content != "21 C" {
		t.Errorf("messages %+v", msgs)
	}
}

// TestStructuredBadRequests: what the grammar or the template cannot do
// is a 400 in OpenAI's shape naming the field, through the official
// client.
func TestStructuredBadRequests(t *testing.T) {
	plain := loadDemoPair(t) // its template is plain ChatML: no tools
	r, err := engine.Load(t.Context(), engine.Config{Target: qwen3Fixture(t), Context: 256}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	clients := map[string]*openai.Client{"chatml": openaiClient(startServer(t, plain, Options{})), "qwen3": openaiClient(startServer(t, r, Options{}))}
	user := []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}
	tools := weatherTools(t)
	for _, c := range []struct {
		server string
		params openai.ChatCompletionNewParams
		opts   []option.RequestOption
		param  string
		says   string
	}{
		{"qwen3", openai.ChatCompletionNewParams{ResponseFormat: jsonSchemaFormat(`{"type": "object", "not": {"required": ["a"]}}`)}, nil,
			"response_format", `"not"`},
		{"qwen3", openai.ChatCompletionNewParams{ResponseFormat: jsonSchemaFormat(`{"type": "string", "minLength": 5, "maxLength": 2}`)}, nil,
			"response_format", "no JSON value"},
		{"qwen3", openai.ChatCompletionNewParams{}, []option.RequestOption{option.WithJSONSet("tools", []any{map[string]any{"type": "function", "function": map[string]any{"description": "x"}}})},
			"tools[0].function.name", "name"},
		{"qwen3", openai.ChatCompletionNewParams{Tools: tools, ToolChoice: openai.ChatCompletionToolChoiceOptionUnionParam{OfFunctionToolChoice: &openai.ChatCompletionNamedToolChoiceParam{
			Function: openai.ChatCompletionNamedToolChoiceFunctionParam{Name: "get_mood"}}}}, nil, "tool_choice.function.name", "get_mood"},
		{"qwen3", openai.ChatCompletionNewParams{Tools: tools, N: openai.Int(2)}, nil, "n", "n must be 1"},
		{"qwen3", openai.ChatCompletionNewParams{}, []option.RequestOption{option.WithJSONSet("grammar", "root ::= \"a\" root")}, "grammar", "allows nothing"},
		{"qwen3", openai.ChatCompletionNewParams{}, []option.RequestOption{option.WithJSONSet("grammar", "root ::= \"a")}, "grammar", "syntax"},
		{"qwen3", openai.ChatCompletionNewParams{Tools: tools, ResponseFormat: jsonSchemaFormat(schematest.Person),
			ToolChoice: openai.ChatCompletionToolChoiceOptionUnionParam{OfAuto: openai.String("required")}}, nil, "response_format", "tools"},
		{"qwen3", openai.ChatCompletionNewParams{Tools: []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
			Name: "f", Parameters: shared.FunctionParameters{"type": "object", "properties": map[string]any{"a": map[string]any{"type": "array", "uniqueItems": true}}}})},
			ToolChoice: openai.ChatCompletionToolChoiceOptionUnionParam{OfAuto: openai.String("required")}}, nil, "tools[0].function.parameters", "uniqueItems"},
		{"chatml", openai.ChatCompletionNewParams{Tools: tools}, nil, "tools", "template does not support tools"},
	} {
		p := c.params
		p.Model, p.Messages, p.MaxTokens = "demo", user, openai.Int(4)
		_, err := clients[c.server].Chat.Completions.New(t.Context(), p, c.opts...)
		var apiErr *openai.Error
		if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || apiErr.Param != c.param || apiErr.Type != typeInvalidRequest || !strings.Contains(apiErr.Message, c.says) {
			t.Errorf("%s: want 400 on %q saying %q, got %v", c.server, c.param, c.says, err)
		}
	}
}

// tickClock is a clock that moves a millisecond at each reading (the
// engine reads it from the request's goroutine and the warm-up's).
func tickClock() func() time.Time {
	var mu sync.Mutex
	t := time.Unix(0, 0)
	return func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		t = t.Add(time.Millisecond)
		return t
	}
}
