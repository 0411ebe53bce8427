//go:build !linux

package local

import (
	"context"
	"net/url"

	"github.com/sandboxkit/sandbox/driver"
	"github.com/sandboxkit/sandbox/sberrors"
)

func init() {
	driver.Register("local", func(ctx context.Context, u *url.URL) (driver.Runtime, error) {
		opts, err := optionsFromURL(u)
		if err != nil {
			return nil, err
		}
		if _, err := New(opts...); err != nil {
			return nil, err
		}
		return nil, errUnsupported
	})
}

var errUnsupported = sberrors.Errorf(sberrors.Unimplemented, "local: the local provider runs on Linux only for now")

// Runtime is the local provider. On this operating system it is not
// available yet: New returns an error matching sberrors.ErrUnimplemented.
type Runtime struct {
	config
}

// New returns an error matching sberrors.ErrUnimplemented: the local
// provider needs Linux.
func New(opts ...Option) (*Runtime, error) {
	c := defaultConfig()
	if err := c.apply(opts); err != nil {
		return nil, err
	}
	return nil, errUnsupported
}

// Close does nothing on this operating system, where New returns no
// Runtime; it lets code that closes a Runtime build here too.
func (r *Runtime) Close() error { return nil }

func spawnerMain() {}
func agentMain()   {}
