// Package cpu is the reference kernels.Backend: every op in Go, parallel over
// the machine's cores through one persistent worker pool, with products
// computed directly on quantized weight blocks (kernels/quant) so weights
// stay as the file maps them. Other backends are tested against it.
package cpu
