package e2b_test

import (
	"testing"

	"github.com/sandboxkit/sandbox/provider/local/localtest"
)

// The loopback upstream the local backend's egress proxy reaches under
// test names (package localtest).
const (
	egressSecretHost = localtest.SecretHost
	egressOtherHost  = localtest.OtherHost
)

func newEgressUpstream(t *testing.T) *localtest.EgressUpstream { return localtest.NewEgressUpstream(t) }
