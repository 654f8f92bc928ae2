//go:build unix

// Package cpuclock gives the benchmark tools (gpubench, specbench) the
// process's CPU time as a clock: on a machine other processes load, it
// counts the work a run does, where the wall clock also counts the time
// the run waited for a core.
package cpuclock

import (
	"syscall"
	"time"
)

// Process reads the process's CPU time (user and system, every thread) as a
// time; it is nil where that time cannot be read.
func Process() func() time.Time {
	return func() time.Time {
		var ru syscall.Rusage
		if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
			return time.Time{}
		}
		return time.Unix(0, ru.Utime.Nano()+ru.Stime.Nano())
	}
}
