package docker_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/driver"
	"github.com/sandboxkit/sandbox/provider/docker"
)

// foreign starts a container through the engine's API, outside the
// provider, as a hostile user of the same engine would: root, the engine's
// default capabilities plus SYS_PTRACE, carrying labels. It is removed
// with the test.
func foreign(ctx context.Context, t *testing.T, raw *client.Client, image, name string, labels map[string]string, hc *container.HostConfig) string {
	t.Helper()
	if hc == nil {
		hc = &container.HostConfig{}
	}
	hc.NetworkMode = "none"
	hc.CapAdd = append(hc.CapAdd, "SYS_PTRACE")
	res, err := raw.ContainerCreate(ctx, client.ContainerCreateOptions{
		Config: &container.Config{
			Image: image, User: "0:0", Labels: labels,
			Entrypoint: []string{"/bin/sh", "-c"}, Cmd: []string{"while :; do sleep 3600; done"},
		},
		HostConfig: hc, Name: name,
	})
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		raw.ContainerRemove(ctx, res.ID, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
	})
	_, err = raw.ContainerStart(ctx, res.ID, client.ContainerStartOptions{})
	require.NoError(t, err)
	return res.ID
}

// archive reads the directory dir of a container as an archive, as `docker
// cp` would.
func archive(ctx context.Context, t *testing.T, raw *client.Client, from, dir string) []byte {
	t.Helper()
	res, err := raw.CopyFromContainer(ctx, from, client.CopyFromContainerOptions{SourcePath: dir})
	require.NoError(t, err)
	defer res.Content.Close()
	var buf bytes.Buffer
	_, err = io.Copy(&buf, res.Content)
	require.NoError(t, err)
	return buf.Bytes()
}

// untouched checks through the engine that a foreign container is still
// there, running (not paused, not stopped), and that no command of the
// provider wrote its marker.
func untouched(ctx context.Context, t *testing.T, raw *client.Client, what, id string) {
	t.Helper()
	ins, err := raw.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
	if !assert.NoError(t, err, "%s: the foreign container was removed", what) {
		return
	}
	assert.Equal(t, container.StateRunning, ins.Container.State.Status, "%s: the foreign container's state changed", what)
	_, err = raw.ContainerStatPath(ctx, id, client.ContainerStatPathOptions{Path: "/tmp/pwned"})
	assert.Error(t, err, "%s: a command of the provider ran in the foreign container", what)
}

// execTouch is a command that leaves the marker untouched looks for.
func execTouch() *driver.Command {
	return &driver.Command{Dir: "/tmp", Args: []string{"touch", "/tmp/pwned"}, Stdout: io.Discard, Stderr: io.Discard}
}

// notFound checks that err is a NotFound error.
func notFound(t *testing.T, err error, format string, args ...any) {
	t.Helper()
	assert.Equal(t, sandbox.NotFound, sandbox.CodeOf(err), append([]any{format + ": error %v"}, append(args, err)...)...)
}

// A container the provider did not create is never listed, adopted,
// exec'd into, paused or removed, whatever labels it carries: labels copied
// from a real sandbox (with its state directory copied in too), copied
// labels whose lease has passed (which List would end, or pause with
// AutoPause), or only the managed label; the first also takes the real
// sandbox's name once it is free. Every call naming its id is
// NotFound, for the Runtime that made the copied sandbox and for another.
func TestForeignContainersAreNotAdopted(t *testing.T) {
	t.Parallel()
	_, image := engine(t)
	raw := rawClient(t)
	rt1 := newRuntime(t)
	c1 := sandbox.NewClient(rt1)
	t.Cleanup(func() { c1.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	app := "foreign-" + strings.ReplaceAll(t.Name(), "/", "-")
	labels := map[string]string{"app": app, "dockertest": t.Name()}

	// A real sandbox, whose labels, name and state directory the attacker
	// copies; it is then destroyed, so GetOrCreate has nothing of its own
	// to find by these labels.
	genuine := create(ctx, t, c1, sandbox.CreateOptions{Labels: maps.Clone(labels), Timeout: time.Hour})
	ins, err := raw.ContainerInspect(ctx, genuine.ID(), client.ContainerInspectOptions{})
	require.NoError(t, err)
	copied, name := ins.Container.Config.Labels, strings.TrimPrefix(ins.Container.Name, "/")
	require.NotEmpty(t, copied)
	state := archive(ctx, t, raw, genuine.ID(), "/.sandboxkit")
	require.NoError(t, genuine.Destroy(ctx))

	fCopied := foreign(ctx, t, raw, image, name, copied, nil)
	_, err = raw.CopyToContainer(ctx, fCopied, client.CopyToContainerOptions{DestinationPath: "/", Content: bytes.NewReader(state)})
	require.NoError(t, err)
	expired := maps.Clone(copied)
	expired["dev.sandboxkit.lease-end"] = "1"
	fExpired := foreign(ctx, t, raw, image, "", expired, nil)
	autopause := maps.Clone(expired)
	autopause["dev.sandboxkit.autopause"] = "1"
	fAutoPause := foreign(ctx, t, raw, image, "", autopause, nil)
	fManaged := foreign(ctx, t, raw, image, "", map[string]string{"dev.sandboxkit.managed": "1"}, nil)
	foreigners := map[string]string{"copied labels and name": fCopied, "copied labels, lease passed": fExpired,
		"copied labels, lease passed, autopause": fAutoPause, "managed label only": fManaged}

	rt2 := newRuntime(t) // another process of the same user
	c2 := sandbox.NewClient(rt2)
	t.Cleanup(func() { c2.Close() })
	for name, rt := range map[string]*docker.Runtime{"creator": rt1, "other": rt2} {
		c := map[string]*sandbox.Client{"creator": c1, "other": c2}[name]
		// List, with and without labels: none of them is listed.
		for _, want := range []map[string]string{nil, {"app": app}} {
			for info, err := range c.List(ctx, sandbox.ListOptions{Labels: want}) {
				require.NoError(t, err)
				for what, id := range foreigners {
					assert.NotEqual(t, id, info.ID, "%s: List(%v) listed the foreign container with %s", name, want, what)
				}
			}
		}
		// List ended or paused none of them either.
		for what, id := range foreigners {
			untouched(ctx, t, raw, what, id)
		}
		// GetOrCreate by the copied labels makes a sandbox of its own.
		sb, created, err := c.GetOrCreate(ctx, sandbox.CreateOptions{Labels: maps.Clone(labels)})
		require.NoError(t, err)
		adopted := false
		for what, fid := range foreigners {
			if fid == sb.ID() {
				adopted = true
				t.Errorf("%s: GetOrCreate adopted the foreign container with %s", name, what)
			}
		}
		assert.True(t, created, "%s: GetOrCreate found a sandbox where none of its own was", name)
		r, err := sb.Exec(ctx, sandbox.Command{Shell: "id -u; grep CapEff /proc/self/status"})
		require.NoError(t, err)
		assert.Equal(t, "1000\nCapEff:\t0000000000000000\n", string(r.Stdout), "%s: the sandbox GetOrCreate returned runs commands as", name)
		if !adopted {
			require.NoError(t, sb.Destroy(ctx))
		}
		for what, id := range foreigners {
			_, err := c.Attach(ctx, id)
			notFound(t, err, "%s: Attach of the foreign container with %s", name, what)
			_, err = rt.Get(ctx, id)
			notFound(t, err, "%s: Runtime.Get of the foreign container with %s", name, what)
		}
		// Every call naming a foreign id is NotFound and does nothing.
		id := fCopied
		var out bytes.Buffer
		_, err = rt.Exec(ctx, id, &driver.Command{Dir: "/tmp", Args: []string{"touch", "/tmp/pwned"}, Stdout: &out, Stderr: &out})
		notFound(t, err, "%s: Exec (output %q)", name, out.String())
		h, err := rt.Start(ctx, id, execTouch())
		if h != nil {
			h.Close()
		}
		notFound(t, err, "%s: Start", name)
		notFound(t, rt.Upload(ctx, id, "/tmp/pwned", strings.NewReader("x")), "%s: Upload", name)
		notFound(t, rt.MkdirAll(ctx, id, "/tmp/pwned"), "%s: MkdirAll", name)
		_, err = rt.Stat(ctx, id, "/etc/passwd")
		notFound(t, err, "%s: Stat", name)
		rc, err := rt.Download(ctx, id, "/etc/passwd")
		if rc != nil {
			rc.Close()
		}
		notFound(t, err, "%s: Download", name)
		_, err = rt.ReadDir(ctx, id, "/")
		notFound(t, err, "%s: ReadDir", name)
		notFound(t, rt.SetTimeout(ctx, id, time.Second), "%s: SetTimeout", name)
		notFound(t, rt.Pause(ctx, id), "%s: Pause", name)
		_, err = rt.Resume(ctx, id)
		notFound(t, err, "%s: Resume", name)
		_, err = rt.Attach(ctx, id, 1, io.Discard, io.Discard)
		notFound(t, err, "%s: Attach", name)
		for what, id := range foreigners {
			if err := rt.Destroy(ctx, id); err != nil {
				notFound(t, err, "%s: Destroy of the foreign container with %s", name, what)
			}
		}
	}
	for what, id := range foreigners {
		untouched(ctx, t, raw, what, id)
	}
}

// A container that mounts a real read-only-root sandbox's volumes (its
// state directory included) and copies its labels is still foreign.
func TestForeignContainerWithBorrowedVolumes(t *testing.T) {
	t.Parallel()
	_, image := engine(t)
	raw := rawClient(t)
	c := newClient(t, docker.WithReadOnlyRoot(true))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	genuine := create(ctx, t, c, sandbox.CreateOptions{Timeout: time.Hour})
	ins, err := raw.ContainerInspect(ctx, genuine.ID(), client.ContainerInspectOptions{})
	require.NoError(t, err)
	f := foreign(ctx, t, raw, image, "", ins.Container.Config.Labels, &container.HostConfig{VolumesFrom: []string{genuine.ID()}})

	for info, err := range c.List(ctx, sandbox.ListOptions{Labels: map[string]string{"dockertest": t.Name()}}) {
		require.NoError(t, err)
		assert.NotEqual(t, f, info.ID, "List listed the foreign container")
	}
	_, err = c.Attach(ctx, f)
	notFound(t, err, "Attach")
	_, err = c.Runtime().Exec(ctx, f, execTouch())
	notFound(t, err, "Exec")
	if err := c.Runtime().Destroy(ctx, f); err != nil && !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("Destroy: %v", err)
	}
	untouched(ctx, t, raw, "borrowed volumes", f)
	// The real one is still its own.
	_, err = c.Attach(ctx, genuine.ID())
	assert.NoError(t, err)
}
