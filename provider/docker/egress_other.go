//go:build !linux

package docker

import (
	"context"
	"errors"
	"os"
)

// egressMain is never reached off Linux: no Runtime starts a helper there.
func egressMain() { os.Exit(2) }

func startEgress(context.Context, string, int, *egressConfig) (string, error) {
	return "", errors.New("the egress proxy needs Linux")
}

func stopEgress(string) {}

func proxyProbe(string, string) error {
	return errors.New("the proxy enters the container's network namespace, which needs Linux")
}
