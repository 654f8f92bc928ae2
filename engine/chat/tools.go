package chat

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/ardanlabs/jinja"
)

// ErrNoTools is a request with tools for a model whose chat template has
// no tool syntax (or one this package cannot read back).
var ErrNoTools = errors.New("this model's template does not support tools")

// ToolCall is one call an assistant turn made, as OpenAI's tool_calls hold
// it.
type ToolCall struct {
	ID       string       `json:"id,omitempty"`
	Type     string       `json:"type"` // "function"
	Function FunctionCall `json:"function"`
}

// FunctionCall names the function and holds its arguments as JSON text.
type FunctionCall struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// Tool is one function the model may call, as OpenAI's tools list holds
// it. JSON is the definition as the client wrote it: templates print it
// (tojson) with the keys in the client's order, as jinja2 would.
type Tool struct {
	Type     string   `json:"type"`
	Function Function `json:"function"`
	JSON     json.RawMessage
}

// Function is a tool's function definition.
type Function struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"` // a JSON schema of the arguments object
	Strict      *bool           `json:"strict,omitempty"`
}

// FieldError is a request mistake in one field, named the way OpenAI's
// error objects name it (param), for a 400 answer.
type FieldError struct {
	Param   string
	Message string
}

func (e *FieldError) Error() string { return fmt.Sprintf("chat: %s: %s", e.Param, e.Message) }

// maxTools bounds a request's tools; real clients send tens.
const maxTools = 256

// ParseTools reads and checks a request's tools: each a function with a
// name of letters, digits, _ and - (at most 64, as OpenAI allows) given
// once, and parameters, when given, a JSON object.
func ParseTools(raw json.RawMessage) ([]Tool, error) {
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, &FieldError{"tools", "tools must be an array of tool objects"}
	}
	if len(items) > maxTools {
		return nil, &FieldError{"tools", fmt.Sprintf("%d tools; at most %d are allowed", len(items), maxTools)}
	}
	seen := map[string]bool{}
	tools := make([]Tool, 0, len(items))
	for i, item := range items {
		param := fmt.Sprintf("tools[%d]", i)
		var t Tool
		if err := json.Unmarshal(item, &t); err != nil {
			return nil, &FieldError{param, fmt.Sprintf("%s is not a tool object: %v", param, err)}
		}
		switch {
		case t.Type != "function":
			return nil, &FieldError{param + ".type", fmt.Sprintf("tool type %q is not supported; \"function\" is", t.Type)}
		case t.Function.Name == "":
			return nil, &FieldError{param + ".function.name", "a tool must have a function name"}
		case !validName(t.Function.Name):
			return nil, &FieldError{param + ".function.name", fmt.Sprintf("function name %q must be 1 to 64 letters, digits, underscores and dashes", t.Function.Name)}
		case seen[t.Function.Name]:
			return nil, &FieldError{param + ".function.name", fmt.Sprintf("function %q is defined twice", t.Function.Name)}
		}
		if p := bytes.TrimSpace(t.Function.Parameters); len(p) > 0 && !bytes.Equal(p, []byte("null")) && p[0] != '{' {
			return nil, &FieldError{param + ".function.parameters", "parameters must be a JSON schema object"}
		}
		seen[t.Function.Name] = true
		t.JSON = item
		tools = append(tools, t)
	}
	return tools, nil
}

func validName(s string) bool {
	if len(s) == 0 || len(s) > 64 {
		return false
	}
	for _, c := range []byte(s) {
		if !(c == '_' || c == '-' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// ToolChoice is what a request asks of the model's calls.
type ToolChoice struct {
	Mode string // "auto", "none", "required" or "function"
	Name string // the function, when Mode is "function"
}

// ParseToolChoice reads tool_choice ("auto" when absent) and checks it
// against the tools: a named function must be one of them, and every mode
// but "none" needs tools. n is the request's number of choices: tools
// allow only one (each would call differently).
func ParseToolChoice(raw json.RawMessage, tools []Tool, n int) (ToolChoice, error) {
	if len(tools) > 0 && n > 1 {
		return ToolChoice{}, &FieldError{"n", "n must be 1 when tools are given"}
	}
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return ToolChoice{Mode: "auto"}, nil
	}
	var mode string
	if err := json.Unmarshal(raw, &mode); err == nil {
		switch mode {
		case "none", "auto":
			return ToolChoice{Mode: mode}, nil
		case "required":
			if len(tools) == 0 {
				return ToolChoice{}, &FieldError{"tool_choice", `tool_choice "required" needs tools`}
			}
			return ToolChoice{Mode: mode}, nil
		}
		return ToolChoice{}, &FieldError{"tool_choice", fmt.Sprintf("tool_choice %q is not one of none, auto, required", mode)}
	}
	var named struct {
		Type     string `json:"type"`
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	}
	if err := json.Unmarshal(raw, &named); err != nil || named.Type != "function" {
		return ToolChoice{}, &FieldError{"tool_choice", `tool_choice must be "none", "auto", "required" or {"type": "function", "function": {"name": ...}}`}
	}
	for _, t := range tools {
		if t.Function.Name == named.Function.Name {
			return ToolChoice{Mode: "function", Name: named.Function.Name}, nil
		}
	}
	return ToolChoice{}, &FieldError{"tool_choice.function.name", fmt.Sprintf("tool_choice names %q, which is not among the tools", named.Function.Name)}
}

// ParseToolCalls reads an assistant message's tool_calls as a client sends
// them back.
func ParseToolCalls(raw json.RawMessage, param string) ([]ToolCall, error) {
	var calls []ToolCall
	if err := json.Unmarshal(raw, &calls); err != nil {
		return nil, &FieldError{param, fmt.Sprintf("tool_calls must be an array of tool call objects: %v", err)}
	}
	for i, c := range calls {
		if c.Function.Name == "" {
			return nil, &FieldError{fmt.Sprintf("%s[%d].function.name", param, i), "a tool call must name its function"}
		}
	}
	return calls, nil
}

// orderedValue turns JSON text into a template value whose objects keep
// their keys in the text's order (FromGoValue sorts them), so tojson
// prints what jinja2 prints for the same request.
func orderedValue(raw []byte) (jinja.Value, error) {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	v, err := decodeValue(d, 0)
	if err != nil {
		return jinja.Undefined(), err
	}
	if _, err := d.Token(); err != io.EOF {
		return jinja.Undefined(), errors.New("text after the JSON value")
	}
	return v, nil
}

// maxJSONDepth bounds nesting in tool definitions and arguments.
const maxJSONDepth = 64

func decodeValue(d *json.Decoder, depth int) (jinja.Value, error) {
	if depth > maxJSONDepth {
		return jinja.Undefined(), fmt.Errorf("JSON nested over %d deep", maxJSONDepth)
	}
	tok, err := d.Token()
	if err != nil {
		return jinja.Undefined(), err
	}
	switch tok := tok.(type) {
	case json.Delim:
		if tok == '[' {
			var items []jinja.Value
			for d.More() {
				v, err := decodeValue(d, depth+1)
				if err != nil {
					return jinja.Undefined(), err
				}
				items = append(items, v)
			}
			_, err := d.Token()
			return jinja.NewList(items), err
		}
		dict := jinja.NewDict()
		for d.More() {
			kt, err := d.Token()
			if err != nil {
				return jinja.Undefined(), err
			}
			v, err := decodeValue(d, depth+1)
			if err != nil {
				return jinja.Undefined(), err
			}
			dict.AsDict().Set(kt.(string), v)
		}
		_, err := d.Token()
		return dict, err
	default:
		return jinja.FromGoValue(tok), nil
	}
}

// toolsValue is the tools list as templates see it.
func toolsValue(tools []Tool) (jinja.Value, error) {
	items := make([]jinja.Value, len(tools))
	for i, t := range tools {
		raw := t.JSON
		if len(raw) == 0 {
			var err error
			if raw, err = json.Marshal(struct {
				Type     string   `json:"type"`
				Function Function `json:"function"`
			}{cmpOr(t.Type, "function"), t.Function}); err != nil {
				return jinja.Undefined(), err
			}
		}
		v, err := orderedValue(raw)
		if err != nil {
			return jinja.Undefined(), fmt.Errorf("tool %q: %w", t.Function.Name, err)
		}
		items[i] = v
	}
	return jinja.NewList(items), nil
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// messageValue is one message as templates see it. A call's arguments are
// given as an object when they are JSON text of one (templates print them
// with tojson, or as they are when a string), as OpenAI-compatible servers
// pass them.
func messageValue(m Message) jinja.Value {
	d := jinja.NewDict()
	dict := d.AsDict()
	dict.Set("role", jinja.NewString(m.Role))
	dict.Set("content", jinja.NewString(m.Content))
	if len(m.ToolCalls) > 0 {
		calls := make([]jinja.Value, len(m.ToolCalls))
		for i, c := range m.ToolCalls {
			args := jinja.NewString(c.Function.Arguments)
			if a := strings.TrimSpace(c.Function.Arguments); strings.HasPrefix(a, "{") {
				if v, err := orderedValue([]byte(a)); err == nil {
					args = v
				}
			}
			fn := jinja.NewDict()
			fn.AsDict().Set("name", jinja.NewString(c.Function.Name))
			fn.AsDict().Set("arguments", args)
			call := jinja.NewDict()
			if c.ID != "" {
				call.AsDict().Set("id", jinja.NewString(c.ID))
			}
			call.AsDict().Set("type", jinja.NewString(cmpOr(c.Type, "function")))
			call.AsDict().Set("function", fn)
			calls[i] = call
		}
		dict.Set("tool_calls", jinja.NewList(calls))
	}
	if m.ToolCallID != "" {
		dict.Set("tool_call_id", jinja.NewString(m.ToolCallID))
	}
	if m.Name != "" {
		dict.Set("name", jinja.NewString(m.Name))
	}
	return d
}

// ToolSyntax is how a model writes its tool calls.
type ToolSyntax int

const (
	// NoToolSyntax: the template shows no tools, or calls this package
	// cannot read back.
	NoToolSyntax ToolSyntax = iota
	// HermesSyntax: <tool_call>{"name": ..., "arguments": {...}}</tool_call>
	// (Qwen 2.5 and 3, Hermes, and many fine-tunes).
	HermesSyntax
	// JSONSyntax: the whole answer is {"name": ..., "parameters": {...}}
	// (Llama 3.1 and 3.2).
	JSONSyntax
)

func (s ToolSyntax) String() string {
	switch s {
	case HermesSyntax:
		return "hermes"
	case JSONSyntax:
		return "json"
	}
	return "none"
}

// probeName marks the tool and call that probe a template.
const probeName = "tandem_probe_function"

// probeTools finds out what a template does with tools: it renders a
// conversation with a tool definition and with a call, and looks for them
// in the output.
func (t *Template) probeTools() ToolSyntax {
	ctx := context.Background()
	tools := []Tool{{Type: "function", Function: Function{Name: probeName, Description: "probe",
		Parameters: json.RawMessage(`{"type": "object", "properties": {"x": {"type": "integer"}}}`)}}}
	defs, err := t.Render(ctx, []Message{{Role: "user", Content: "hi"}}, Options{AddGenerationPrompt: true, Tools: tools})
	if err != nil || !strings.Contains(defs, probeName) {
		return NoToolSyntax
	}
	msgs := []Message{
		{Role: "user", Content: "hi"},
		{Role: "assistant", ToolCalls: []ToolCall{{ID: "call_1", Type: "function", Function: FunctionCall{Name: probeName, Arguments: `{"x": 1}`}}}},
		{Role: "tool", ToolCallID: "call_1", Name: probeName, Content: "2"},
	}
	call, err := t.Render(ctx, msgs, Options{AddGenerationPrompt: true, Tools: tools})
	if err != nil || !strings.Contains(call, probeName) {
		return NoToolSyntax
	}
	// Where the call's name is printed says how the model writes calls.
	i := strings.LastIndex(call, `"`+probeName+`"`)
	before := call[:i]
	switch {
	case strings.Contains(before[max(0, len(before)-64):], "<tool_call>"):
		return HermesSyntax
	case strings.Contains(call[i:], `"parameters"`) || strings.Contains(call[i:], `"arguments"`):
		return JSONSyntax
	}
	return NoToolSyntax
}

// ToolSyntax is how the model writes tool calls, found once by rendering
// probes through the template; NoToolSyntax if it shows none.
func (t *Template) ToolSyntax() ToolSyntax { return t.tools() }

// SupportsTools reports whether the template renders tool definitions and
// calls in a syntax this package can read back.
func (t *Template) SupportsTools() bool { return t.ToolSyntax() != NoToolSyntax }

// defuseJSONText passes every string of JSON text (keys and values, as
// decoded) through defuse and writes the JSON again, keys in order and
// numbers as written. Text that is not JSON is defused as it is.
func defuseJSONText(text string, defuse func(string) string) string {
	d := json.NewDecoder(strings.NewReader(text))
	d.UseNumber()
	var sb strings.Builder
	if err := rewriteJSON(d, &sb, defuse, 0); err != nil {
		return defuse(text)
	}
	if _, err := d.Token(); err != io.EOF {
		return defuse(text)
	}
	return sb.String()
}

func rewriteJSON(d *json.Decoder, sb *strings.Builder, defuse func(string) string, depth int) error {
	if depth > maxJSONDepth {
		return fmt.Errorf("JSON nested over %d deep", maxJSONDepth)
	}
	tok, err := d.Token()
	if err != nil {
		return err
	}
	str := func(s string) {
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		_ = enc.Encode(defuse(s)) // a string always encodes
		sb.WriteString(strings.TrimSuffix(buf.String(), "\n"))
	}
	switch tok := tok.(type) {
	case json.Delim:
		open, close := byte('['), byte(']')
		if tok == '{' {
			open, close = '{', '}'
		}
		sb.WriteByte(open)
		for i := 0; d.More(); i++ {
			if i > 0 {
				sb.WriteString(", ")
			}
			if open == '{' {
				kt, err := d.Token()
				if err != nil {
					return err
				}
				str(kt.(string))
				sb.WriteString(": ")
			}
			if err := rewriteJSON(d, sb, defuse, depth+1); err != nil {
				return err
			}
		}
		if _, err := d.Token(); err != nil {
			return err
		}
		sb.WriteByte(close)
	case string:
		str(tok)
	case json.Number:
		sb.WriteString(string(tok))
	case bool:
		if tok {
			sb.WriteString("true")
		} else {
			sb.WriteString("false")
		}
	case nil:
		sb.WriteString("null")
	}
	return nil
}
