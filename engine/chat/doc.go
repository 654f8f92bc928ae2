// Package chat turns a conversation into the prompt text a model was trained
// on, by rendering the Jinja chat template its GGUF carries
// (tokenizer.chat_template) the way Hugging Face transformers does:
// trim_blocks and lstrip_blocks, bos_token and eos_token, raise_exception
// and tojson, and the tools and tool calls of OpenAI requests (tools.go).
//
// Tool calling: a template's tool syntax is found by rendering probes
// through it (ToolSyntax); ParseTools and ParseToolChoice check a
// request's tools; ToolParser reads the calls back out of the model's
// text as it streams (Qwen/Hermes <tool_call> tags, Llama 3.1 JSON); and
// ToolCallGrammar makes the grammar (engine/grammar) that forces a call
// for tool_choice "required" or a named function.
//
// Rendering uses github.com/ardanlabs/jinja, a dependency-free Jinja engine
// written for LLM chat templates; it renders the real Qwen3 and Llama 3
// templates byte for byte (chat_test.go checks them against jinja2's output)
// and has no file or environment access (no include, import or extends).
// github.com/nikolalohinski/gonja/v2 was the other candidate: it needs a
// replacement tojson (its output is not HF's), raise_exception and
// strftime_now, and brings logging and file-loader dependencies.
//
// Templates come from untrusted files, and the engine has no hook to stop
// a render midway or to bound what it makes, so this package adds both.
// Before compiling, templates over MaxTemplateBytes, with recursive macros
// or recursive loops (which could exhaust the goroutine stack, a fatal
// error in Go) are refused. After compiling, the syntax tree is rewritten
// (instrument.go) so that every operation able to make a large value, every
// loop and every byte printed goes through a guard (sandbox.go): string
// repetition, replace, join, indent and tojson are refused before they
// would make a value over Limits.Output; lists, dicts and loops are held to
// Limits.Items elements; all values made and printed together to
// Limits.Work (plus eight times the messages); range() to Limits.Range
// elements per render. Each guard checks the render's context, which
// carries Limits.Time, so a render stops at its next operation when it is
// cancelled or out of time: it runs on the caller's goroutine and nothing
// of it outlives Render. Forking the engine to add hooks was the other way;
// the rewrite keeps the engine as released, and fails closed (New refuses
// every template) if an engine upgrade changes the tree it relies on.
//
// The engine's strftime_now reads the wall clock; callers that need a fixed
// date set Options.Now, which templates see as date_string (Llama 3.1-style
// templates prefer it).
//
// Any failure wraps ErrTemplate so that callers can offer the plain ChatML
// prompt (ChatML) instead; this package never substitutes it silently.
package chat
