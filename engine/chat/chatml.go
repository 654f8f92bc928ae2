package chat

import "strings"

// ChatML renders messages in the plain ChatML layout
// (<|im_start|>role\ncontent<|im_end|>\n ...), the fallback a caller may
// offer when a model's own template is unusable.
func ChatML(messages []Message, addGenerationPrompt bool) string {
	var sb strings.Builder
	for _, m := range messages {
		sb.WriteString("<|im_start|>" + m.Role + "\n" + m.Content + "<|im_end|>\n")
	}
	if addGenerationPrompt {
		sb.WriteString("<|im_start|>assistant\n")
	}
	return sb.String()
}

// Defused returns copies of messages whose roles and contents went through
// defuse (a tokenizer's Defuse): rendered into a prompt, their text cannot
// be parsed as special tokens, so a message cannot close its turn and open
// one of another role. Only the template's own markup makes special tokens.
func Defused(messages []Message, defuse func(string) string) []Message {
	out := make([]Message, len(messages))
	for i, m := range messages {
		out[i] = Message{Role: defuse(m.Role), Content: defuse(m.Content),
			ToolCallID: defuse(m.ToolCallID), Name: defuse(m.Name)}
		for _, c := range m.ToolCalls {
			out[i].ToolCalls = append(out[i].ToolCalls, ToolCall{ID: defuse(c.ID), Type: c.Type,
				Function: FunctionCall{Name: defuse(c.Function.Name), Arguments: defuseJSONText(c.Function.Arguments, defuse)}})
		}
	}
	return out
}

// DefusedTools returns copies of tools whose definitions went through
// defuse string by string (keys and values, after JSON unescaping: an
// escaped special-token text would otherwise be printed plain by tojson).
func DefusedTools(tools []Tool, defuse func(string) string) []Tool {
	out := make([]Tool, len(tools))
	for i, t := range tools {
		out[i] = t
		out[i].Function.Name = defuse(t.Function.Name)
		out[i].Function.Description = defuse(t.Function.Description)
		if len(t.Function.Parameters) > 0 {
			out[i].Function.Parameters = []byte(defuseJSONText(string(t.Function.Parameters), defuse))
		}
		if len(t.JSON) > 0 {
			out[i].JSON = []byte(defuseJSONText(string(t.JSON), defuse))
		}
	}
	return out
}
