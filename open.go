package sandbox

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"slices"
	"strings"

	"github.com/sandboxkit/sandbox/driver"
)

// Schemes returns the schemes registered with driver.Register, sorted:
// those Open accepts.
func Schemes() []string { return driver.Schemes() }

// DefaultScheme is the provider Open uses for an empty URL when SANDBOX_URL
// is not set either.
const DefaultScheme = "local"

// Open returns a Client for the provider named by rawURL's scheme, for
// example "local://", "local:///var/lib/sandboxes", "memory://",
// "e2b://" or "daytona://". An empty rawURL means the SANDBOX_URL
// environment variable, and when that is empty too, the local provider.
// The provider's package must be imported (it registers its scheme), e.g.
//
//	import _ "github.com/sandboxkit/sandbox/provider/local"
//
// Query parameters are provider options documented by each provider.
// The Client's options reach the provider too: the logger given with
// WithLogger receives the provider's own events (the local provider's
// warnings about degraded isolation or commands run as root, the leases
// it ends), as the provider's own WithLogger would. The call bounds
// (WithCallTimeouts, WithCommandTimeout, WithCleanupTimeout) are applied
// by the Client to every call it makes on the provider.
func Open(ctx context.Context, rawURL string, opts ...Option) (*Client, error) {
	const op = "open"
	o := newOptions(opts)
	if err := o.bad.Err("sandbox"); err != nil {
		return nil, &Error{Op: op, Code: InvalidArgument, Err: err}
	}
	if rawURL == "" {
		rawURL = os.Getenv("SANDBOX_URL")
	}
	if rawURL == "" {
		rawURL = DefaultScheme + "://"
	}
	if hasControl(rawURL) {
		return nil, invalid(op, "", "", "URL", "%q holds control characters", printable(rawURL))
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		// *url.Error repeats the whole URL, credentials included: keep
		// only its cause.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, invalid(op, "", "", "URL", "%q: %v", printable(redactURL(rawURL)), err)
	}
	if u.Scheme == "" {
		return nil, invalid(op, "", "", "URL", "%q has no scheme (want e.g. local:// or e2b://)", printable(redactURL(rawURL)))
	}
	opener, ok := driver.Lookup(u.Scheme)
	if !ok {
		hint := ""
		if slices.Contains([]string{"local", "memory", "e2b", "daytona", "docker"}, u.Scheme) {
			hint = fmt.Sprintf(`; import _ "github.com/sandboxkit/sandbox/provider/%s"`, u.Scheme)
		}
		return nil, invalid(op, "", "", "URL scheme", "%q is not registered (registered: %s)%s",
			printable(u.Scheme), strings.Join(Schemes(), ", "), hint)
	}
	rt, err := opener(ctx, u, driver.OpenOptions{Logger: o.log})
	if err != nil {
		return nil, &Error{Op: op, Provider: u.Scheme, Code: CodeOf(err), Err: err}
	}
	return newClient(rt, o), nil
}

// redactURL drops user info and query values, which may hold credentials.
func redactURL(raw string) string {
	if i := strings.IndexAny(raw, "?#"); i >= 0 {
		raw = raw[:i] + "?…"
	}
	if i := strings.Index(raw, "@"); i >= 0 {
		if j := strings.Index(raw, "://"); j >= 0 && j < i {
			raw = raw[:j+3] + "…@" + raw[i+1:]
		}
	}
	return raw
}
