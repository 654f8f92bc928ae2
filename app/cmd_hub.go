package app

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"text/tabwriter"

	"github.com/dustin/go-humanize"

	"github.com/tandem-run/tandem/engine/device"
	"github.com/tandem-run/tandem/engine/gguf"
	"github.com/tandem-run/tandem/engine/hub"
	"github.com/tandem-run/tandem/engine/plan"
	"github.com/tandem-run/tandem/kernels/quant"
)

// newHubClient is the Hugging Face Hub as the environment configures it
// (HF_ENDPOINT, HF_TOKEN, HF_HOME, HF_HUB_OFFLINE).
func newHubClient() *hub.Client { return hub.New(hub.ConfigFromEnv(os.Getenv)) }

// isHubRef tells a --model value that names a Hub model rather than a file:
// hf://..., or owner/name:X when no such file exists.
func isHubRef(spec string) bool {
	if !hub.IsRef(spec) {
		return false
	}
	_, err := os.Stat(spec)
	return err != nil
}

// openModelHeader opens a --model or --draft value's header: a local file,
// or a Hub model's cached copy, or its header read from the Hub by range
// requests (nothing is downloaded).
func openModelHeader(ctx context.Context, spec string) (*gguf.File, error) {
	if !isHubRef(spec) {
		return gguf.Open(spec)
	}
	ref, err := hub.ParseRef(spec)
	if err != nil {
		return nil, err
	}
	f, _, err := newHubClient().OpenHeader(ctx, ref)
	return f, err
}

// resolveModelPath turns a --model or --draft value into a local file: a
// path stays as it is; a Hub model is its cached copy, pulled first when
// pull is set.
func resolveModelPath(ctx context.Context, spec string, pull bool, errOut io.Writer) (string, error) {
	if spec == "" || !isHubRef(spec) {
		return spec, nil
	}
	ref, err := hub.ParseRef(spec)
	if err != nil {
		return "", err
	}
	p, err := newHubClient().Resolve(ctx, ref, pull, pullProgress(errOut))
	if errors.Is(err, hub.ErrNotCached) && !errors.Is(err, hub.ErrOffline) {
		return "", fmt.Errorf("%w: run `tandem pull %s` first, or add --pull", err, ref)
	}
	return p, err
}

// pullProgress prints a line per tenth of a pull and every note.
func pullProgress(errOut io.Writer) func(hub.Progress) {
	last := -1
	return func(p hub.Progress) {
		if p.Note != "" {
			fmt.Fprintf(errOut, "tandem pull: %s: %s\n", p.File, p.Note)
			return
		}
		if p.Total <= 0 {
			return
		}
		tenth := int(10 * p.Done / p.Total)
		if tenth == last {
			return
		}
		last = tenth
		part := ""
		if p.Parts > 1 {
			part = fmt.Sprintf(" (part %d of %d)", p.Part, p.Parts)
		}
		fmt.Fprintf(errOut, "tandem pull: %s%s: %d%%, %s of %s\n", p.File, part, 10*tenth,
			humanize.IBytes(uint64(p.Done)), humanize.IBytes(uint64(p.Total)))
	}
}

// runHub is `tandem hub search|files`.
func runHub(ctx context.Context, args []string, out, errOut io.Writer) error {
	usage := func() error {
		fmt.Fprintln(errOut, "Usage:\n  tandem hub search QUERY [--sort downloads|likes|updated|trending] [--limit N] [--json]\n"+
			"  tandem hub files OWNER/NAME [--json] [--devices-file F | --virtual-devices V] [--ctx N]\n\n"+
			"Finds GGUF models on the Hugging Face Hub (HF_ENDPOINT for a mirror, HF_TOKEN for gated models).\n"+
			"files reads each model's header with range requests and says which devices it fits, before any download.")
		return errUsage
	}
	if len(args) == 0 {
		return usage()
	}
	switch args[0] {
	case "search":
		return runHubSearch(ctx, args[1:], out, errOut)
	case "files":
		return runHubFiles(ctx, args[1:], out, errOut)
	case "-h", "--help", "help":
		usage()
		return nil
	}
	return usage()
}

func runHubSearch(ctx context.Context, args []string, out, errOut io.Writer) error {
	fs := newFlags("hub search", errOut)
	sortBy := fs.String("sort", "downloads", "order: `downloads`, likes, updated or trending")
	limit := fs.Int("limit", 20, "most `repositories` to list")
	asJSON := fs.Bool("json", false, "print JSON")
	rest, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	s, err := hub.ParseSort(*sortBy)
	if err != nil {
		fmt.Fprintf(errOut, "tandem hub search: %v\n", err)
		return errUsage
	}
	repos, err := newHubClient().Search(ctx, hub.Query{Text: strings.Join(rest, " "), Sort: s, Limit: *limit})
	if err != nil {
		return err
	}
	if *asJSON {
		return printJSON(out, repos)
	}
	if len(repos) == 0 {
		fmt.Fprintln(out, "No GGUF repositories match.")
		return nil
	}
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "REPOSITORY\tDOWNLOADS\tLIKES\tUPDATED\t")
	for _, r := range repos {
		updated := "-"
		if !r.LastModified.IsZero() {
			updated = r.LastModified.Format("2006-01-02")
		}
		name := r.ID
		if r.Gated != "" {
			name += " (gated)"
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t\n", name, r.Downloads, r.Likes, updated)
	}
	return tw.Flush()
}

// hubModel is one line of `tandem hub files`.
type hubModel struct {
	hub.Model
	Fits        []fit  `json:"fits,omitempty"`
	HeaderBytes int64  `json:"header_bytes"` // fetched to read the header
	Error       string `json:"error,omitempty"`
}

func runHubFiles(ctx context.Context, args []string, out, errOut io.Writer) error {
	fs := newFlags("hub files", errOut)
	devicesFile := fs.String("devices-file", "", "say what fits on this inventory `file` (tandem devices --json) instead of the devices here")
	virtual := fs.String("virtual-devices", "", "say what fits on virtual devices, e.g. `cuda0:12GiB,cuda0:12GiB`")
	ctxSize := fs.Int("ctx", 0, "context size in `tokens` the fit is judged for (default: 4096, or less if the model was trained shorter)")
	asJSON := fs.Bool("json", false, "print JSON")
	rest, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(rest) != 1 {
		fmt.Fprintln(errOut, "Usage: tandem hub files OWNER/NAME [--json] [--devices-file F | --virtual-devices V]")
		return errUsage
	}
	repo := strings.TrimPrefix(rest[0], hub.Scheme)
	repo, rev, _ := strings.Cut(repo, "@")
	inv := hostInventory()
	if *devicesFile != "" || *virtual != "" {
		if inv, err = loadInventory(*devicesFile, *virtual); err != nil {
			return err
		}
	}
	c := newHubClient()
	rf, err := c.Files(ctx, repo, rev)
	if err != nil {
		return err
	}
	models := hubFits(ctx, c, rf, inv, *ctxSize)
	if *asJSON {
		return printJSON(out, struct {
			Repo       string     `json:"repo"`
			Commit     string     `json:"commit"`
			Models     []hubModel `json:"models"`
			Incomplete []string   `json:"incomplete,omitempty"`
		}{rf.Repo, rf.Commit, models, rf.Incomplete})
	}
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "FILE\tQUANT\tSIZE\tPARTS\tFITS\t")
	var fetched, size int64
	for _, m := range models {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t\n", m.Name, cmp.Or(m.Quant, "-"), humanize.IBytes(uint64(m.Size)), len(m.Parts), fitSummary(m))
		fetched += m.HeaderBytes
		size += m.Size
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, s := range rf.Incomplete {
		fmt.Fprintf(out, "Left out, parts missing: %s\n", s)
	}
	var labels []string
	for _, d := range inv.Devices {
		labels = append(labels, fmt.Sprintf("%s %s", d.Label(), humanize.IBytes(uint64(d.Capacity()))))
	}
	fmt.Fprintf(out, "\nFits: alone on a device (%s), or over all of them by layers; read from the headers: %s of %s downloaded.\n",
		strings.Join(labels, ", "), humanize.IBytes(uint64(fetched)), humanize.IBytes(uint64(size)))
	return nil
}

// hubFits reads the models' headers (a few at once) and judges each.
func hubFits(ctx context.Context, c *hub.Client, rf *hub.RepoFiles, inv device.Inventory, ctxSize int) []hubModel {
	models := make([]hubModel, len(rf.Models))
	sem := make(chan struct{}, 4)
	var wg sync.WaitGroup
	for i, m := range rf.Models {
		models[i].Model = m
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			f, st, err := c.Header(ctx, rf.Repo, rf.Commit, m)
			models[i].HeaderBytes = st.Fetched
			if err != nil {
				models[i].Error = err.Error()
				return
			}
			models[i].Fits = fitsOf(f, inv, ctxSize)
		}()
	}
	wg.Wait()
	return models
}

// fit says whether a model fits one device alone (Index) or all of them
// with a layer split (Index -1).
type fit struct {
	Device   string `json:"device"`
	Index    int    `json:"index"`
	Fits     bool   `json:"fits"`
	Bytes    int64  `json:"bytes"`    // what it would hold (all devices: together)
	Capacity int64  `json:"capacity"` // what it can hold
	Error    string `json:"error,omitempty"`
}

func (f fit) String() string {
	if f.Error != "" {
		return f.Device + ": " + f.Error
	}
	word := "fits"
	if !f.Fits {
		word = "does not fit"
	}
	return fmt.Sprintf("%s: %s (%s of %s)", f.Device, word, humanize.IBytes(uint64(f.Bytes)), humanize.IBytes(uint64(f.Capacity)))
}

// fitsOf plans the model (header only) on each device alone and, with
// several, over all of them by layers.
func fitsOf(f *gguf.File, inv device.Inventory, ctxSize int) []fit {
	place := func(label string, index int, devs []int) fit {
		r := fit{Device: label, Index: index}
		p, err := plan.Make(plan.Input{Target: f, Devices: inv.Devices, Ctx: ctxSize, KV: plan.SameKV(quant.F16),
			TargetPlacement: plan.Placement{Devices: devs}})
		if err != nil {
			r.Error = err.Error()
			return r
		}
		r.Fits = p.Fits
		for _, b := range p.Devices {
			r.Bytes += b.Total()
			r.Capacity += b.Capacity
		}
		return r
	}
	var out []fit
	var all []int
	for _, d := range inv.Devices {
		out = append(out, place(d.Label(), d.Index, []int{d.Index}))
		all = append(all, d.Index)
	}
	if len(all) > 1 {
		out = append(out, place(fmt.Sprintf("all %d", len(all)), -1, all))
	}
	return out
}

// fitSummary is the FITS column: the devices that hold the model alone,
// else whether all of them together do.
func fitSummary(m hubModel) string {
	if m.Error != "" {
		return "header: " + m.Error
	}
	var alone []string
	var together *fit
	for i, f := range m.Fits {
		switch {
		case f.Index < 0:
			together = &m.Fits[i]
		case f.Fits:
			alone = append(alone, f.Device)
		}
	}
	switch {
	case len(m.Fits) == 0:
		return "-"
	case len(alone) > 0:
		return strings.Join(alone, ", ")
	case together != nil && together.Fits:
		return together.Device + " devices, split by layers"
	}
	need := m.Fits[0].Bytes
	return "no (needs about " + humanize.IBytes(uint64(need)) + " on one device)"
}

// runPull is `tandem pull REPO[:FILE|:QUANT]`.
func runPull(ctx context.Context, args []string, out, errOut io.Writer) error {
	fs := newFlags("pull", errOut)
	fs.Usage = func() {
		fmt.Fprintln(errOut, "Usage: tandem pull OWNER/NAME[:QUANT|:FILE.gguf]  (or hf://OWNER/NAME/FILE.gguf)\n\n"+
			"Downloads a model from the Hugging Face Hub into its cache (HF_HOME, shared with the Hub's own tools),\n"+
			"resuming a partial download, and prints the local path. Use it as --model hf://... afterwards.")
		fs.PrintDefaults()
	}
	rest, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(rest) != 1 {
		fs.Usage()
		return errUsage
	}
	spec := rest[0]
	if !strings.HasPrefix(spec, hub.Scheme) {
		spec = hub.Scheme + spec
	}
	ref, err := hub.ParseRef(spec)
	if err != nil {
		return err
	}
	p, err := newHubClient().Resolve(ctx, ref, true, pullProgress(errOut))
	if err != nil {
		return err
	}
	fmt.Fprintln(out, p)
	return nil
}

func printJSON(out io.Writer, v any) error {
	enc := json.NewEncoder(out)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
