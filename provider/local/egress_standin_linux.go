package local

// TEMPORARY: a minimal CONNECT handler behind the egress proxy's shape,
// to develop the plumbing until internal/egress lands. Replaced by the
// bridge to internal/egress.

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"sync"

	"github.com/sandboxkit/sandbox/driver"
)

type standin struct {
	mu  sync.Mutex
	pol *driver.NetworkPolicy
	res hostsResolver
}

func newEgressProxy(cfg *egressConfig, log *slog.Logger) (egressProxy, error) {
	return &standin{pol: cfg.Policy, res: hostsResolver{hosts: cfg.Hosts, next: net.DefaultResolver}}, nil
}

func (s *standin) ServeConn(ctx context.Context, c net.Conn) {
	defer c.Close()
	br := bufio.NewReader(c)
	req, err := http.ReadRequest(br)
	if err != nil || req.Method != http.MethodConnect {
		io.WriteString(c, "HTTP/1.1 405 only CONNECT\r\n\r\n")
		return
	}
	host, port, _ := net.SplitHostPort(req.Host)
	s.mu.Lock()
	ok := s.pol.Mode == driver.NetworkAllowAll || slices.Contains(s.pol.AllowDomains, host)
	s.mu.Unlock()
	if !ok {
		io.WriteString(c, "HTTP/1.1 403 Forbidden\r\n\r\negress: "+host+" is not allowed\n")
		return
	}
	addrs, err := s.res.LookupNetIP(ctx, "ip", host)
	if err != nil || len(addrs) == 0 {
		io.WriteString(c, "HTTP/1.1 502 Bad Gateway\r\n\r\n")
		return
	}
	up, err := net.Dial("tcp", net.JoinHostPort(addrs[0].String(), port))
	if err != nil {
		io.WriteString(c, "HTTP/1.1 502 Bad Gateway\r\n\r\n")
		return
	}
	defer up.Close()
	io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n")
	go func() { io.Copy(up, br); up.(*net.TCPConn).CloseWrite() }()
	io.Copy(c, up)
}

func (s *standin) SetPolicy(p *driver.NetworkPolicy) error {
	s.mu.Lock()
	s.pol = p
	s.mu.Unlock()
	return nil
}
func (s *standin) CACertPEM() []byte {
	return []byte("-----BEGIN CERTIFICATE-----\nstandin\n-----END CERTIFICATE-----\n")
}
func (s *standin) Close() error { return nil }
