//go:build !amd64 || purego

package cpu

func dotHalfWide(k []byte, q []float32) float32 { return dotHalfWideGo(k, q) }
