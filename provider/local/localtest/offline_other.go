//go:build !linux

package localtest

import "github.com/sandboxkit/sandbox/provider/local"

// Offline returns a local runtime made with opts. The provider runs no
// sandbox on this system (its calls answer ErrUnimplemented), so there is
// no network to keep a sandbox off.
func Offline(opts ...local.Option) (*local.Runtime, error) {
	return local.New(opts...)
}
