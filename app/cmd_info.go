package app

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/dustin/go-humanize"

	"github.com/tandem-run/tandem/engine/gguf"
)

func runInfo(ctx context.Context, args []string, out, errOut io.Writer) error {
	fs := newFlags("info", errOut)
	asJSON := fs.Bool("json", false, "print a JSON object")
	fs.Usage = func() {
		fmt.Fprintln(errOut, "Usage: tandem info MODEL.gguf [--json]\n\nDescribes a GGUF model from its header; no weights are read.")
		fs.PrintDefaults()
	}
	paths, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(paths) == 0 {
		fs.Usage()
		return errUsage
	}
	var descs []gguf.Description
	for _, p := range paths {
		f, err := openModelHeader(ctx, p)
		if err != nil {
			return err
		}
		descs = append(descs, f.Describe())
		f.Close()
	}
	if *asJSON {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		if len(descs) == 1 {
			return enc.Encode(descs[0])
		}
		return enc.Encode(descs)
	}
	for i, d := range descs {
		if i > 0 {
			fmt.Fprintln(out)
		}
		printDescription(out, d)
	}
	return nil
}

func printDescription(out io.Writer, d gguf.Description) {
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	row := func(k, format string, a ...any) { fmt.Fprintf(tw, "%s\t"+format+"\n", append([]any{k}, a...)...) }
	row("file", "%s (%s, GGUF v%d%s)", d.Path, humanize.Bytes(uint64(d.FileBytes)), d.Version, splitNote(d.Split))
	row("architecture", "%s", d.Architecture)
	if d.Name != "" {
		row("name", "%s", d.Name)
	}
	row("parameters", "%s (%d)", humanize.SIWithDigits(float64(d.Parameters), 2, ""), d.Parameters)
	row("layers", "%d", d.Layers)
	row("embedding width", "%d", d.EmbeddingWidth)
	row("heads / KV heads", "%d / %d", d.Heads, d.KVHeads)
	row("context length", "%d", d.ContextLength)
	row("vocabulary", "%d tokens, %s tokenizer%s", d.VocabSize, orNone(d.Tokenizer), preNote(d.PreTokenizer))
	row("output head", "%s", headNote(d))
	row("chat template", "%s", yesNo(d.ChatTemplate))
	var types []string
	for _, tb := range d.TypeBytes {
		types = append(types, fmt.Sprintf("%s %s (%d)", tb.Type, humanize.Bytes(uint64(tb.Bytes)), tb.Tensors))
	}
	row("tensors", "%d: %s", d.TensorCount, strings.Join(types, ", "))
	tw.Flush()
}

func splitNote(n int) string {
	if n > 1 {
		return fmt.Sprintf(", %d split files", n)
	}
	return ""
}

func preNote(pre string) string {
	if pre == "" {
		return ""
	}
	return " (pre-tokenizer " + pre + ")"
}

func headNote(d gguf.Description) string {
	switch {
	case d.HasHead:
		return "own (output.weight)"
	case d.TiedHead:
		return "tied to the token embedding"
	default:
		return "none (borrows the target's)"
	}
}

func orNone(s string) string {
	if s == "" {
		return "no"
	}
	return s
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
