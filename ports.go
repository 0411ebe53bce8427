package sandbox

import (
	"bufio"
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/sandboxkit/sandbox/driver"
)

func checkPort(op, provider, id string, port int) error {
	if port < 1 || port > 65535 {
		return invalid(op, provider, id, "port", "%d is not a TCP port (1-65535)", port)
	}
	return nil
}

// Expose makes port, on which a server in the sandbox listens (or will),
// reachable from the host and returns the URL to use and the headers each
// request must carry: an endpoint is private (Endpoint.Public false) and
// refuses requests without them. The server should listen on all interfaces (0.0.0.0)
// for the cloud providers; local reaches 127.0.0.1 too. Providers without
// it (Capabilities.Ports false) return an error matching ErrUnimplemented.
// Use WaitForPort first to know the server is listening.
func (s *Sandbox) Expose(ctx context.Context, port int, opts ExposeOptions) (Endpoint, error) {
	const op = "expose"
	if err := checkPort(op, s.c.rt.Name(), s.id, port); err != nil {
		return Endpoint{}, err
	}
	if opts.TTL < 0 {
		return Endpoint{}, invalid(op, s.c.rt.Name(), s.id, "ttl", "%v is negative", opts.TTL)
	}
	if opts.MaxConns < 0 {
		return Endpoint{}, invalid(op, s.c.rt.Name(), s.id, "max-conns", "%d is negative", opts.MaxConns)
	}
	if opts.IdleTimeout < 0 {
		return Endpoint{}, invalid(op, s.c.rt.Name(), s.id, "idle-timeout", "%v is negative", opts.IdleTimeout)
	}
	p, ok := s.c.rt.(driver.PortExposer)
	if !ok {
		return Endpoint{}, s.wrap(op, "", ErrUnimplemented)
	}
	var ep driver.Endpoint
	ctx, end := bound(ctx, op, s.c.calls.Lookup)
	err := end(s.c.retry(ctx, op, true, nil, func() error {
		var err error
		ep, err = p.Expose(ctx, s.id, port, opts.toDriver())
		return err
	}))
	if err != nil {
		return Endpoint{}, s.wrap(op, "", err)
	}
	return endpointOf(ep), nil
}

// WaitForPort polls the sandbox until a process in it listens on TCP port
// (on any address, IPv4 or IPv6), or ctx ends. It reads /proc/net/tcp and
// /proc/net/tcp6 with a command, so it needs a Linux sandbox with cat;
// give ctx a deadline.
func (s *Sandbox) WaitForPort(ctx context.Context, port int) error {
	const op = "wait-for-port"
	if err := checkPort(op, s.c.rt.Name(), s.id, port); err != nil {
		return err
	}
	delay := 50 * time.Millisecond
	for {
		res, err := s.Exec(ctx, Command{Args: []string{"cat", "/proc/net/tcp", "/proc/net/tcp6"}, Timeout: 30 * time.Second})
		if err != nil {
			if ctx.Err() != nil {
				return s.wrap(op, "", fmt.Errorf("port %d not listening: %w", port, context.Cause(ctx)))
			}
			return err
		}
		if listening(string(res.Stdout), port) {
			return nil
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return s.wrap(op, "", fmt.Errorf("port %d not listening: %w", port, context.Cause(ctx)))
		case <-t.C:
		}
		delay = min(delay*2, time.Second)
	}
}

// listening reports whether a /proc/net/tcp{,6} listing has a socket in
// state LISTEN (0A) on port.
func listening(table string, port int) bool {
	sc := bufio.NewScanner(strings.NewReader(table))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 4 || f[3] != "0A" {
			continue
		}
		i := strings.LastIndexByte(f[1], ':')
		if i < 0 {
			continue
		}
		p, err := strconv.ParseUint(f[1][i+1:], 16, 16)
		if err == nil && int(p) == port {
			return true
		}
	}
	return false
}
