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
		out[i] = Message{Role: defuse(m.Role), Content: defuse(m.Content)}
	}
	return out
}
