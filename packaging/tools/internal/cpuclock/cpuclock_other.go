//go:build !unix

package cpuclock

import "time"

// Process is nil where the process's CPU time is not read.
func Process() func() time.Time { return nil }
