package sandbox

import (
	"fmt"
	"net/http"
)

// Transport returns a RoundTripper for requests to e. It sends them
// through base (http.DefaultTransport when nil) and turns an answer of
// the provider's edge that stands for a failure into an error, where the
// provider can tell one from the server's: Code FailedPrecondition naming
// the port when nothing listens on it (a remote edge answers 502, with an
// empty body on Daytona), PermissionDenied when the edge refused the
// access token (Daytona's proxy redirects to a login page: the redirect
// is not followed, as a client would land on a page answering 200).
// Responses of the sandbox's server, and every response of a provider
// that cannot tell them apart, pass unchanged.
//
// The error comes back from http.Client.Do wrapped in a *url.Error;
// CodeOf and errors.As see through it.
func (e Endpoint) Transport(base http.RoundTripper) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	if e.check == nil {
		return base
	}
	return &endpointTransport{base: base, e: e}
}

// Client returns a copy of hc (a new client when nil) whose transport is
// e.Transport of hc's, so that Do reports the edge's failures as errors
// (see Transport).
func (e Endpoint) Client(hc *http.Client) *http.Client {
	c := &http.Client{}
	if hc != nil {
		*c = *hc
	}
	c.Transport = e.Transport(c.Transport)
	return c
}

// endpointTransport is Endpoint.Transport's RoundTripper.
type endpointTransport struct {
	base http.RoundTripper
	e    Endpoint
}

func (t *endpointTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	if cerr := t.e.check(resp); cerr != nil {
		_ = resp.Body.Close()
		return nil, &Error{Op: "endpoint", Provider: t.e.provider, SandboxID: t.e.id, Code: CodeOf(cerr),
			Err: fmt.Errorf("port %d: %w", t.e.Port, cerr)}
	}
	return resp, nil
}

// CloseIdleConnections closes base's idle connections, so that
// http.Client.CloseIdleConnections reaches them.
func (t *endpointTransport) CloseIdleConnections() {
	if c, ok := t.base.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}
