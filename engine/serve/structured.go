package serve

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/tandem-run/tandem/engine"
	"github.com/tandem-run/tandem/engine/chat"
	"github.com/tandem-run/tandem/engine/grammar"
)

// structurer is a Generator that can hold its output to a grammar and
// render tools with the model's chat template: the local engine
// (*engine.Runner). Requests with response_format, grammar or tools need
// one.
type structurer interface {
	// Constraint compiles a grammar once per key and keeps it.
	Constraint(key string, build func() (*grammar.Grammar, error)) (*grammar.Constraint, error)
	ToolSyntax() chat.ToolSyntax
}

// structure reads a request's structured-output fields (response_format
// and tools for chat, grammar for both endpoints) into req: the grammar
// its output must follow, and the tools its prompt shows. It returns the
// syntax to read tool calls out of the answer in (chat.NoToolSyntax: the
// answer is plain content). c is nil for text completions.
func (s *Server) structure(p *sampleParams, c *chatRequest, req *engine.Request) (chat.ToolSyntax, *APIError) {
	var (
		format json.RawMessage
		tools  []chat.Tool
		choice = chat.ToolChoice{Mode: "none"}
	)
	if c != nil {
		format = c.ResponseFormat
		if present(c.Tools) {
			var err error
			if tools, err = chat.ParseTools(c.Tools); err != nil {
				return 0, fieldError(err)
			}
		}
		n := 1
		if p.N != nil {
			n = *p.N
		}
		var err error
		if choice, err = chat.ParseToolChoice(c.ToolChoice, tools, n); err != nil {
			return 0, fieldError(err)
		}
	}
	fmtGrammar, e := responseFormat(format)
	if e != nil {
		return 0, e
	}
	calling := len(tools) > 0 && choice.Mode != "none"
	switch {
	case fmtGrammar && p.Grammar != "":
		return 0, badRequest("grammar", "set grammar or response_format, not both")
	case calling && fmtGrammar:
		return 0, badRequest("response_format", "response_format cannot be combined with tools unless tool_choice is \"none\"")
	case calling && p.Grammar != "":
		return 0, badRequest("grammar", "grammar cannot be combined with tools unless tool_choice is \"none\"")
	}
	if !fmtGrammar && p.Grammar == "" && len(tools) == 0 {
		return chat.NoToolSyntax, nil
	}
	st, ok := s.gen.(structurer)
	param := "tools"
	switch {
	case fmtGrammar:
		param = "response_format"
	case p.Grammar != "":
		param = "grammar"
	}
	if !ok {
		return 0, badRequest(param, "%s is not supported by this server's generator", param)
	}
	syntax := chat.NoToolSyntax
	if len(tools) > 0 {
		if syntax = st.ToolSyntax(); syntax == chat.NoToolSyntax {
			return 0, badRequest("tools", "%s: its chat template shows no tool definitions or calls in a syntax this server reads", chat.ErrNoTools)
		}
		req.Tools = tools
	}
	var (
		key   string
		build func() (*grammar.Grammar, error)
	)
	switch {
	case fmtGrammar:
		key, build = "format:"+string(format), func() (*grammar.Grammar, error) { return grammar.ResponseFormat(format) }
	case p.Grammar != "":
		key, build = "gbnf:"+p.Grammar, func() (*grammar.Grammar, error) { return grammar.CompileGBNF(p.Grammar) }
	case choice.Mode == "required" || choice.Mode == "function":
		parallel := c.ParallelToolCalls == nil || *c.ParallelToolCalls
		key = fmt.Sprintf("tools:%s:%s:%v:%s", choice.Mode, choice.Name, parallel, c.Tools)
		build = func() (*grammar.Grammar, error) { return chat.ToolCallGrammar(syntax, tools, choice, parallel) }
	}
	if build != nil {
		con, err := st.Constraint(key, build)
		if err != nil {
			var fe *chat.FieldError
			if errors.As(err, &fe) {
				return 0, fieldError(fe)
			}
			return 0, badRequest(param, "%s", strings.TrimPrefix(err.Error(), "grammar: "))
		}
		req.Constraint = con
	}
	if choice.Mode == "none" {
		return chat.NoToolSyntax, nil
	}
	return syntax, nil
}

// responseFormat checks response_format's shape and reports whether it
// asks for JSON (json_object or json_schema) rather than text. The schema
// itself is compiled with the rest of the grammar.
func responseFormat(raw json.RawMessage) (bool, *APIError) {
	if !present(raw) {
		return false, nil
	}
	var f struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal(raw, &f); err != nil {
		return false, badRequest("response_format", "response_format must be an object with a type")
	}
	switch f.Type {
	case "text", "":
		return false, nil
	case "json_object", "json_schema":
		return true, nil
	}
	return false, badRequest("response_format", "response_format type %q is not one of text, json_object, json_schema", f.Type)
}

// fieldError answers a chat.FieldError with a 400 that names its field.
func fieldError(err error) *APIError {
	var fe *chat.FieldError
	if errors.As(err, &fe) {
		return badRequest(fe.Param, "%s", fe.Message)
	}
	return badRequest("", "%s", err.Error())
}

// toolCalls reads tool calls out of an answer as it streams: content and
// call pieces, each call with an id of its own.
type toolCalls struct {
	p    *chat.ToolParser
	ids  []string
	rand func() uint64
}

func newToolCalls(syntax chat.ToolSyntax, rand func() uint64) *toolCalls {
	return &toolCalls{p: chat.NewToolParser(syntax), rand: rand}
}

// deltas turns the parser's pieces into stream deltas.
func (t *toolCalls) deltas(in []chat.Delta) []chatDelta {
	var out []chatDelta
	for _, d := range in {
		if !d.Call {
			out = append(out, chatDelta{Content: d.Content})
			continue
		}
		td := toolCallDelta{Index: d.Index, Function: functionDelta{Name: d.Name, Arguments: d.Arguments}}
		if d.Name != "" {
			td.ID, td.Type = t.id(d.Index), "function"
		}
		out = append(out, chatDelta{ToolCalls: []toolCallDelta{td}})
	}
	return out
}

// id is the id of call i, made when it is first asked for.
func (t *toolCalls) id(i int) string {
	for len(t.ids) <= i {
		t.ids = append(t.ids, fmt.Sprintf("call_%016x", t.rand()))
	}
	return t.ids[i]
}

// calls are the complete calls, with their ids.
func (t *toolCalls) calls() []chat.ToolCall {
	calls := t.p.Calls()
	for i := range calls {
		calls[i].ID = t.id(i)
		calls[i].Type = "function"
	}
	return calls
}
