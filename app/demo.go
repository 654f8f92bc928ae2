package app

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/tandem-run/tandem/assets"
)

// cacheDir is Tandem's folder in the user's cache directory.
func cacheDir() (string, error) {
	dir, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("app: cache directory: %w", err)
	}
	return filepath.Join(dir, "tandem"), nil
}

// demoPair returns the bundled demo models, written to the cache directory
// the first time (and again whenever the cache was cleared).
func demoPair() (assets.DemoPair, error) {
	dir, err := cacheDir()
	if err != nil {
		return assets.DemoPair{}, err
	}
	return assets.WriteDemoPair(dir)
}

// modelOrDemo is for commands whose --model is optional (run, bench,
// perplexity, serve): with no target it returns the demo target, and the
// demo draft too when the command drafts (wantDraft) and none was given,
// and says so on errOut; otherwise it returns its arguments.
func modelOrDemo(target, draft string, wantDraft bool, errOut io.Writer) (string, string, error) {
	if target != "" {
		return target, draft, nil
	}
	p, err := demoPair()
	if err != nil {
		return "", "", err
	}
	if wantDraft && draft == "" {
		draft = p.Draft
		fmt.Fprintf(errOut, "tandem: no --model: using the bundled demo pair (%s, draft %s).\n", p.Target, p.Draft)
	} else {
		fmt.Fprintf(errOut, "tandem: no --model: using the bundled demo target %s.\n", p.Target)
	}
	fmt.Fprintln(errOut, assets.DemoNote)
	return p.Target, draft, nil
}
