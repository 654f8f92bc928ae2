package serve

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Options configure a Server; the zero value of each field picks the default
// it names.
type Options struct {
	// Model is the id /v1/models lists and every response names; requests
	// may name any model (there is one). "" = "tandem".
	Model string
	// APIKey, when set, is required of every /v1 request as
	// "Authorization: Bearer APIKey".
	APIKey string
	// MaxQueue is how many requests may wait for the runner while it runs
	// Parallel; more are answered 429. 0 = 128.
	MaxQueue int
	// Parallel is how many requests run on the generator at once, in
	// arrival order: the sequences the runner decodes together
	// (engine.Config.Parallel). 0 = 1.
	Parallel int
	// MaxClientRequests is how many requests one client address (an IPv4
	// address, an IPv6 /64) may have in flight: its body being read,
	// waiting or running. More are answered 429 before their body is read.
	// Every local client shares the loopback address. 0 = half of
	// MaxQueue (64).
	MaxClientRequests int
	// MaxBodyBytes bounds a request body; larger ones are answered 413.
	// 0 = 8 MiB.
	MaxBodyBytes int64
	// HeaderTimeout is how long a request's headers may take to arrive,
	// and BodyTimeout its body; a body still incomplete then is answered
	// 408. 0 = 10 s and 60 s.
	HeaderTimeout, BodyTimeout time.Duration
	// Hosts are the names, besides IP addresses and localhost, that a
	// request's Host may give when there is no APIKey: the host the server
	// was asked to listen on. Other names are refused (DNS rebinding).
	Hosts []string
	// AllowOrigins are the web origins ("http://localhost:3000") whose
	// pages may call the API from a browser: they get CORS headers and
	// their preflights answered. Requests from other pages are refused;
	// "*" allows any.
	AllowOrigins []string
	// ShutdownGrace is how long Serve lets running requests finish after its
	// ctx ends before it cancels them. 0 = 10 s.
	ShutdownGrace time.Duration
	// Now is the clock for "created"; nil = time.Now.
	Now func() time.Time
	// Rand seeds requests that name no seed and makes response ids; it must
	// be safe for concurrent use. nil = math/rand/v2.
	Rand func() uint64
	// Log gets one line per request; nil = no log.
	Log *slog.Logger
	// ReleaseMemory runs when the last request in flight has ended (see
	// idleRelease); nil = two collections and debug.FreeOSMemory.
	ReleaseMemory func()
}

// Server answers the OpenAI API with one Generator. It is an http.Handler;
// Serve adds the listener's lifecycle.
type Server struct {
	gen      Generator
	opt      Options
	keyHash  [sha256.Size]byte
	queue    fifo
	clients  clients
	inflight sync.WaitGroup
	idle     idleRelease
	metrics  *metrics
}

// New returns a Server for gen.
func New(gen Generator, opt Options) *Server {
	if opt.Model == "" {
		opt.Model = "tandem"
	}
	if opt.MaxQueue <= 0 {
		opt.MaxQueue = 128
	}
	if opt.Parallel <= 0 {
		opt.Parallel = 1
	}
	if opt.MaxClientRequests <= 0 {
		opt.MaxClientRequests = max(opt.MaxQueue/2, 1)
	}
	if opt.MaxBodyBytes <= 0 {
		opt.MaxBodyBytes = 8 << 20
	}
	if opt.HeaderTimeout <= 0 {
		opt.HeaderTimeout = 10 * time.Second
	}
	if opt.BodyTimeout <= 0 {
		opt.BodyTimeout = time.Minute
	}
	if opt.ShutdownGrace <= 0 {
		opt.ShutdownGrace = 10 * time.Second
	}
	if opt.Now == nil {
		opt.Now = time.Now
	}
	if opt.Rand == nil {
		opt.Rand = rand.Uint64
	}
	if opt.Log == nil {
		opt.Log = slog.New(slog.DiscardHandler)
	}
	if opt.ReleaseMemory == nil {
		opt.ReleaseMemory = freeOSMemory
	}
	s := &Server{gen: gen, opt: opt, keyHash: sha256.Sum256([]byte(opt.APIKey)), queue: fifo{max: opt.MaxQueue, slots: opt.Parallel},
		// Parallel running and MaxQueue waiting: the queue's own bound,
		// checked before bodies are read.
		clients: clients{perClient: opt.MaxClientRequests, total: opt.MaxQueue + opt.Parallel}}
	s.idle.release = opt.ReleaseMemory
	s.metrics = newMetrics(s)
	return s
}

// route is one path of the API.
type route struct {
	method string
	public bool // answered without the API key
	handle http.HandlerFunc
}

func (s *Server) route(path string) (route, bool) {
	switch path {
	case "/health":
		return route{http.MethodGet, true, s.health}, true
	case "/metrics":
		return route{http.MethodGet, false, s.metrics.handler().ServeHTTP}, true
	case "/v1/models":
		return route{http.MethodGet, false, s.models}, true
	case "/v1/chat/completions":
		return route{http.MethodPost, false, s.chatCompletions}, true
	case "/v1/completions":
		return route{http.MethodPost, false, s.completions}, true
	}
	if id, ok := strings.CutPrefix(path, "/v1/models/"); ok && id != "" {
		return route{http.MethodGet, false, func(w http.ResponseWriter, r *http.Request) { s.model(w, id) }}, true
	}
	return route{}, false
}

// ServeHTTP checks who is asking (Host, Origin, the API key, how many
// requests the address has in flight), then routes the request. Every
// refusal is in OpenAI's error shape (http.ServeMux answers 404 and 405 in
// plain text) and is sent without reading the body.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.inflight.Add(1)
	defer s.inflight.Done()
	defer s.idle.enter()()
	if !s.hostAllowed(r.Host) {
		refuse(w, r, &APIError{Status: http.StatusForbidden, Type: typeInvalidRequest, Code: "host_not_allowed",
			Message: fmt.Sprintf("this server does not answer to the name %q; use its IP address or localhost", r.Host)})
		return
	}
	acao, ok := s.originAllowed(r)
	if !ok {
		refuse(w, r, &APIError{Status: http.StatusForbidden, Type: typeInvalidRequest, Code: "origin_not_allowed",
			Message: fmt.Sprintf("this server does not answer web pages of other sites (origin %q); its operator can allow one with --allow-origin", r.Header.Get("Origin"))})
		return
	}
	if acao != "" {
		w.Header().Set("Access-Control-Allow-Origin", acao)
		w.Header().Add("Vary", "Origin")
		if r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != "" {
			preflight(w, r)
			return
		}
	}
	rt, ok := s.route(r.URL.Path)
	switch {
	case !ok:
		refuse(w, r, &APIError{Status: http.StatusNotFound, Type: typeNotFound, Message: fmt.Sprintf("no route %s %s", r.Method, r.URL.Path)})
		return
	case r.Method != rt.method:
		w.Header().Set("Allow", rt.method)
		refuse(w, r, &APIError{Status: http.StatusMethodNotAllowed, Type: typeInvalidRequest,
			Message: fmt.Sprintf("%s takes %s, not %s", r.URL.Path, rt.method, r.Method)})
		return
	case !rt.public && !s.authorized(r):
		refuse(w, r, &APIError{Status: http.StatusUnauthorized, Type: typeAuthentication, Code: "invalid_api_key",
			Message: "a valid API key is required: send the header \"Authorization: Bearer KEY\""})
		return
	}
	if rt.method == http.MethodPost {
		leave, e := s.clients.enter(r.RemoteAddr)
		if e != nil {
			refuse(w, r, e)
			return
		}
		defer leave()
	}
	rt.handle(w, r)
}

// authorized checks the bearer token in constant time; hashing first makes
// the comparison's length independent of the key's.
func (s *Server) authorized(r *http.Request) bool {
	if s.opt.APIKey == "" {
		return true
	}
	auth := r.Header.Get("Authorization")
	scheme, token, ok := strings.Cut(auth, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return false
	}
	got := sha256.Sum256([]byte(strings.TrimSpace(token)))
	return subtle.ConstantTimeCompare(got[:], s.keyHash[:]) == 1
}

func (s *Server) health(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"status": "ok", "waiting": s.queue.waiting()})
}

func (s *Server) card() modelCard {
	return modelCard{ID: s.opt.Model, Object: "model", Created: s.opt.Now().Unix(), OwnedBy: "tandem"}
}

func (s *Server) models(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, modelList{Object: "list", Data: []modelCard{s.card()}})
}

func (s *Server) model(w http.ResponseWriter, id string) {
	if id != s.opt.Model {
		writeError(w, &APIError{Status: http.StatusNotFound, Type: typeNotFound, Param: "model", Code: "model_not_found",
			Message: fmt.Sprintf("model %q is not served here; %q is", id, s.opt.Model)})
		return
	}
	writeJSON(w, http.StatusOK, s.card())
}

// Serve answers requests on ln until ctx ends, then shuts down gracefully:
// it stops accepting, lets running requests finish for Options.ShutdownGrace,
// cancels those still running, and returns once every handler has returned.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	// Requests get a context of their own, so that ending ctx lets them
	// finish instead of cutting them off.
	base, cancelRequests := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelRequests()
	hs := &http.Server{
		Handler:           s,
		BaseContext:       func(net.Listener) context.Context { return base },
		ReadHeaderTimeout: s.opt.HeaderTimeout,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ConnState: func(_ net.Conn, st http.ConnState) {
			if st == http.StateClosed || st == http.StateHijacked {
				s.idle.poke()
			}
		},
		// No ReadTimeout or WriteTimeout: net/http would cancel a long
		// stream's context when they expire. The body has a deadline of
		// its own (decodeBody).
	}
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	select {
	case err := <-served:
		s.inflight.Wait()
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	grace, cancel := context.WithTimeout(context.Background(), s.opt.ShutdownGrace)
	defer cancel()
	err := hs.Shutdown(grace)
	cancelRequests()
	if err != nil {
		hs.Close()
	}
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve: %w", err)
	}
	s.inflight.Wait()
	return nil
}
