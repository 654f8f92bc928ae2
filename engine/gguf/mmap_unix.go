//go:build unix

package gguf

import "golang.org/x/sys/unix"

// mapFile maps the whole file read-only; the kernel pages weights in as they
// are used, so opening a model costs no reads.
func mapFile(path string, size int64) ([]byte, error) {
	if size == 0 {
		return []byte{}, nil
	}
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	return unix.Mmap(fd, 0, int(size), unix.PROT_READ, unix.MAP_SHARED)
}

func unmapFile(b []byte) error {
	if len(b) == 0 {
		return nil
	}
	return unix.Munmap(b)
}
