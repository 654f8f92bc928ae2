// Package plan is Tandem's memory planner: from GGUF headers (never their
// weights), a device list and a placement per model, it decides where every
// tensor shard, KV cache and scratch buffer lives, and adds up what each
// device will hold before anything loads.
//
// The plan is the executor's allocation list, not an estimate of it. For
// each ModelPlan (Plan.Target, Plan.Draft) the executor allocates:
//
//   - every Shard of every Tensor on its device: a whole tensor or a range of
//     rows is one contiguous piece of the file (Shard.FileRange); a range of
//     columns (Dim 0) takes that block-aligned piece of every row;
//
//   - every Buffer (KV caches per block and scratch, by BufferRole, shaped);
//
//   - on each CUDA device, the backend's workspace of Budget.Workspace
//     (kernels/cuda/workspace: 8-bit activations, attention partials),
//     reserved once for all the models on the device;
//
// and runs the blocks where BlockDevice (layer split) or KVHeads/FFNRows
// (tensor split) say, the head where HeadRun says and token lookups where
// EmbeddingRun says. The per-device budget shown to people is the sum of
// those allocations plus a per-device context overhead (overhead.go), so
// the numbers are the executor's own.
//
// What is counted, per device:
//   - weights: layer split puts whole blocks on devices by ratio; tensor split
//     cuts every block matrix on its natural axis (Q/K/V/gate/up by output
//     rows in whole KV-head groups, attention-output/down by input columns on
//     quant block boundaries) and mirrors the norms;
//   - the token embedding and the output head: the head is on one device,
//     replicated (a full copy per device) or split by vocabulary rows;
//   - the KV cache: ctx x kv_heads x head_dim per block, K and V each in its
//     type (KVTypes: f16, q8_0, q4_0, f32; what each device kind runs is
//     KVTypes.RunsOn);
//   - scratch derived from shapes for a batch of B tokens: residual stream,
//     Q/K/V, FFN activations, logits (n_vocab x B, f32) on
//     the head's devices, and receive buffers for activations crossing devices;
//   - a draft model's own weights, KV and scratch on its devices, and for a
//     draft that borrows the target's embedding and head (EAGLE-3), either the
//     buffers to use them where the target keeps them or copies on its devices.
//
// Make is a pure function: the same Input always gives the same Plan.
package plan
