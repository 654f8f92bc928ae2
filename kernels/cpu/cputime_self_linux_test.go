package cpu_test

import "syscall"

// processCPU is the process's CPU time in nanoseconds, -1 where it cannot
// be read.
func processCPU() int64 {
	var r syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &r); err != nil {
		return -1
	}
	return r.Utime.Nano() + r.Stime.Nano()
}
