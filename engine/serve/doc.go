// Package serve puts a Generator (the local engine) behind an
// OpenAI-compatible HTTP API, and is also that API's client: Remote drives any
// OpenAI-compatible endpoint (tandem serve, vLLM, SGLang, llama.cpp's server)
// through the same Generate call as the local engine, so the chat window can
// use a model served by a cluster of other machines.
//
// Routes: GET /v1/models, GET /v1/models/{id}, POST /v1/chat/completions,
// POST /v1/completions, GET /metrics (Prometheus text, behind the API key
// like the API) and GET /health. Requests are decoded strictly (an
// unknown or unsupported field is a 400 that names it), answered whole or as
// server-sent events, and run on the runner in arrival order, one at a time
// or, with Options.Parallel, up to that many at once (the runner decodes
// them together in one batched pass a step: engine.Config.Parallel);
// a request whose client goes away is cancelled, in the queue or mid-stream.
// Sampling fields a request leaves out take OpenAI's defaults (temperature 1,
// top_p 1); top_k, min_p, repeat_penalty (or repetition_penalty) and
// ignore_eos are accepted as the extensions llama.cpp and vLLM also accept.
// Every completion carries the speculative statistics in a "tandem" field.
//
// Structured output (structured.go) needs the local engine: response_format
// json_object and json_schema, and a GBNF "grammar" (llama.cpp's
// extension), become a grammar every token is chosen under; tools are
// rendered by the model's chat template, tool_choice "required" or a named
// function is enforced by a grammar of the template's call syntax, and the
// calls in the answer are parsed back into tool_calls, streamed as OpenAI's
// deltas.
//
// The server expects hostile clients (access.go): a request is checked
// before its body is read, in this order: its Host (without an API key,
// only names a DNS rebinding cannot produce), its Origin (web pages only
// from origins the operator allows, with CORS), the key, and the requests
// its address already has in flight. Headers and bodies must arrive within
// timeouts, and a refused request's connection is closed rather than its
// body read.
//
// It is written on net/http alone: the surface is six routes, and what
// matters here (strict decoding, a fair queue in front of one runner, SSE
// flushing, cancellation on disconnect) is a few dozen lines each that a web
// framework would hide rather than save.
package serve
