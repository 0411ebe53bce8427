package docker_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/driver"
	"github.com/sandboxkit/sandbox/provider/docker"
)

// Runtimes that share the owner key share the sandboxes; a Runtime with
// another key (another user) sees none of them, and cannot run a command
// in, pause or remove one.
func TestOwnershipFollowsKey(t *testing.T) {
	t.Parallel()
	raw := rawClient(t)
	a := newClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sb := create(ctx, t, a, sandbox.CreateOptions{Timeout: time.Hour})

	same := newClient(t)
	got, err := same.Attach(ctx, sb.ID())
	require.NoError(t, err)
	res, err := got.Exec(ctx, sandbox.Command{Shell: "echo same-key"})
	require.NoError(t, err)
	assert.Equal(t, "same-key\n", string(res.Stdout))

	other := newClient(t, docker.WithKeyFile(filepath.Join(t.TempDir(), "key")))
	for info, err := range other.List(ctx, sandbox.ListOptions{}) {
		require.NoError(t, err)
		assert.NotEqual(t, sb.ID(), info.ID, "a Runtime with another key listed the sandbox")
	}
	_, err = other.Attach(ctx, sb.ID())
	notFound(t, err, "Attach with another key")
	_, err = other.Runtime().Exec(ctx, sb.ID(), execTouch())
	notFound(t, err, "Exec with another key")
	notFound(t, other.Runtime().(driver.Pauser).Pause(ctx, sb.ID()), "Pause with another key")
	if err := other.Runtime().Destroy(ctx, sb.ID()); err != nil {
		notFound(t, err, "Destroy with another key")
	}
	untouched(ctx, t, raw, "the first key's sandbox", sb.ID())
	info, err := sb.Refresh(ctx)
	require.NoError(t, err)
	assert.Equal(t, sandbox.StateRunning, info.State)
	// A fresh Runtime proves a paused sandbox its own too (the archive
	// endpoint reads a frozen container) and resumes it.
	require.NoError(t, sb.Pause(ctx))
	fresh := newClient(t)
	got, err = fresh.AttachWith(ctx, sb.ID(), sandbox.AttachOptions{Own: true}) // resuming takes the owner
	require.NoError(t, err)
	assert.Equal(t, sandbox.StatePaused, got.Info().State)
	require.NoError(t, got.Resume(ctx))
	res, err = got.Exec(ctx, sandbox.Command{Shell: "echo resumed"})
	require.NoError(t, err)
	assert.Equal(t, "resumed\n", string(res.Stdout))
}

// A new process of the same user adopts the sandboxes of an earlier one:
// the key is on disk, not in the process.
func TestOwnershipAcrossProcesses(t *testing.T) {
	t.Parallel()
	host, image := engine(t)
	a := newClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sb := create(ctx, t, a, sandbox.CreateOptions{Timeout: time.Hour})

	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestOwnershipChildProcess$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), childEnv+"="+sb.ID(), "SANDBOX_TEST_DOCKER="+host, "SANDBOX_TEST_DOCKER_IMAGE="+image)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "the child process:\n%s", out)
	assert.Contains(t, string(out), "child-exec-ok uid=1000", "the child process:\n%s", out)
}

// childEnv names the sandbox TestOwnershipChildProcess adopts.
const childEnv = "SANDBOXKIT_DOCKER_TEST_CHILD_ID"

// TestOwnershipChildProcess is the other process of
// TestOwnershipAcrossProcesses; it skips when run on its own.
func TestOwnershipChildProcess(t *testing.T) {
	id := os.Getenv(childEnv)
	if id == "" {
		t.Skip("run by TestOwnershipAcrossProcesses")
	}
	c := newClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	found := false
	for info, err := range c.List(ctx, sandbox.ListOptions{}) {
		require.NoError(t, err)
		found = found || info.ID == id
	}
	require.True(t, found, "List in a new process left out the sandbox")
	sb, err := c.Attach(ctx, id)
	require.NoError(t, err)
	res, err := sb.Exec(ctx, sandbox.Command{Shell: "echo child-exec-ok uid=$(id -u)"})
	require.NoError(t, err)
	t.Log(strings.TrimSpace(string(res.Stdout)))
}
