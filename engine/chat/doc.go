// Package chat turns a conversation into the prompt text a model was trained
// on, by rendering the Jinja chat template its GGUF carries
// (tokenizer.chat_template) the way Hugging Face transformers does:
// trim_blocks and lstrip_blocks, bos_token and eos_token, tools absent,
// raise_exception and tojson.
//
// Rendering uses github.com/ardanlabs/jinja, a dependency-free Jinja engine
// written for LLM chat templates; it renders the real Qwen3 and Llama 3
// templates byte for byte (chat_test.go checks them against jinja2's output)
// and has no file or environment access (no include, import or extends).
// github.com/nikolalohinski/gonja/v2 was the other candidate: it needs a
// replacement tojson (its output is not HF's), raise_exception and
// strftime_now, and brings logging and file-loader dependencies.
//
// Templates come from untrusted files, and a Jinja engine offers no way to
// stop a render midway, so this package bounds the work before and around
// it: templates over MaxTemplateBytes, with recursive macros or recursive
// loops (which could exhaust the goroutine stack, a fatal error in Go) are
// refused; range() is capped per render; the render runs on its own
// goroutine under a time limit and its output under a size limit. A render
// that overruns is abandoned and reported; its goroutine finishes on its own.
//
// The engine's strftime_now reads the wall clock; callers that need a fixed
// date set Options.Now, which templates see as date_string (Llama 3.1-style
// templates prefer it).
//
// Any failure wraps ErrTemplate so that callers can offer the plain ChatML
// prompt (ChatML) instead; this package never substitutes it silently.
package chat
