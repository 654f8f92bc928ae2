//go:build !unix

package main

import "time"

// cpuClock is nil where the process's CPU time is not read.
func cpuClock() func() time.Time { return nil }
