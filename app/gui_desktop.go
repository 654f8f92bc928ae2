//go:build !headless

package app

const guiSummary = "open the window (what tandem with no command does)"
