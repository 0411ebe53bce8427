//go:build linux

package localtest

import (
	"slices"

	"github.com/sandboxkit/sandbox/provider/local"
)

// Offline returns a local runtime made with opts whose sandboxes are kept
// off the network (local.NetworkNone) where the runtime's isolation level
// allows it: a sandbox off the network starts no network helper, which
// spares CPU in every test that makes one. NetworkNone needs L2; below it
// (a host without user namespaces or Landlock, or opts asking for L1) a
// create would be refused, so the runtime is made without it, and its
// sandboxes share the host's network as every sandbox at L1 does.
func Offline(opts ...local.Option) (*local.Runtime, error) {
	rt, err := local.New(append(slices.Clone(opts), local.WithNetwork(local.NetworkNone))...)
	if err != nil {
		return nil, err
	}
	if l, _ := rt.Level(); l >= local.L2 {
		return rt, nil
	}
	if err := rt.Close(); err != nil {
		return nil, err
	}
	return local.New(opts...)
}
