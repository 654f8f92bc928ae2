//go:build !linux

package cpu

import "time"

// threadCPU is unknown here: benchmarks report wall time only.
func threadCPU() (time.Duration, bool) { return 0, false }
