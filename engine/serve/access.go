package serve

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"sync"
)

// Who may talk to the server, checked before anything else of a request:
//
//   - Host. A web page can make a browser send requests to 127.0.0.1 by
//     pointing its own DNS name there (DNS rebinding); the browser then
//     treats the answers as the page's own. Such a request names the page's
//     host, so a server without an API key answers only Host values no
//     rebinding can produce: IP addresses, localhost (RFC 6761 keeps it
//     loopback) and the names it was told it listens on. With a key the
//     name does not matter: a rebinding page does not have the key.
//   - Origin. Browsers send it with every cross-origin request (and
//     Sec-Fetch-Site with most); a page of another origin gets an answer
//     only when the user allowed that origin, which also gets CORS headers
//     and its preflight answered. Programs that are not browsers send
//     neither header and are not affected.

// hostAllowed reports whether the Host header names this server.
func (s *Server) hostAllowed(host string) bool {
	if s.opt.APIKey != "" || host == "" { // HTTP/1.0 may leave Host out
		return true
	}
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.ToLower(strings.Trim(host, "[]")), ".")
	if _, err := netip.ParseAddr(host); err == nil {
		return true
	}
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	return slices.ContainsFunc(s.opt.Hosts, func(h string) bool {
		return strings.TrimSuffix(strings.ToLower(h), ".") == host
	})
}

// originAllowed reports whether a browser may send r, and the
// Access-Control-Allow-Origin to answer it with ("" for none).
func (s *Server) originAllowed(r *http.Request) (acao string, ok bool) {
	origin := r.Header.Get("Origin")
	if origin == "" {
		// Without Origin a browser still says where a request comes
		// from in Sec-Fetch-Site ("none": typed by the user).
		site := r.Header.Get("Sec-Fetch-Site")
		return "", site != "cross-site" && site != "same-site"
	}
	for _, o := range s.opt.AllowOrigins {
		if o == "*" {
			return "*", true
		}
		if strings.EqualFold(strings.TrimSuffix(o, "/"), origin) {
			return origin, true
		}
	}
	// Same origin: a page this server itself served (it serves none, but
	// a client may say so).
	if rest, ok := strings.CutPrefix(origin, "http://"); ok && r.Host != "" && strings.EqualFold(rest, r.Host) {
		return "", true
	}
	return "", false
}

// preflight answers a CORS preflight of an allowed origin: any header the
// page asks for may be sent (the origin is trusted; OpenAI's JavaScript
// client sends several of its own).
func preflight(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Access-Control-Allow-Methods", "GET, POST")
	if ask := r.Header.Get("Access-Control-Request-Headers"); ask != "" {
		h.Set("Access-Control-Allow-Headers", ask)
	}
	h.Set("Access-Control-Max-Age", "600")
	w.WriteHeader(http.StatusNoContent)
}

// clients counts the requests in flight (their body being read, waiting
// for the runner, or running) per client address and in all, so that no
// one address takes every place in the queue and the bodies held at once
// stay bounded. Requests are counted once they have passed the key check:
// a client without the key holds nothing.
type clients struct {
	perClient int // in flight from one address
	total     int // in flight from all

	mu  sync.Mutex
	n   map[netip.Prefix]int
	all int
}

// enter admits a request from remoteAddr, or says why not; leave must be
// called once the request ends.
func (c *clients) enter(remoteAddr string) (leave func(), e *APIError) {
	key := clientKey(remoteAddr)
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.all >= c.total:
		return nil, &APIError{Status: http.StatusTooManyRequests, Type: typeRateLimit, Code: "queue_full",
			Message: fmt.Sprintf("%d requests are already in flight; retry later", c.all)}
	case c.n[key] >= c.perClient:
		return nil, &APIError{Status: http.StatusTooManyRequests, Type: typeRateLimit, Code: "client_limit",
			Message: fmt.Sprintf("%d requests from your address are already in flight; retry when one ends", c.n[key])}
	}
	if c.n == nil {
		c.n = map[netip.Prefix]int{}
	}
	c.n[key]++
	c.all++
	return func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.all--
		if c.n[key]--; c.n[key] == 0 {
			delete(c.n, key)
		}
	}, nil
}

// clientKey is the address a request is counted against: an IPv4 address,
// or an IPv6 /64 (a host usually has a whole /64 to pick addresses from).
// Anything that is not IP:port counts as one client.
func clientKey(remoteAddr string) netip.Prefix {
	ap, err := netip.ParseAddrPort(remoteAddr)
	if err != nil {
		return netip.Prefix{}
	}
	ip := ap.Addr().Unmap().WithZone("")
	bits := 32
	if ip.Is6() {
		bits = 64
	}
	p, _ := ip.Prefix(bits)
	return p
}
