package app

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"text/tabwriter"

	"github.com/dustin/go-humanize"

	"github.com/tandem-run/tandem/engine/device"
)

func runDevices(ctx context.Context, args []string, out, errOut io.Writer) error {
	fs := newFlags("devices", errOut)
	asJSON := fs.Bool("json", false, "print the inventory as JSON (the format --devices-file reads)")
	fs.Usage = func() {
		fmt.Fprintln(errOut, "Usage: tandem devices [--json]\n\nLists the NVIDIA GPUs, in CUDA's PCI bus order (CUDA_DEVICE_ORDER=PCI_BUS_ID).")
		fs.PrintDefaults()
	}
	if rest, err := parseFlags(fs, args); err != nil {
		return err
	} else if len(rest) > 0 {
		fs.Usage()
		return errUsage
	}
	inv := device.Probe()
	if *asJSON {
		if inv.Reason != "" {
			fmt.Fprintln(errOut, inv.Reason)
		}
		return inv.WriteJSON(out)
	}
	printInventory(out, inv)
	return nil
}

func printInventory(out io.Writer, inv device.Inventory) {
	if len(inv.Devices) == 0 {
		fmt.Fprintf(out, "no GPUs: %s\n", inv.Reason)
		return
	}
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "DEVICE\tNAME\tTOTAL\tFREE\tUSED\tCOMPUTE\tPCI BUS\tUUID")
	for _, d := range inv.Devices {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", d.Label(), d.Name,
			humanize.IBytes(d.MemoryTotal), humanize.IBytes(d.MemoryFree), humanize.IBytes(d.MemoryUsed()),
			d.ComputeCapability, d.PCIBusID, d.UUID)
	}
	tw.Flush()
	var links []string
	for _, d := range inv.Devices {
		for _, other := range slices.Sorted(maps.Keys(d.Links)) {
			if other > d.Index {
				links = append(links, fmt.Sprintf("  %d-%d %s", d.Index, other, d.Links[other]))
			}
		}
	}
	if len(links) > 0 {
		fmt.Fprintln(out, "\nlinks:")
		for _, l := range links {
			fmt.Fprintln(out, l)
		}
	}
	fmt.Fprintf(out, "\nsource: %s\n", inv.Source)
	if inv.Reason != "" {
		fmt.Fprintln(out, inv.Reason)
	}
}
