package app

import (
	"context"
	"fmt"
	"io"
)

// runGUICommand is `tandem gui`: the window, with developer options.
func runGUICommand(ctx context.Context, args []string, out, errOut io.Writer) error {
	fs := newFlags("gui", errOut)
	var opt guiOptions
	fs.StringVar(&opt.frameStats, "frame-stats", "", "on exit, write how long the UI thread was unresponsive (JSON, per phase) to this `file`")
	fs.StringVar(&opt.virtual, "virtual-devices", "", "show and plan for virtual devices, e.g. `cuda0:24GiB,cuda0:24GiB`, instead of this machine's")
	fs.Usage = func() {
		fmt.Fprintln(errOut, "Usage: tandem gui [--frame-stats FILE] [--virtual-devices SPEC]\n\nOpens the window, as tandem with no arguments does.")
		fs.PrintDefaults()
	}
	if rest, err := parseFlags(fs, args); err != nil {
		return err
	} else if len(rest) > 0 {
		fs.Usage()
		return errUsage
	}
	return openWindow(opt)
}
