//go:build !linux

package app

// computeNice is unused where threads cannot be told apart (see the Linux
// file).
const computeNice = 0

// lowerOtherThreads does nothing off Linux: there a process's priority
// applies to all its threads at once, the window's with them.
func lowerOtherThreads(int) error { return nil }
