package local

import (
	"log/slog"
	"net"
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
	return egress.New(egress.Config{
		Policy: cfg.Policy, Secrets: cfg.Secrets,
		Resolver:      hostsResolver{hosts: cfg.Hosts, next: net.DefaultResolver},
		UpstreamRoots: roots, Logger: log, CAValidity: egressCAValidity,
	})
}
