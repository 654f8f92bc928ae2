//go:build unix

package hub

import "golang.org/x/sys/unix"

// freeSpace is the bytes an unprivileged user may still write under dir.
func freeSpace(dir string) (int64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return -1, err
	}
	return int64(st.Bavail) * int64(st.Bsize), nil
}
