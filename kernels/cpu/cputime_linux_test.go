package cpu

import (
	"syscall"
	"time"
)

// threadCPU is the calling OS thread's CPU time (the caller locks its
// goroutine to the thread): what a benchmark on a shared, loaded machine
// can compare between runs, where wall time cannot.
func threadCPU() (time.Duration, bool) {
	var r syscall.Rusage
	if err := syscall.Getrusage(1 /* RUSAGE_THREAD */, &r); err != nil {
		return 0, false
	}
	return time.Duration(r.Utime.Nano() + r.Stime.Nano()), true
}
