package docker_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/provider/docker"
)

// failingReader yields some bytes, then an error: an upload cut short.
type failingReader struct{ r io.Reader }

func (f *failingReader) Read(p []byte) (int, error) {
	n, err := f.r.Read(p)
	if err == io.EOF {
		return n, errors.New("source broke")
	}
	return n, err
}

// With a read-only root file system, writing /etc is PermissionDenied
// (through the file API and from a command) while home and /tmp work, an
// upload cut short leaves the old file whole, the lease can still move,
// and Destroy removes the writable volumes.
func TestReadOnlyRoot(t *testing.T) {
	t.Parallel()
	raw := rawClient(t)
	c := newClient(t, docker.WithReadOnlyRoot(true))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	sb := create(ctx, t, c, sandbox.CreateOptions{Env: map[string]string{"K": "v"}})

	ins, err := raw.ContainerInspect(ctx, sb.ID(), client.ContainerInspectOptions{})
	require.NoError(t, err)
	require.NotNil(t, ins.Container.HostConfig)
	assert.True(t, ins.Container.HostConfig.ReadonlyRootfs, "ReadonlyRootfs")

	err = sb.WriteFile(ctx, "/etc/x", []byte("x"))
	assert.Equal(t, sandbox.PermissionDenied, sandbox.CodeOf(err), "WriteFile /etc/x: %v", err)
	err = sb.MkdirAll(ctx, "/usr/newdir")
	assert.Equal(t, sandbox.PermissionDenied, sandbox.CodeOf(err), "MkdirAll /usr/newdir: %v", err)
	r, err := sb.Exec(ctx, sandbox.Command{Shell: `echo x >/etc/y`})
	require.NoError(t, err)
	assert.NotZero(t, r.ExitCode)
	assert.Contains(t, strings.ToLower(string(r.Stderr)), "read-only")

	require.NoError(t, sb.WriteFile(ctx, "a.txt", []byte("home")))
	require.NoError(t, sb.WriteFile(ctx, "/tmp/b.txt", []byte("tmp")))
	r, err = sb.Exec(ctx, sandbox.Command{Shell: `cat a.txt /tmp/b.txt && mkdir -p sub/d && echo $K >sub/d/k && cat sub/d/k && pwd`})
	require.NoError(t, err)
	assert.Equal(t, 0, r.ExitCode, "stderr %q", r.Stderr)
	assert.Equal(t, "hometmpv\n"+sb.Home()+"\n", string(r.Stdout))
	st, err := sb.Stat(ctx, "/tmp/b.txt")
	require.NoError(t, err)
	assert.EqualValues(t, 3, st.Size)

	// Uploads stay atomic: one that fails midway leaves the old file.
	old := bytes.Repeat([]byte("o"), 1<<20)
	require.NoError(t, sb.WriteFile(ctx, "atomic.bin", old))
	err = sb.Upload(ctx, "atomic.bin", &failingReader{r: bytes.NewReader(bytes.Repeat([]byte("n"), 4<<20))})
	require.Error(t, err)
	got, err := sb.ReadFile(ctx, "atomic.bin")
	require.NoError(t, err)
	assert.True(t, bytes.Equal(old, got), "the failed upload changed the file (%d bytes)", len(got))

	require.NoError(t, sb.SetTimeout(ctx, 40*time.Minute))
	info, err := sb.Refresh(ctx)
	require.NoError(t, err)
	assert.WithinDuration(t, time.Now().Add(40*time.Minute), info.LeaseEnd, time.Minute)

	var vols []string
	for _, m := range ins.Container.Mounts {
		if m.Type == "volume" {
			vols = append(vols, m.Name)
		}
	}
	assert.Len(t, vols, 3, "volumes: state, /tmp and home's parent")
	require.NoError(t, sb.Destroy(ctx))
	for _, v := range vols {
		_, err := raw.VolumeInspect(ctx, v, client.VolumeInspectOptions{})
		assert.True(t, cerrdefs.IsNotFound(err), "volume %s after Destroy: %v", v, err)
	}
}

// readonly=1 in the URL is the option; a bad value is InvalidArgument.
func TestOpenReadOnlyParameter(t *testing.T) {
	t.Parallel()
	_, err := sandbox.Open(context.Background(), "docker://?readonly=maybe")
	require.Error(t, err)
	assert.Equal(t, sandbox.InvalidArgument, sandbox.CodeOf(err))
	assert.Contains(t, err.Error(), "readonly")
}

// With a read-only root and a numeric user the image does not know, the
// home directory Create makes (in the volume of its parent) is the user's.
func TestReadOnlyRootNewHome(t *testing.T) {
	t.Parallel()
	c := newClient(t, docker.WithReadOnlyRoot(true), docker.WithUser("2000:2000"))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sb := create(ctx, t, c, sandbox.CreateOptions{})
	assert.Equal(t, docker.DefaultHome, sb.Home())
	r, err := sb.Exec(ctx, sandbox.Command{Shell: `id -u && touch f && stat -c '%u %a' . && touch /tmp/t`})
	require.NoError(t, err)
	assert.Equal(t, 0, r.ExitCode, "stderr %q", r.Stderr)
	assert.Equal(t, "2000\n2000 755\n", string(r.Stdout))
}
