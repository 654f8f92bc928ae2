//go:build !unix

package gguf

import "os"

// mapFile reads the whole file where no mmap is available.
func mapFile(path string, size int64) ([]byte, error) { return os.ReadFile(path) }

func unmapFile([]byte) error { return nil }
