//go:build !linux

package docker_test

import (
	"testing"

	"github.com/sandboxkit/sandbox/provider/docker"
	"github.com/sandboxkit/sandbox/sandboxtest"
)

// conformanceEgress: the egress proxy runs on Linux only.
func conformanceEgress(*testing.T) ([]docker.Option, sandboxtest.EgressHooks) {
	return nil, sandboxtest.EgressHooks{}
}
