package app

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/gofrs/flock"
	"github.com/google/renameio/v2"
)

// store is Tandem's folder in the user's config directory: settings.json
// and conversations/. Two windows may run at once, so every read-modify-write
// happens under a file lock and every write is atomic (a temporary file
// renamed over the old one): a crash or a second process never sees half a
// file.
type store struct {
	dir string
	now func() time.Time // injected for tests
	// rename is os.Rename when nil; tests make it fail where file
	// permissions cannot (as root).
	rename func(oldpath, newpath string) error
}

// openStore uses dir, or Tandem's folder in os.UserConfigDir when dir is "".
func openStore(dir string, now func() time.Time) (*store, error) {
	if dir == "" {
		base, err := os.UserConfigDir()
		if err != nil {
			return nil, fmt.Errorf("app: config directory: %w", err)
		}
		dir = filepath.Join(base, "tandem")
	}
	if err := os.MkdirAll(filepath.Join(dir, conversationsDir), 0o700); err != nil {
		return nil, fmt.Errorf("app: config directory: %w", err)
	}
	return &store{dir: dir, now: now}, nil
}

// locked runs fn holding the store's lock, shared by every Tandem process
// of this user.
func (s *store) locked(fn func() error) error {
	l := flock.New(filepath.Join(s.dir, ".lock"))
	if err := l.Lock(); err != nil {
		return fmt.Errorf("app: lock %s: %w", l.Path(), err)
	}
	defer l.Unlock()
	return fn()
}

// writeJSON writes v to path atomically.
func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	if err := renameio.WriteFile(path, append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("app: write %s: %w", path, err)
	}
	return nil
}

// errNewer marks a file written by a newer Tandem.
var errNewer = errors.New("written by a newer version of Tandem")

// keepAside renames a file Tandem cannot use to NAME.unreadable-TIME (or
// .newer-TIME) so that nothing is lost, and says so in one sentence.
func (s *store) keepAside(path string, why error) (string, error) {
	kind := "unreadable"
	if errors.Is(why, errNewer) {
		kind = "newer"
	}
	aside := fmt.Sprintf("%s.%s-%s", path, kind, s.now().UTC().Format("20060102T150405.000000000"))
	rename := os.Rename
	if s.rename != nil {
		rename = s.rename
	}
	if err := rename(path, aside); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("app: keep %s aside: %w", path, err)
	}
	return fmt.Sprintf("%s could not be used (%v); it was kept as %s.", filepath.Base(path), why, aside), nil
}
