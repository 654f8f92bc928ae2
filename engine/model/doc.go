// Package model runs llama-family decoders (llama, qwen2, qwen3), EAGLE-3
// drafts and DFlash block drafts (dflash_params.go has llama.cpp's format)
// on kernels.Backends, exactly as a memory plan
// (engine/plan) lays them out: one device or several, split by layers or
// by tensors, the head whole, replicated or split by vocabulary. It reads
// the hyper-parameters from GGUF metadata, binds the weights by their
// llama.cpp names, allocates the plan's shards and buffers and nothing
// else, keeps a KV cache that can be cut back to any position (speculative
// rollback), and runs batches of tokens — a prompt, one decode step or a
// verification batch — as compiled programs of kernel ops, one per device
// and pass where the layout allows. One device is a one-device plan: there
// is one executor.
package model
