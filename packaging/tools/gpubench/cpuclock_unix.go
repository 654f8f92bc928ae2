//go:build unix

package main

import (
	"syscall"
	"time"
)

// cpuClock reads the process's CPU time (user and system, every thread)
// as a time: on a machine other processes load, the work a run does,
// where the wall clock also counts the time it waited for a core.
func cpuClock() func() time.Time {
	return func() time.Time {
		var ru syscall.Rusage
		if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
			return time.Time{}
		}
		return time.Unix(0, ru.Utime.Nano()+ru.Stime.Nano())
	}
}
