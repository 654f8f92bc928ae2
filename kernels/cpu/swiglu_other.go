//go:build !amd64 || purego

package cpu

func swigluRow(dst, gate, up []float32) { swigluGo(dst, gate, up) }
