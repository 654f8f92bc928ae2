// Package kernels is the contract between the engine and the devices that
// compute: a small Backend interface (memory with accounting, copies, and a
// compiled list of decoder ops), the 2-D Tensor view those ops read and write,
// and the op set itself.
//
// The op set is deliberately short — what a llama-family decoder needs — so a
// new backend is cheap to write and every op can be checked against the CPU
// reference (kernels/cpu) in one test. Models describe a forward pass as a
// []Op once and run the compiled Program per step; a GPU backend may capture
// it as a graph and replay it, which is why everything that changes per step
// (token ids, positions) lives in device tensors rather than in op fields.
package kernels
