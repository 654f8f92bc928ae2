// Package tokenizer turns text into token ids and back for the two vocabulary
// families GGUF files carry: byte-level BPE (tokenizer.ggml.model = "gpt2",
// the Qwen, Llama 3, GPT-2, DeepSeek, Falcon ... vocabularies) and
// SentencePiece (tokenizer.ggml.model = "llama", with scores and byte
// fallback). The results match the reference Hugging Face tokenizers id for
// id; ../shared/oracle and the llama.cpp vocabulary vectors prove it.
//
// A Tokenizer is built from plain values (New(Vocab{...})) or from a GGUF
// header (FromGGUF); it is immutable afterwards and safe for concurrent use.
//
// Pre-tokenizers are regular expressions with lookahead and Unicode classes
// that Go's regexp lacks. Every pattern runs through
// github.com/dlclark/regexp2, except the two that nearly every model uses
// (the GPT-2 pattern and the Llama 3 / Qwen 2 one): those have hand-written
// scanners, about ten times faster, which the tests prove equal to the
// regular expressions on the reference strings and on random text.
package tokenizer
