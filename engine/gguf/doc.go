// Package gguf reads GGUF model files: the header, the metadata and the
// tensor index, without touching weights, and maps tensor data read-only on
// demand. Split models (NAME-00001-of-00003.gguf) read as one file.
//
// Everything in a GGUF header comes from an untrusted file, so every count and
// length is checked against the bytes that remain before anything is
// allocated: a corrupt or hostile file gives an error naming the file and the
// problem, never a panic or a huge allocation.
//
// A small writer (Writer) produces GGUF files for tests, fuzz seeds and the
// synthetic-model tool.
package gguf
