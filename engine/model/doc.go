// Package model runs llama-family decoders (llama, qwen2, qwen3) on a
// kernels.Backend: it reads the hyper-parameters from GGUF metadata, binds
// the weights by their llama.cpp names, keeps a KV cache that can be cut back
// to any position (speculative rollback), and runs batches of tokens —
// a prompt, one decode step or a verification batch — as compiled programs of
// kernel ops.
package model
