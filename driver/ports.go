package driver

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/sandboxkit/sandbox/sberrors"
)

// PortExposer is implemented by providers that can make a TCP port a
// sandbox listens on reachable from the host (Sandbox.Expose). The portable
// layer has validated port (1-65535) and opts.
type PortExposer interface {
	// Expose returns the endpoint through which the host reaches port in
	// sandbox id. It does not check that anything listens on port: a
	// request to an idle port fails at request time (connection refused
	// locally, an error status from a cloud edge). A sandbox that does not
	// exist is NotFound. The endpoint stops working once the sandbox is
	// destroyed. It is private: a request without its Header (the access
	// token) is refused, unless the provider's service serves it to
	// anyone, which Public then reports. A relay on this host honours
	// opts.MaxConns and opts.IdleTimeout and reports the limits in force.
	Expose(ctx context.Context, id string, port int, opts ExposeOptions) (Endpoint, error)
}

// ExposeOptions tunes Sandbox.Expose.
type ExposeOptions struct {
	// TTL asks for an endpoint that stays valid at least this long, where
	// the provider's endpoints expire (Daytona's signed preview URLs); 0
	// takes the provider's default. Providers whose endpoints live as long
	// as the sandbox ignore it.
	TTL time.Duration
	// MaxConns caps the connections the endpoint relays at once, where
	// the relay runs on this host (local); a connection admitted beyond it
	// (past the credential check) is closed at once. Connections that have
	// not yet sent their credentials do not count: local holds them apart,
	// in a small bounded set. 0 takes the provider's default (local: 256). Providers
	// whose edge is a remote service apply its limits and report none
	// (Endpoint.MaxConns 0).
	MaxConns int
	// IdleTimeout closes a connection through which no byte moved either
	// way for this long, where the relay runs on this host (local). 0
	// takes the provider's default (local: 5 minutes). Providers whose
	// edge is a remote service apply its limits and report none
	// (Endpoint.IdleTimeout 0).
	IdleTimeout time.Duration
}

// Endpoint is how the host reaches a port of a sandbox.
//
// Header may carry an access token: treat it as a secret. String (and so
// %v) prints the URL and header names only.
//
// An endpoint is private unless Public is set: a request without Header
// (the access token in it) is refused, so that knowing or guessing the
// URL, or being another user of the host, is not enough to reach the
// port.
type Endpoint struct {
	// Port is the port inside the sandbox.
	Port int
	// URL is the base URL (scheme and host, no trailing slash), such as
	// "http://127.0.0.1:41234" (local) or "https://8000-<id>.e2b.app".
	URL string
	// Header holds the headers every request must carry (an access
	// token); nil when none is needed.
	Header http.Header
	// Expires is when the endpoint stops working; zero means it lives as
	// long as the sandbox.
	Expires time.Time
	// Public reports that the endpoint serves requests without Header's
	// access token: anyone who can reach URL reaches the port (an E2B
	// sandbox created with public traffic, a public Daytona sandbox).
	Public bool
	// Socket, when set, is the path of a unix socket that reaches the
	// port too, carrying any protocol's bytes as they are (no header
	// needed): it and its directory are accessible to this process's user
	// only (modes 0600 and 0700). Local endpoints offer it for protocols
	// other than HTTP/1.x.
	Socket string
	// MaxConns is the most connections the endpoint holds at once, and
	// IdleTimeout how long one may stay idle before it is closed, where
	// the provider enforces them on this host (local); 0 when a remote
	// edge applies its own limits.
	MaxConns    int
	IdleTimeout time.Duration
	// Check, when set, tells an answer of the provider's edge that stands
	// for a failure from an answer of the sandbox's server: it returns
	// the error resp stands for (FailedPrecondition naming the port when
	// nothing listens on it, PermissionDenied when the edge refused the
	// access token), or nil for the server's own response. It may read a
	// bounded prefix of resp.Body, and must then leave resp.Body reading
	// the whole body when it returns nil. The portable layer's
	// Endpoint.Transport calls it on every response.
	Check func(resp *http.Response) error `json:"-"`
}

// String describes e without header values, which may be secrets.
func (e Endpoint) String() string {
	names := make([]string, 0, len(e.Header))
	for k := range e.Header {
		names = append(names, k)
	}
	s := fmt.Sprintf("port %d at %s", e.Port, e.URL)
	if len(names) > 0 {
		s += " (headers: " + strings.Join(names, ", ") + ")"
	}
	return s
}

// GoString is String, so %#v does not print header values either.
func (e Endpoint) GoString() string { return e.String() }

// NewRequest returns a request for path (such as "/index.html") on the
// endpoint, carrying e.Header.
func (e Endpoint) NewRequest(ctx context.Context, method, path string, body io.Reader) (*http.Request, error) {
	if path != "" && !strings.HasPrefix(path, "/") {
		return nil, fmt.Errorf("sandbox: endpoint path %q: %w", path, sberrors.Errorf(sberrors.InvalidArgument, "must start with /"))
	}
	req, err := http.NewRequestWithContext(ctx, method, e.URL+path, body)
	if err != nil {
		return nil, fmt.Errorf("sandbox: endpoint request: %w", err)
	}
	for k, vs := range e.Header {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	return req, nil
}
