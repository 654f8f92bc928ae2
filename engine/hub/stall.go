package hub

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sync/atomic"
	"time"
)

// stallGuard ends a request whose body stops arriving: each read that
// brings bytes winds its timer back, and when it runs out the request's
// context is cancelled, which fails the read in progress.
type stallGuard struct {
	timer   *time.Timer
	d       time.Duration
	stalled atomic.Bool
	cancel  context.CancelFunc
}

// guarded sends a request under a stall guard; the caller reads the body
// through g.body and calls g.stop when done.
func (c *Client) guarded(ctx context.Context, method, u string, header http.Header) (*http.Response, *stallGuard, error) {
	rctx, cancel := context.WithCancel(ctx)
	g := &stallGuard{d: c.stall, cancel: cancel}
	resp, err := c.send(rctx, method, u, header)
	if err != nil {
		cancel()
		return nil, nil, err
	}
	if g.d > 0 {
		g.timer = time.AfterFunc(g.d, func() {
			g.stalled.Store(true)
			cancel()
		})
	}
	return resp, g, nil
}

func (g *stallGuard) stop() {
	if g.timer != nil {
		g.timer.Stop()
	}
	g.cancel()
}

// read reads from r, winding the timer back when bytes come.
func (g *stallGuard) read(r io.Reader, p []byte) (int, error) {
	n, err := r.Read(p)
	if n > 0 && g.timer != nil {
		g.timer.Reset(g.d)
	}
	if err != nil && err != io.EOF && g.stalled.Load() {
		return n, fmt.Errorf("no data for %s: %w", g.d, errDropped)
	}
	return n, err
}

// reader is r read through the guard.
func (g *stallGuard) reader(r io.Reader) io.Reader { return guardedReader{g, r} }

type guardedReader struct {
	g *stallGuard
	r io.Reader
}

func (gr guardedReader) Read(p []byte) (int, error) { return gr.g.read(gr.r, p) }
