package hub

import (
	"context"
	"errors"
	"fmt"

	"github.com/tandem-run/tandem/engine/gguf"
)

// Resolve is the local path of ref's model: the cached copy, else (online,
// with pull) the model downloaded first. Without pull an uncached model is
// an error wrapping ErrNotCached.
func (c *Client) Resolve(ctx context.Context, ref Ref, pull bool, progress func(Progress)) (string, error) {
	p, err := c.Cached(ref)
	if err == nil || !errors.Is(err, ErrNotCached) {
		return p, err
	}
	if c.cfg.Offline {
		return "", fmt.Errorf("%w; %w", err, ErrOffline)
	}
	if !pull {
		return "", err
	}
	rf, err := c.Files(ctx, ref.Repo, ref.Revision)
	if err != nil {
		return "", err
	}
	m, err := rf.Find(ref)
	if err != nil {
		return "", err
	}
	return c.Pull(ctx, rf, m, ref.rev(), progress)
}

// OpenHeader opens ref's header: from the cached copy when there is one,
// else from the Hub by range requests (stats then says what that cost;
// zero for a cached copy). Offline, only the cache.
func (c *Client) OpenHeader(ctx context.Context, ref Ref) (*gguf.File, HeaderStats, error) {
	if p, err := c.Cached(ref); err == nil {
		f, err := gguf.Open(p)
		return f, HeaderStats{}, err
	} else if !errors.Is(err, ErrNotCached) {
		return nil, HeaderStats{}, err
	} else if c.cfg.Offline {
		return nil, HeaderStats{}, fmt.Errorf("%w; %w", err, ErrOffline)
	}
	rf, err := c.Files(ctx, ref.Repo, ref.Revision)
	if err != nil {
		return nil, HeaderStats{}, err
	}
	m, err := rf.Find(ref)
	if err != nil {
		return nil, HeaderStats{}, err
	}
	return c.Header(ctx, ref.Repo, rf.Commit, m)
}
