// Command tandem is a desktop model runner: with no arguments it opens the
// window, otherwise it runs one engine command headless (tandem help).
package main

import (
	"os"

	"github.com/tandem-run/tandem/app"
)

func main() {
	os.Exit(app.Main(os.Args[1:], os.Stdout, os.Stderr))
}
