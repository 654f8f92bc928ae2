package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/tandem-run/tandem/engine/device"
)

// runGUICommand is `tandem gui`: the window, with developer options.
func runGUICommand(ctx context.Context, args []string, out, errOut io.Writer) error {
	fs := newFlags("gui", errOut)
	var opt guiOptions
	fs.StringVar(&opt.frameStats, "frame-stats", "", "on exit, write how long the UI thread was unresponsive (JSON, per phase) to this `file`")
	fs.StringVar(&opt.simulate, "simulate", "", "plan for GPUs you do not have, e.g. `rtx4090,rtx4090,cuda:12GiB` (cards: "+cardKeys()+"); never loaded")
	fs.StringVar(&opt.virtual, "virtual-devices", "", "plan for virtual devices, e.g. `cuda0:24GiB,cuda0:24GiB`, as simulated ones")
	fs.StringVar(&opt.devicesFile, "devices-file", "", "plan for the devices of an inventory `file` (tandem devices --json), as simulated ones")
	registerCPUMoE(fs, &opt.cpuMoE, &opt.cpuMoEDraft)
	fs.Usage = func() {
		fmt.Fprintln(errOut, "Usage: tandem gui [--frame-stats FILE] [--simulate CARDS | --virtual-devices SPEC | --devices-file FILE]\n\n"+
			"Opens the window, as tandem with no arguments does. Simulated devices are planned for, not loaded onto;\n"+
			"the window's Devices menu switches between them and this machine's.")
		fs.PrintDefaults()
	}
	if rest, err := parseFlags(fs, args); err != nil {
		return err
	} else if len(rest) > 0 {
		fs.Usage()
		return errUsage
	}
	n := 0
	for _, o := range []string{opt.simulate, opt.virtual, opt.devicesFile} {
		if o != "" {
			n++
		}
	}
	if n > 1 {
		return errors.New("--simulate, --virtual-devices and --devices-file exclude each other")
	}
	return openWindow(opt)
}

// cardKeys lists the cards --simulate knows.
func cardKeys() string {
	var keys []string
	for _, c := range device.Cards() {
		keys = append(keys, c.Key)
	}
	return strings.Join(keys, ", ")
}
