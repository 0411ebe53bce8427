package docker_test

import (
	"testing"

	"github.com/sandboxkit/sandbox/internal/opts/optstest"
	"github.com/sandboxkit/sandbox/provider/docker"
)

// TestBadOptionNamesIt: New refuses invalid option values with an
// InvalidArgument error naming each bad option, without contacting an
// engine.
func TestBadOptionNamesIt(t *testing.T) {
	t.Parallel()
	_, err := docker.New(docker.WithHost("unix:///nonexistent/docker.sock"), docker.WithUser("a user"), docker.WithHome("relative/home"))
	optstest.Check(t, "WithUser", err)
	optstest.Check(t, "WithHome", err)
}
