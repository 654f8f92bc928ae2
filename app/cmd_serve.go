package app

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"

	"github.com/tandem-run/tandem/engine"
	"github.com/tandem-run/tandem/engine/serve"
)

// serveFlags are `tandem serve`'s flags: the engine's (where placement flags
// join them), then the server's.
type serveFlags struct {
	engine       engineFlags
	addr         string
	apiKey       string
	alias        string
	maxQueue     int
	maxClient    int
	parallel     int
	allowOrigins []string
}

func (f *serveFlags) register(fs *flag.FlagSet) {
	f.engine.register(fs)
	fs.StringVar(&f.addr, "addr", "127.0.0.1:8080", "host:port to listen on; an address other machines can reach needs --api-key")
	fs.StringVar(&f.apiKey, "api-key", "", "require \"Authorization: Bearer KEY\" of every request (default $TANDEM_API_KEY)")
	fs.StringVar(&f.alias, "alias", "", "the model id clients see (default: the target file's name)")
	fs.IntVar(&f.maxQueue, "max-queue", 128, "requests that may wait for the model; more are answered 429")
	fs.IntVar(&f.parallel, "parallel", 1, "requests decoded together, one target pass a step over all of them (each holds a KV cache of --ctx; only a draft model drafts for them)")
	fs.IntVar(&f.maxClient, "max-client-requests", 0, "requests one client address may have in flight; more are answered 429 (default half of --max-queue)")
	fs.Func("allow-origin", "let web pages of this `origin` (http://localhost:3000; * for any) call the API from a browser; repeat or separate by commas", func(s string) error {
		for o := range strings.SplitSeq(s, ",") {
			if o = strings.TrimSpace(o); o != "" {
				f.allowOrigins = append(f.allowOrigins, o)
			}
		}
		return nil
	})
}

func runServe(ctx context.Context, args []string, out, errOut io.Writer) error {
	fs := newFlags("serve", errOut)
	var f serveFlags
	f.register(fs)
	fs.Usage = func() {
		fmt.Fprintln(errOut, "Usage: tandem serve [--model M] [--draft D | --lookup] [--addr 127.0.0.1:8080] [--api-key K] [flags]\n\n"+
			"Serves the model over an OpenAI-compatible API (/v1/models, /v1/chat/completions,\n/v1/completions; /metrics, /health) until interrupted.")
		fs.PrintDefaults()
	}
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		fmt.Fprintf(errOut, "tandem serve: unexpected argument %q (the model goes in --model)\n", pos[0])
		return errUsage
	}
	if f.apiKey == "" { // the environment keeps the key out of ps
		f.apiKey = os.Getenv("TANDEM_API_KEY")
	}
	cfg, err := f.engine.config(ctx, errOut)
	if err != nil {
		return err
	}
	if f.parallel < 1 {
		return usageError(errOut, fmt.Errorf("--parallel %d: want 1 or more", f.parallel))
	}
	cfg.Parallel = f.parallel
	// Listen before loading, so a taken port or a refused address fails at once.
	ln, err := serve.Listen(f.addr, f.apiKey)
	if err != nil {
		return err
	}
	defer ln.Close()
	r, err := engine.Load(ctx, cfg, nil)
	if err != nil {
		return err
	}
	defer r.Close()
	name := f.alias
	if name == "" {
		name = strings.TrimSuffix(filepath.Base(cfg.Target), ".gguf")
	}
	host, _, _ := net.SplitHostPort(f.addr) // Listen has checked it
	s := serve.New(drafted{r, f.engine.draftKnobs}, serve.Options{Model: name, APIKey: f.apiKey, MaxQueue: f.maxQueue, MaxClientRequests: f.maxClient, Parallel: f.parallel,
		Hosts: []string{host}, AllowOrigins: f.allowOrigins, Log: slog.New(slog.NewTextHandler(errOut, nil))})
	drafting := "no drafting"
	if cfg.Draft != "" {
		drafting = "draft " + filepath.Base(cfg.Draft)
	} else if cfg.Lookup {
		drafting = "prompt lookup"
	}
	if f.parallel > 1 {
		drafting = fmt.Sprintf("%s, %d requests decoded together", drafting, f.parallel)
	}
	fmt.Fprintf(out, "tandem serve: %s (%s) on http://%s/v1\n", name, drafting, ln.Addr())
	return s.Serve(ctx, ln)
}

// drafted gives every request that names no drafting settings those of
// the command line. The rest of the runner (constraints, tools, the KV
// caches' size) shows through to the server.
type drafted struct {
	*engine.Runner
	drafting engine.Drafting
}

func (d drafted) Generate(ctx context.Context, req engine.Request, emit func(engine.Event)) (engine.Stats, error) {
	if req.Drafting == (engine.Drafting{}) {
		req.Drafting = d.drafting
	}
	return d.Runner.Generate(ctx, req, emit)
}
