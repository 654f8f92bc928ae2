package serve

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
)

// ErrNeedsKey refuses to serve, without an API key, on an address that
// other machines can reach.
var ErrNeedsKey = errors.New("serve: an address other machines can reach needs an API key")

// Listen opens addr (host:port) for Serve, after CheckAddr.
func Listen(addr, apiKey string) (net.Listener, error) {
	if err := CheckAddr(addr, apiKey); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("serve: %w", err)
	}
	return ln, nil
}

// CheckAddr accepts a loopback address (127.0.0.0/8, ::1, localhost), and
// any other only with an API key. An empty host means every interface.
func CheckAddr(addr, apiKey string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("serve: address %q: %w", addr, err)
	}
	if apiKey != "" || host == "localhost" {
		return nil
	}
	if ip, err := netip.ParseAddr(host); err == nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("%w: %q (bind 127.0.0.1, or set an API key)", ErrNeedsKey, addr)
}
