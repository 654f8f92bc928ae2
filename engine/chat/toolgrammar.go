package chat

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/tandem-run/tandem/engine/grammar"
)

// ToolCallGrammar is the grammar that makes the model call a tool, for
// tool_choice "required" (any of tools; with parallel, one or more calls)
// or a named function: each call written the way the model's template
// shows calls, with arguments valid against the function's parameters.
// Parallel calls are one per line in the Hermes syntax; the JSON syntax
// makes one call.
func ToolCallGrammar(syntax ToolSyntax, tools []Tool, choice ToolChoice, parallel bool) (*grammar.Grammar, error) {
	var r grammar.Rules
	var calls []grammar.Expr
	for i, t := range tools {
		if choice.Mode == "function" && t.Function.Name != choice.Name {
			continue
		}
		schema := bytes.TrimSpace(t.Function.Parameters)
		if len(schema) == 0 || bytes.Equal(schema, []byte("null")) {
			schema = []byte(`{"type": "object"}`)
		}
		args, err := r.AddSchema(fmt.Sprintf("tool%d", i), schema)
		if err != nil {
			return nil, &FieldError{fmt.Sprintf("tools[%d].function.parameters", i), err.Error()}
		}
		name, err := json.Marshal(t.Function.Name)
		if err != nil {
			return nil, err
		}
		switch syntax {
		case HermesSyntax:
			// As the Qwen and Hermes templates show a call.
			calls = append(calls, grammar.Seq(grammar.Lit("<tool_call>\n{\"name\": "+string(name)+", \"arguments\": "), args, grammar.Lit("}\n</tool_call>")))
		case JSONSyntax:
			calls = append(calls, grammar.Seq(grammar.Lit("{\"name\": "+string(name)+", \"parameters\": "), args, grammar.Lit("}")))
		default:
			return nil, fmt.Errorf("chat: %w", ErrNoTools)
		}
	}
	if len(calls) == 0 {
		return nil, &FieldError{"tool_choice", "tool_choice names no tool among the tools"}
	}
	if err := r.Define("call", grammar.Alt(calls...)); err != nil {
		return nil, err
	}
	root := grammar.Ref("call")
	if parallel && choice.Mode == "required" && syntax == HermesSyntax {
		root = grammar.Seq(root, grammar.Star(grammar.Seq(grammar.Lit("\n"), grammar.Ref("call"))))
	}
	if err := r.Define("root", root); err != nil {
		return nil, err
	}
	return r.Compile("root")
}
