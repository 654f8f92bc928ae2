// Package app is Tandem's user-facing layer: the desktop window and its
// controllers, the headless command line, and the settings they share. It is
// the only package that calls fyne.Do.
package app

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"syscall"

	// Before Fyne reads the locale: see the package comment.
	_ "github.com/tandem-run/tandem/app/internal/locale"
)

// command is one `tandem NAME ...` sub-command.
type command struct {
	name    string
	summary string
	run     func(ctx context.Context, args []string, out, errOut io.Writer) error
}

// commands lists every sub-command; each lives in a cmd_NAME.go file.
func commands() []command {
	cmds := []command{
		{"info", "describe a GGUF model file", runInfo},
		{"gui", guiSummary, runGUICommand},
		{"tokenize", "print the token ids of a text for a model's vocabulary", runTokenize},
		{"chat-template", "print the prompt a model's chat template makes of messages", runChatTemplate},
		{"devices", "list the GPUs and how they are linked", runDevices},
		{"plan", "show what each device would hold for a placement, before loading", runPlan},
		{"run", "generate text, with a draft model or prompt lookup when given", runRun},
		{"perplexity", "score a text file with a model as llama.cpp's perplexity tool does", runPerplexity},
		{"bench", "time a model's prefill and decode tokens/s", runBench},
		{"serve", "serve a model over an OpenAI-compatible HTTP API", runServe},
		{"hub", "search the Hugging Face Hub for GGUF models and list a repository's files, with what fits", runHub},
		{"pull", "download a model from the Hugging Face Hub (resumable, checked)", runPull},
	}
	sort.Slice(cmds, func(i, j int) bool { return cmds[i].name < cmds[j].name })
	return cmds
}

// exitError carries a specific exit status (e.g. 3 for "plan does not fit").
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// errUsage marks a command-line mistake: exit status 2 and no "error:" noise.
var errUsage = errors.New("usage")

// Main runs Tandem with the arguments after the program name and returns the
// process exit status. No arguments opens the window.
func Main(args []string, out, errOut io.Writer) int {
	if len(args) == 0 {
		return runGUI(errOut)
	}
	name := args[0]
	if name == "help" || name == "-h" || name == "--help" {
		printHelp(out)
		return 0
	}
	for _, c := range commands() {
		if c.name != name {
			continue
		}
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		err := c.run(ctx, args[1:], out, errOut)
		var ee *exitError
		switch {
		case err == nil:
			return 0
		case errors.Is(err, flag.ErrHelp):
			return 0
		case errors.Is(err, errUsage):
			return 2
		case errors.As(err, &ee):
			if ee.err != nil && ee.err.Error() != "" {
				fmt.Fprintf(errOut, "tandem %s: %v\n", name, ee.err)
			}
			return ee.code
		default:
			fmt.Fprintf(errOut, "tandem %s: %v\n", name, err)
			return 1
		}
	}
	fmt.Fprintf(errOut, "tandem: unknown command %q\n\n", name)
	printHelp(errOut)
	return 2
}

func printHelp(w io.Writer) {
	fmt.Fprintln(w, "Tandem runs GGUF language models, with speculative decoding, on your GPUs or CPU.")
	fmt.Fprintln(w, "\nUsage:\n  tandem              open the window\n  tandem COMMAND ...  run a command headless (tandem COMMAND -h for its flags)\n\nCommands:")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-14s %s\n", c.name, c.summary)
	}
}

// newFlags makes a FlagSet for a sub-command whose errors and -h output go to errOut.
func newFlags(name string, errOut io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("tandem "+name, flag.ContinueOnError)
	fs.SetOutput(errOut)
	return fs
}

// parseFlags parses args, accepting flags before and after positional
// arguments (tandem info model.gguf --json), and maps mistakes to errUsage.
func parseFlags(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, errUsage
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}
