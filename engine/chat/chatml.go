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
