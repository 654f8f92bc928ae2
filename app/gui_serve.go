//go:build !headless

package app

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/tandem-run/tandem/engine"
	"github.com/tandem-run/tandem/engine/serve"
	"github.com/tandem-run/tandem/widgets"
)

// serveGrace is how long a server stopped from the window lets running
// requests finish: the user asked it to stop, or the models are going away.
const serveGrace = 2 * time.Second

// guiServer is an OpenAI-compatible server on the loaded models, started
// from the main window. Its fields belong to the main goroutine.
type guiServer struct {
	cancel context.CancelFunc // nil until listening
	done   chan struct{}      // closed when Serve has returned
	url    string
}

// loadedParallel is the sequences the loaded models decode together: the
// requests a server started now runs at once, whatever the control shows.
func loadedParallel(c engine.Config) int {
	if c.Plan != nil {
		return max(1, c.Plan.Parallel)
	}
	return max(1, c.Parallel)
}

// serveAddr completes what the address field holds: empty is loopback on a
// free port, a bare port is loopback on that port, a bare host any free port.
func serveAddr(s string) string {
	s = strings.TrimSpace(s)
	if s == "" {
		return "127.0.0.1:0"
	}
	if _, _, err := net.SplitHostPort(s); err == nil {
		return s
	}
	if _, err := strconv.Atoi(s); err == nil {
		return net.JoinHostPort("127.0.0.1", s)
	}
	return net.JoinHostPort(strings.Trim(s, "[]"), "0")
}

// startServe listens on addr and serves the loaded models until stopServe,
// an unload or the window closing. Listening and serving run off the main
// goroutine; the control shows the address once the port is open.
func (m *mainWindow) startServe(addr, key string) {
	if m.model == nil || m.server != nil || m.serverStopping != nil {
		return
	}
	addr = serveAddr(addr)
	if err := serve.CheckAddr(addr, key); err != nil {
		m.serveCtl.Set(widgets.ServeState{Ready: true, Status: sentence(err), Error: true})
		return
	}
	srv := &guiServer{done: make(chan struct{})}
	m.server = srv
	m.serveCtl.Set(widgets.ServeState{Busy: true, Status: "Starting on " + addr + "…"})
	gen := m.model
	name := strings.TrimSuffix(filepath.Base(m.loadedCfg.Target), ".gguf")
	parallel := loadedParallel(m.loadedCfg)
	ctx, cancel := context.WithCancel(context.Background())
	srv.cancel = cancel
	// done closes before the goroutine posts its result, so a window that
	// is closing can wait for it without running posted functions.
	go func() {
		ln, err := serve.Listen(addr, key)
		if err != nil {
			close(srv.done)
			m.post(func() { m.served(srv, err) })
			return
		}
		url := "http://" + ln.Addr().String() + "/v1"
		m.post(func() {
			if m.server == srv {
				srv.url = url
				m.showServer()
			}
		})
		host, _, _ := net.SplitHostPort(addr)
		s := serve.New(gen, serve.Options{Model: name, APIKey: key, Hosts: []string{host}, ShutdownGrace: serveGrace, Parallel: parallel})
		err = s.Serve(ctx, ln)
		close(srv.done)
		m.post(func() { m.served(srv, err) })
	}()
}

// served ends a server: stopped by the user, or failed.
func (m *mainWindow) served(srv *guiServer, err error) {
	if m.server != srv {
		return
	}
	m.server = nil
	if err != nil && !errors.Is(err, context.Canceled) {
		m.serveCtl.Set(widgets.ServeState{Ready: m.model != nil, Status: "The server stopped: " + sentence(err), Error: true})
		return
	}
	m.showServer()
}

// stopServe stops the server, if one runs, and returns a channel closed
// once it has let go of the models.
func (m *mainWindow) stopServe() <-chan struct{} {
	srv := m.server
	if srv == nil {
		done := make(chan struct{})
		close(done)
		return done
	}
	srv.cancel()
	m.server, m.serverStopping = nil, srv
	m.showServer()
	go func() {
		<-srv.done
		m.post(func() {
			if m.serverStopping == srv {
				m.serverStopping = nil
				m.showServer()
			}
		})
	}()
	return srv.done
}

// showServer shows the server's state in its control.
func (m *mainWindow) showServer() {
	st := widgets.ServeState{Ready: m.model != nil && m.cancelLoad == nil}
	switch srv := m.server; {
	case srv != nil && srv.url != "":
		st.Running, st.URL = true, srv.url
	case srv != nil:
		st.Busy, st.Status = true, "Starting…"
	case m.serverStopping != nil:
		st.Busy, st.Status = true, "Stopping…"
	case !st.Ready:
		st.Status = "Load the models to serve them over the OpenAI API."
	case loadedParallel(m.loadedCfg) != max(1, m.set.Layout.Parallel):
		st.Status = fmt.Sprintf("The models are loaded for %d requests at once: load them again for %d.",
			loadedParallel(m.loadedCfg), max(1, m.set.Layout.Parallel))
	}
	m.serveCtl.Set(st)
}
