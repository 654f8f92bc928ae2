//go:build !amd64 || purego

package cpu

func dotHalfWide(k []byte, q []float32) float32 { return dotHalfWideGo(k, q) }

func accumulateHalf(acc []float32, v []byte, vs float32) { accumulateHalfGo(acc, v, vs) }

func scaleHalf(acc []float32, ms float32) { scaleHalfGo(acc, ms) }
