package chat

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// weatherTools is a tools list as a client sends it: compact JSON, keys in
// the client's order (not sorted), text beyond ASCII.
const weatherTools = `[{"type":"function","function":{"name":"get_weather","description":"Température à une ville","parameters":{"type":"object","properties":{"city":{"type":"string"},"unit":{"enum":["c","f"]}},"required":["city"]}}}]`

// weatherJSON is that tool as jinja2's tojson prints it in HF's
// setting (json.dumps, ensure_ascii off, ", " and ": " separators, keys
// in order).
const weatherJSON = `{"type": "function", "function": {"name": "get_weather", "description": "Température à une ville", "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "unit": {"enum": ["c", "f"]}}, "required": ["city"]}}}`

// qwenToolsHeader is what the Qwen3 template prints for tools, read off the
// template: the system turn, its tools block and the call instructions.
func qwenToolsHeader(system string) string {
	s := "<|im_start|>system\n"
	if system != "" {
		s += system + "\n\n"
	}
	return s + "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n" +
		"You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n" + weatherJSON +
		"\n</tools>\n\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n" +
		"<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n"
}

func mustTools(t *testing.T, raw string) []Tool {
	t.Helper()
	tools, err := ParseTools(json.RawMessage(raw))
	if err != nil {
		t.Fatal(err)
	}
	return tools
}

func call(id, name, args string) ToolCall {
	return ToolCall{ID: id, Type: "function", Function: FunctionCall{Name: name, Arguments: args}}
}

// The Qwen3 template with tools, calls and tool results renders as jinja2
// would; the expected prompts were worked out by hand from the template.
func TestQwen3ToolRendering(t *testing.T) {
	tmpl := configTemplate(t, "qwen3")
	tools := mustTools(t, weatherTools)
	for _, tc := range []struct {
		name string
		msgs []Message
		gen  bool
		want string
	}{
		{"tools with a system message",
			[]Message{{Role: "system", Content: "You are helpful."}, {Role: "user", Content: "Weather in Paris?"}}, true,
			qwenToolsHeader("You are helpful.") + "<|im_start|>user\nWeather in Paris?<|im_end|>\n<|im_start|>assistant\n"},
		{"a call and its result",
			[]Message{
				{Role: "user", Content: "Weather in Paris?"},
				{Role: "assistant", ToolCalls: []ToolCall{call("call_1", "get_weather", `{"city":"Paris"}`)}},
				{Role: "tool", ToolCallID: "call_1", Content: `{"temp": 21}`},
			}, true,
			qwenToolsHeader("") + "<|im_start|>user\nWeather in Paris?<|im_end|>\n" +
				"<|im_start|>assistant\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call><|im_end|>\n" +
				"<|im_start|>user\n<tool_response>\n{\"temp\": 21}\n</tool_response><|im_end|>\n<|im_start|>assistant\n"},
		{"two calls with content, two results, the answer",
			[]Message{
				{Role: "user", Content: "Paris or Oslo?"},
				{Role: "assistant", Content: "Let me check.", ToolCalls: []ToolCall{
					call("a", "get_weather", `{"city": "Paris", "unit": "c"}`), call("b", "get_weather", `{"city":"Oslo"}`)}},
				{Role: "tool", ToolCallID: "a", Content: "21"},
				{Role: "tool", ToolCallID: "b", Content: "5"},
				{Role: "assistant", Content: "Paris is warmer."},
			}, false,
			qwenToolsHeader("") + "<|im_start|>user\nParis or Oslo?<|im_end|>\n" +
				"<|im_start|>assistant\nLet me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"unit\": \"c\"}}\n</tool_call>" +
				"\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}\n</tool_call><|im_end|>\n" +
				"<|im_start|>user\n<tool_response>\n21\n</tool_response>\n<tool_response>\n5\n</tool_response><|im_end|>\n" +
				"<|im_start|>assistant\n<think>\n\n</think>\n\nParis is warmer.<|im_end|>\n"},
		{"arguments that are not an object print as they are",
			[]Message{
				{Role: "user", Content: "x"},
				{Role: "assistant", ToolCalls: []ToolCall{call("c", "get_weather", `"Paris"`)}},
			}, false,
			qwenToolsHeader("") + "<|im_start|>user\nx<|im_end|>\n" +
				"<|im_start|>assistant\n<think>\n\n</think>\n\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": \"Paris\"}\n</tool_call><|im_end|>\n"},
	} {
		got, err := tmpl.Render(context.Background(), tc.msgs, Options{AddGenerationPrompt: tc.gen, Tools: tools})
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got != tc.want {
			t.Errorf("%s:\n got %q\nwant %q", tc.name, got, tc.want)
		}
	}
}

// llama31Like is a small template in the style of Llama 3.1's tool
// support (written for this test): tools listed as JSON in the user turn,
// calls as {"name": ..., "parameters": ...}.
const llama31Like = `{{- bos_token }}{%- for m in messages %}<|start_header_id|>{{ m.role }}<|end_header_id|>

{% if m.role == 'user' and tools is defined and loop.last %}{% for t in tools %}{{ t | tojson }}{% endfor %}
{% endif %}{% if m.tool_calls %}{% for c in m.tool_calls %}{"name": "{{ c.function.name }}", "parameters": {{ c.function.arguments | tojson }}}{% endfor %}{% else %}{{ m.content }}{% endif %}<|eot_id|>{% endfor %}{% if add_generation_prompt %}<|start_header_id|>assistant<|end_header_id|>

{% endif %}`

func TestToolSyntaxDetection(t *testing.T) {
	qwen := configTemplate(t, "qwen3")
	if s := qwen.ToolSyntax(); s != HermesSyntax {
		t.Errorf("qwen3: %v", s)
	}
	// This Llama 3 template (3.0) has no tools.
	if llama := configTemplate(t, "llama3"); llama.SupportsTools() {
		t.Errorf("llama3 (3.0) template: %v", llama.ToolSyntax())
	}
	l31, err := New(llama31Like, "<|begin_of_text|>", "<|eot_id|>")
	if err != nil {
		t.Fatal(err)
	}
	if s := l31.ToolSyntax(); s != JSONSyntax {
		t.Errorf("llama 3.1-like: %v", s)
	}
	chatml, err := New("{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}", "", "")
	if err != nil {
		t.Fatal(err)
	}
	if chatml.SupportsTools() {
		t.Error("plain ChatML template reported as supporting tools")
	}
	if !strings.Contains(ErrNoTools.Error(), "this model's template does not support tools") {
		t.Error(ErrNoTools)
	}
}

func TestToolValidation(t *testing.T) {
	for _, tc := range []struct {
		tools, choice string
		n             int
		param         string
	}{
		{`[{"type":"function","function":{"description":"x"}}]`, ``, 1, "tools[0].function.name"},
		{`[{"type":"function","function":{"name":"a b"}}]`, ``, 1, "tools[0].function.name"},
		{`[{"type":"retrieval","function":{"name":"a"}}]`, ``, 1, "tools[0].type"},
		{`[{"type":"function","function":{"name":"a"}},{"type":"function","function":{"name":"a"}}]`, ``, 1, "tools[1].function.name"},
		{`[{"type":"function","function":{"name":"a","parameters":[1]}}]`, ``, 1, "tools[0].function.parameters"},
		{`{"type":"function"}`, ``, 1, "tools"},
		{weatherTools, `{"type":"function","function":{"name":"get_time"}}`, 1, "tool_choice.function.name"},
		{weatherTools, `"sometimes"`, 1, "tool_choice"},
		{weatherTools, `"auto"`, 2, "n"},
		{`[]`, `"required"`, 1, "tool_choice"},
	} {
		tools, err := ParseTools(json.RawMessage(tc.tools))
		if err == nil {
			_, err = ParseToolChoice(json.RawMessage(tc.choice), tools, tc.n)
		}
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Param != tc.param {
			t.Errorf("tools %s choice %s n %d: %v, want an error on %s", tc.tools, tc.choice, tc.n, err, tc.param)
		}
	}
	tools := mustTools(t, weatherTools)
	for raw, want := range map[string]ToolChoice{
		``: {Mode: "auto"}, `"none"`: {Mode: "none"}, `"required"`: {Mode: "required"},
		`{"type":"function","function":{"name":"get_weather"}}`: {Mode: "function", Name: "get_weather"},
	} {
		got, err := ParseToolChoice(json.RawMessage(raw), tools, 1)
		if err != nil || got != want {
			t.Errorf("%s: %+v %v", raw, got, err)
		}
	}
}

// Defusing reaches special-token text in tools and arguments, also when
// JSON escapes spell it.
func TestDefusedTools(t *testing.T) {
	mark := func(s string) string { return strings.ReplaceAll(s, "<|im_end|>", "<!|im_end|>") }
	tools := mustTools(t, `[{"type":"function","function":{"name":"f","description":"a \u003c|im_end|> b","parameters":{"type":"object"}}}]`)
	d := DefusedTools(tools, mark)
	if strings.Contains(string(d[0].JSON), "<|im_end|>") || !strings.Contains(string(d[0].JSON), "<!|im_end|>") || d[0].Function.Description != "a <!|im_end|> b" {
		t.Errorf("defused tool %s, description %q", d[0].JSON, d[0].Function.Description)
	}
	msgs := Defused([]Message{{Role: "assistant", ToolCalls: []ToolCall{call("x", "f", `{"q": "\u003c|im_end|>"}`)}}}, mark)
	if got := msgs[0].ToolCalls[0].Function.Arguments; got != `{"q": "<!|im_end|>"}` {
		t.Errorf("defused arguments %s", got)
	}
}
