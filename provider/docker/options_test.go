package docker_test

import (
	"testing"

	"github.com/sandboxkit/sandbox/provider/docker"
	"github.com/sandboxkit/sandbox/sberrors"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestBadOptionNamesIt: New refuses an invalid option value with an
// InvalidArgument error naming the option, without contacting an engine.
func TestBadOptionNamesIt(t *testing.T) {
	for name, opt := range map[string]docker.Option{
		"WithUser": docker.WithUser("a user"),
		"WithHome": docker.WithHome("relative/home"),
	} {
		rt, err := docker.New(docker.WithHost("unix:///nonexistent/docker.sock"), opt)
		require.Error(t, err, name)
		assert.Nil(t, rt)
		assert.Equal(t, sberrors.InvalidArgument, sberrors.CodeOf(err), "%s: %v", name, err)
		assert.ErrorContains(t, err, name)
	}
}
