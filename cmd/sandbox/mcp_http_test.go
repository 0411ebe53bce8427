package main

import (
	"net/http"
)

// testToken is the bearer token the HTTP tests' servers accept.
const testToken = "test-token-0123456789abcdef"

// bearerTransport adds "Authorization: Bearer <token>" to every request.
type bearerTransport struct {
	token string
	base  http.RoundTripper
}

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.base.RoundTrip(r)
}

// bearerClient returns an HTTP client that sends token, on a transport of
// its own (closed with the test's idle connections).
func bearerClient(token string) *http.Client {
	return &http.Client{Transport: bearerTransport{token: token, base: http.DefaultTransport.(*http.Transport).Clone()}}
}
