// Package fakeserve runs an in-process fake's HTTP server on a fixed
// loopback address and can restart it there, as a service that crashes
// and comes back does: every connection is cut (requests in flight die),
// and a new server listens on the same address with the same handler. It
// serves the fakes of provider/e2b and provider/daytona.
package fakeserve

import (
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"time"
)

// Server is a restartable httptest.Server.
type Server struct {
	// URL is the base URL, "http://127.0.0.1:port" ("https://…" for
	// StartTLS); it survives restarts.
	URL string

	tls     bool // serve HTTPS with httptest's certificate
	addr    string
	handler http.Handler
	setup   func(*http.Server)

	mu       sync.Mutex
	cur      *httptest.Server
	closed   bool
	draining sync.WaitGroup // earlier generations finishing their handlers
	restarts int
}

// Start listens on addr ("" or "127.0.0.1:0" picks a free port) and
// serves h. setup, when non-nil, configures each generation's http.Server
// before it starts (connection hooks).
func Start(addr string, h http.Handler, setup func(*http.Server)) (*Server, error) {
	return start(addr, h, setup, false)
}

// StartTLS is Start serving HTTPS (HTTP/1.1) with httptest's certificate,
// which is valid for 127.0.0.1, ::1, example.com and *.example.com (see
// Certificate).
func StartTLS(addr string, h http.Handler, setup func(*http.Server)) (*Server, error) {
	return start(addr, h, setup, true)
}

func start(addr string, h http.Handler, setup func(*http.Server), tls bool) (*Server, error) {
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	s := &Server{handler: h, setup: setup, tls: tls}
	ts, err := s.serve(addr)
	if err != nil {
		return nil, err
	}
	s.cur, s.addr, s.URL = ts, ts.Listener.Addr().String(), ts.URL
	return s, nil
}

func (s *Server) serve(addr string) (*httptest.Server, error) {
	var ln net.Listener
	var err error
	// The old listener is closed; its port may take a moment to be free
	// for a new one when the kernel is busy.
	for range 50 {
		if ln, err = net.Listen("tcp", addr); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		return nil, fmt.Errorf("fakeserve: listen on %s: %w", addr, err)
	}
	ts := httptest.NewUnstartedServer(s.handler)
	_ = ts.Listener.Close()
	ts.Listener = ln
	if s.setup != nil {
		s.setup(ts.Config)
	}
	if s.tls {
		ts.StartTLS()
	} else {
		ts.Start()
	}
	return ts, nil
}

// Certificate returns the certificate a StartTLS server serves (nil for
// plain HTTP), for a client to trust.
func (s *Server) Certificate() *x509.Certificate {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cur.Certificate()
}

// Addr returns the address the server listens on.
func (s *Server) Addr() string { return s.addr }

// Client returns an HTTP client for the current generation.
func (s *Server) Client() *http.Client {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cur.Client()
}

// CloseClientConnections closes every connection of the current
// generation.
func (s *Server) CloseClientConnections() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cur.CloseClientConnections()
}

// Restart stops the server as a crash would (its listener and every
// connection closed at once, so requests in flight die without an answer)
// and serves again on the same address. Handlers of the old generation
// may still be running; Close waits for them.
func (s *Server) Restart() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return fmt.Errorf("fakeserve: restart of a closed server")
	}
	old := s.cur
	_ = old.Listener.Close()
	old.CloseClientConnections()
	s.draining.Go(old.Close)
	ts, err := s.serve(s.addr)
	if err != nil {
		return err
	}
	s.cur = ts
	s.restarts++
	return nil
}

// Restarts returns how many times Restart succeeded.
func (s *Server) Restarts() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.restarts
}

// Close cuts every connection, stops the server and waits for the
// handlers of every generation. Calling it again does nothing.
func (s *Server) Close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	cur := s.cur
	s.mu.Unlock()
	cur.CloseClientConnections()
	cur.Close()
	s.draining.Wait()
}
