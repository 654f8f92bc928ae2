package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/tandem-run/tandem/engine/chat"
)

// messagesFile is what --messages reads: a JSON array of {role, content}, or
// an object holding one with the render options.
type messagesFile struct {
	Messages            []chat.Message `json:"messages"`
	AddGenerationPrompt *bool          `json:"add_generation_prompt"`
	EnableThinking      *bool          `json:"enable_thinking"`
}

func runChatTemplate(ctx context.Context, args []string, out, errOut io.Writer) error {
	fs := newFlags("chat-template", errOut)
	model := fs.String("model", "", "GGUF `file` whose chat template to render")
	msgPath := fs.String("messages", "", "JSON `file`: [{\"role\": ..., \"content\": ...}, ...]")
	noGen := fs.Bool("no-generation-prompt", false, "do not end with the assistant's turn header")
	thinking := fs.String("thinking", "", "set enable_thinking to `on` or off (default: undefined)")
	chatML := fs.Bool("chatml", false, "render a plain ChatML prompt instead of the model's template")
	fs.Usage = func() {
		fmt.Fprintln(errOut, "Usage: tandem chat-template --model M --messages FILE.json [--no-generation-prompt] [--thinking on|off] [--chatml]\n\nPrints the prompt the model's chat template makes of the messages.")
		fs.PrintDefaults()
	}
	if rest, err := parseFlags(fs, args); err != nil {
		return err
	} else if len(rest) > 0 || *msgPath == "" || (*model == "" && !*chatML) {
		fs.Usage()
		return errUsage
	}
	mf, err := readMessages(*msgPath)
	if err != nil {
		return err
	}
	opts := chat.Options{AddGenerationPrompt: !*noGen, EnableThinking: mf.EnableThinking}
	if mf.AddGenerationPrompt != nil && !*noGen {
		opts.AddGenerationPrompt = *mf.AddGenerationPrompt
	}
	switch *thinking {
	case "":
	case "on", "off":
		on := *thinking == "on"
		opts.EnableThinking = &on
	default:
		fmt.Fprintf(errOut, "tandem chat-template: --thinking takes on or off, not %q\n", *thinking)
		return errUsage
	}
	if *chatML {
		_, err := io.WriteString(out, chat.ChatML(mf.Messages, opts.AddGenerationPrompt))
		return err
	}
	prompt, err := renderModelTemplate(ctx, *model, mf.Messages, opts)
	if errors.Is(err, chat.ErrTemplate) {
		return fmt.Errorf("%w\n(--chatml renders a plain ChatML prompt instead)", err)
	}
	if err != nil {
		return err
	}
	_, err = io.WriteString(out, prompt)
	return err
}

func readMessages(path string) (messagesFile, error) {
	var mf messagesFile
	b, err := os.ReadFile(path)
	if err != nil {
		return mf, err
	}
	if err := json.Unmarshal(b, &mf.Messages); err != nil {
		if err2 := json.Unmarshal(b, &mf); err2 != nil {
			return mf, fmt.Errorf("%s: want a JSON array of messages or an object with \"messages\": %w", path, err)
		}
	}
	if len(mf.Messages) == 0 {
		return mf, fmt.Errorf("%s: no messages", path)
	}
	return mf, nil
}

func renderModelTemplate(ctx context.Context, model string, msgs []chat.Message, opts chat.Options) (string, error) {
	f, err := openModelHeader(ctx, model)
	if err != nil {
		return "", err
	}
	defer f.Close()
	tmpl, err := chat.FromGGUF(f)
	if err != nil {
		return "", err
	}
	return tmpl.Render(ctx, msgs, opts)
}
