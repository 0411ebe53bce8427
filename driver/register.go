package driver

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"regexp"
	"slices"
	"sync"
)

// Opener opens a provider from a URL whose scheme it was registered for,
// configured by o as well as by the URL.
type Opener func(ctx context.Context, u *url.URL, o OpenOptions) (Runtime, error)

// OpenOptions are the settings sandbox.Open hands to an Opener from the
// options it was given, so that a provider opened by URL reports and
// behaves as one its own constructor made with the same settings would.
type OpenOptions struct {
	// Logger receives the provider's own events (degraded isolation, a
	// lease it enforced, a failed clean-up): the logger given to
	// sandbox.Open with sandbox.WithLogger. It is never nil (a logger that
	// discards when none was given).
	Logger *slog.Logger
}

var (
	registryMu sync.RWMutex
	registry   = map[string]Opener{}
	schemeRE   = regexp.MustCompile(`^[a-z][a-z0-9+.-]*$`)
)

// Register makes a provider available to sandbox.Open under scheme.
// Providers call it from their package's init function. It panics if
// scheme is malformed, o is nil or the scheme is already registered, like
// database/sql.Register.
func Register(scheme string, o Opener) {
	registryMu.Lock()
	defer registryMu.Unlock()
	if !schemeRE.MatchString(scheme) || o == nil {
		panic(fmt.Sprintf("driver: Register(%q): bad scheme or nil opener", scheme))
	}
	if _, dup := registry[scheme]; dup {
		panic(fmt.Sprintf("driver: Register(%q) called twice", scheme))
	}
	registry[scheme] = o
}

// Lookup returns the Opener registered for scheme.
func Lookup(scheme string) (Opener, bool) {
	registryMu.RLock()
	defer registryMu.RUnlock()
	o, ok := registry[scheme]
	return o, ok
}

// Schemes returns the registered schemes, sorted.
func Schemes() []string {
	registryMu.RLock()
	defer registryMu.RUnlock()
	out := make([]string, 0, len(registry))
	for s := range registry {
		out = append(out, s)
	}
	slices.Sort(out)
	return out
}
