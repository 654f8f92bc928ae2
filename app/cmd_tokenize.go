package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/tandem-run/tandem/engine/tokenizer"
)

func runTokenize(ctx context.Context, args []string, out, errOut io.Writer) error {
	fs := newFlags("tokenize", errOut)
	model := fs.String("model", "", "GGUF `file` whose vocabulary to use")
	text := fs.String("text", "", "the `text` to tokenize")
	file := fs.String("file", "", "read the text from `file`")
	noSpecial := fs.Bool("no-parse-special", false, "treat special-token text such as <|im_start|> as plain text")
	addSpecial := fs.Bool("add-special", false, "add BOS/EOS where the vocabulary asks for them")
	asJSON := fs.Bool("json", false, "print an object with the ids and each token's text")
	fs.Usage = func() {
		fmt.Fprintln(errOut, "Usage: tandem tokenize --model M (--text T | --file F) [--no-parse-special] [--add-special] [--json]\n\nPrints the token ids of the text as a JSON array.")
		fs.PrintDefaults()
	}
	if rest, err := parseFlags(fs, args); err != nil {
		return err
	} else if len(rest) > 0 || *model == "" || (*text == "") == (*file == "") {
		fs.Usage()
		return errUsage
	}
	input := *text
	if *file != "" {
		b, err := os.ReadFile(*file)
		if err != nil {
			return err
		}
		input = string(b)
	}
	tk, err := loadTokenizer(ctx, *model)
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	ids, err := tk.Encode(input, tokenizer.EncodeOptions{ParseSpecial: !*noSpecial, AddSpecial: *addSpecial})
	if err != nil {
		return err
	}
	if ids == nil {
		ids = []int32{}
	}
	if !*asJSON {
		b, _ := json.Marshal(ids)
		_, err := fmt.Fprintf(out, "%s\n", b)
		return err
	}
	pieces := make([]string, len(ids))
	for i, id := range ids {
		pieces[i] = tk.Decode([]int32{id})
	}
	enc := json.NewEncoder(out)
	enc.SetEscapeHTML(false)
	return enc.Encode(struct {
		IDs    []int32  `json:"ids"`
		Pieces []string `json:"pieces"` // each token decoded alone (a split rune reads as U+FFFD)
	}{ids, pieces})
}

func loadTokenizer(ctx context.Context, path string) (*tokenizer.Tokenizer, error) {
	f, err := openModelHeader(ctx, path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	tk, err := tokenizer.FromGGUF(f)
	if errors.Is(err, tokenizer.ErrVocab) {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return tk, err
}
