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

func spawnerMain() {}
func agentMain()   {}
