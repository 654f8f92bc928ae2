package app

import (
	"fmt"
	"os"
	"strconv"
	"syscall"
)

// computeNice is how many steps of niceness the process's threads other
// than the window's run below it while the window is open: a model
// computing on the CPU backend then yields its core to the drawing of a
// frame (the main thread, and the software rasterizer's threads it starts)
// instead of sharing it evenly, and still has every cycle the window
// leaves. On the 2-core test machine under Xvfb, an answer's first frame
// took 45-90 ms at equal priority while the engine's worker held a core.
const computeNice = 5

// lowerOtherThreads sets every thread of the process except the calling
// one to at least delta steps nicer than the caller (at most 19); threads
// the Go runtime starts later inherit that from the thread that creates
// them (the runtime's own, never the locked main one). The caller must be
// locked to its thread (the window's, which Fyne locks). Raising niceness
// needs no privilege; threads already nicer are left alone.
func lowerOtherThreads(delta int) error {
	self := syscall.Gettid()
	// getpriority's raw syscall returns 20-nice (never negative).
	prio, err := syscall.Getpriority(syscall.PRIO_PROCESS, self)
	if err != nil {
		return fmt.Errorf("app: thread priority: %w", err)
	}
	nice := min(20-prio+delta, 19)
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return fmt.Errorf("app: thread priority: %w", err)
	}
	for _, t := range tasks {
		tid, err := strconv.Atoi(t.Name())
		if err != nil || tid == self {
			continue
		}
		prio, err := syscall.Getpriority(syscall.PRIO_PROCESS, tid)
		if err != nil {
			continue // the thread has exited
		}
		if 20-prio >= nice {
			continue
		}
		if err := syscall.Setpriority(syscall.PRIO_PROCESS, tid, nice); err != nil && err != syscall.ESRCH {
			return fmt.Errorf("app: thread priority: %w", err)
		}
	}
	return nil
}
