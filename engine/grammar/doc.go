// Package grammar constrains generation to a formal language: the JSON a
// schema describes (OpenAI's response_format json_object and json_schema),
// a GBNF grammar (llama.cpp's `grammar` field), or a grammar built in code
// (a forced tool call). At each position a Matcher gives the mask of token
// ids the language allows next, advances by the token chosen, and says when
// the output is complete.
//
// Every source compiles to one form: rules whose alternatives are
// sequences of byte-set terminals and rule references. Characters are
// lowered to UTF-8 byte sequences at compile time, so a token holding part
// of a character is matched like any other. Matching keeps the set of
// parse stacks a pushdown automaton could be in (hash-consed, so stacks
// share their tails and a set of them is a small sorted list of ids);
// each distinct set is one state, and a state's moves on each byte and its
// token mask are computed once and kept. A mask is found by walking a trie
// of the vocabulary's byte strings from the state, skipping every subtree
// whose prefix the grammar refuses, so a mask costs one table look-up per
// trie node the language allows, and nothing on later visits of the state.
//
// JSON schemas are read and checked with github.com/santhosh-tekuri/jsonschema
// (draft 2020-12 by default, meta-schema validation, local $ref resolution);
// the grammar is made from its compiled schema. No Go library turns a schema
// or a grammar into a token-level matcher over a model's vocabulary, so that
// part is written here. A keyword the grammar cannot express is an error
// that names it; a grammar that allows nothing is an error.
//
// Speculative decoding stays exact under a mask: the draft's logits and the
// target's are masked with the same grammar state at each drafted
// position (Matcher.Speculate, MaskLogits), so greedy verification picks
// what the masked target alone would pick, and rejection sampling keeps
// the masked target's distribution.
package grammar
