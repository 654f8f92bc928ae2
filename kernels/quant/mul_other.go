//go:build !amd64 || purego

package quant

// blockedKernel has no blocked kernels on this architecture (or under the
// purego tag): Mul runs every batch through DotsFunc.
func blockedKernel(Type) (*blocked, bool) { return nil, false }
