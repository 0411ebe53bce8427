package local

import (
	"context"
	"log/slog"
	"net"
	"net/netip"
	"time"

	"github.com/sandboxkit/sandbox/internal/egress"
)

// egressCAValidity is the lifetime of a sandbox's proxy CA: local
// sandboxes persist, and the CA is made once per proxy start, so it
// lasts as long as certificates clients accept may (398 days); a sandbox
// with brokered secrets older than that fails TLS to their hosts, closed.
const egressCAValidity = 397 * 24 * time.Hour

// newEgressProxy builds the proxy of one sandbox from its configuration:
// names in cfg.Hosts resolve to their addresses, others through DNS.
func newEgressProxy(cfg *egressConfig, log *slog.Logger) (egressProxy, error) {
	roots, err := rootsOf(cfg)
	if err != nil {
		return nil, err
	}
	d := net.Dialer{Timeout: 30 * time.Second}
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		if ap, err := netip.ParseAddrPort(addr); err == nil {
			if to, ok := cfg.Dial[ap]; ok {
				addr = to.String()
			}
		}
		return d.DialContext(ctx, network, addr)
	}
	return egress.New(egress.Config{
		Policy: cfg.Policy, Secrets: cfg.Secrets, Dial: dial,
		Resolver:      hostsResolver{hosts: cfg.Hosts, next: net.DefaultResolver},
		UpstreamRoots: roots, Logger: log, CAValidity: egressCAValidity,
	})
}
