//go:build !linux

package local

import (
	"context"
	"io"
	"net/url"
	"time"

	"github.com/sandboxkit/sandbox/driver"
	"github.com/sandboxkit/sandbox/sberrors"
)

func init() {
	driver.Register("local", func(ctx context.Context, u *url.URL, o driver.OpenOptions) (driver.Runtime, error) {
		opts, err := optionsFromURL(u)
		if err != nil {
			return nil, err
		}
		if _, err := New(append([]Option{WithLogger(o.Logger)}, opts...)...); err != nil {
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

// The methods of driver.Runtime fail with ErrUnimplemented on this
// operating system, where New returns no Runtime; they let code written
// for Linux (tests among it) build here too.

// Name returns "local".
func (r *Runtime) Name() string { return "local" }

// Capabilities returns the zero Capabilities.
func (r *Runtime) Capabilities() driver.Capabilities { return driver.Capabilities{} }

// Create fails with ErrUnimplemented.
func (r *Runtime) Create(context.Context, *driver.CreateRequest) (driver.Info, error) {
	return driver.Info{}, errUnsupported
}

// Get fails with ErrUnimplemented.
func (r *Runtime) Get(context.Context, string) (driver.Info, error) {
	return driver.Info{}, errUnsupported
}

// List fails with ErrUnimplemented.
func (r *Runtime) List(context.Context, *driver.ListRequest) ([]driver.Info, string, error) {
	return nil, "", errUnsupported
}

// Destroy fails with ErrUnimplemented.
func (r *Runtime) Destroy(context.Context, string) error { return errUnsupported }

// SetTimeout fails with ErrUnimplemented.
func (r *Runtime) SetTimeout(context.Context, string, time.Duration) error { return errUnsupported }

// Exec fails with ErrUnimplemented.
func (r *Runtime) Exec(context.Context, string, *driver.Command) (driver.ExitStatus, error) {
	return driver.ExitStatus{}, errUnsupported
}

// Upload fails with ErrUnimplemented.
func (r *Runtime) Upload(context.Context, string, string, io.Reader) error { return errUnsupported }

// Download fails with ErrUnimplemented.
func (r *Runtime) Download(context.Context, string, string) (io.ReadCloser, error) {
	return nil, errUnsupported
}

// Stat fails with ErrUnimplemented.
func (r *Runtime) Stat(context.Context, string, string) (driver.FileInfo, error) {
	return driver.FileInfo{}, errUnsupported
}

// ReadDir fails with ErrUnimplemented.
func (r *Runtime) ReadDir(context.Context, string, string) ([]driver.FileInfo, error) {
	return nil, errUnsupported
}

// MkdirAll fails with ErrUnimplemented.
func (r *Runtime) MkdirAll(context.Context, string, string) error { return errUnsupported }

// Remove fails with ErrUnimplemented.
func (r *Runtime) Remove(context.Context, string, string) error { return errUnsupported }

// Rename fails with ErrUnimplemented.
func (r *Runtime) Rename(context.Context, string, string, string) error { return errUnsupported }

// Close does nothing.
func (r *Runtime) Close() error { return nil }

var _ driver.Runtime = (*Runtime)(nil)

func spawnerMain() {}
func agentMain()   {}
func egressMain()  {}

// SetNetwork fails with ErrUnimplemented.
func (r *Runtime) SetNetwork(context.Context, string, *driver.NetworkPolicy) error {
	return errUnsupported
}
