package docker_test

import (
	"context"
	"errors"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"
	"github.com/stretchr/testify/require"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/driver"
	"github.com/sandboxkit/sandbox/provider/docker"
	"github.com/sandboxkit/sandbox/sberrors"
)

func dcreate(ctx context.Context, t *testing.T, r *docker.Runtime, req *driver.CreateRequest) driver.Info {
	t.Helper()
	if req.Timeout == 0 {
		req.Timeout = 10 * time.Minute
	}
	in, err := r.Create(ctx, req)
	if in.ID != "" {
		t.Cleanup(func() { _ = r.Destroy(context.Background(), in.ID) })
	}
	require.NoError(t, err)
	return in
}

func dread(ctx context.Context, t *testing.T, r *docker.Runtime, id, p string) string {
	t.Helper()
	rc, err := r.Download(ctx, id, p)
	require.NoError(t, err)
	defer rc.Close()
	b, err := io.ReadAll(rc)
	require.NoError(t, err)
	return string(b)
}

// TestSnapshotImagesAreOwned: a snapshot is an image tagged with the
// owner MAC; a foreign image (or one of this provider's images under
// another key) is NotFound for every snapshot call and for Create, and is
// never removed.
func TestSnapshotImagesAreOwned(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	_, image := engine(t)
	raw := rawClient(t)
	dir := t.TempDir()
	r1 := newRuntime(t, docker.WithKeyFile(filepath.Join(dir, "k1")))
	r2 := newRuntime(t, docker.WithKeyFile(filepath.Join(dir, "k2")))
	t.Cleanup(func() { _ = r1.Close(); _ = r2.Close() })
	src := dcreate(ctx, t, r1, &driver.CreateRequest{Labels: map[string]string{"who": "src"}})
	require.NoError(t, r1.Upload(ctx, src.ID, src.Home+"/f.txt", strings.NewReader("one")))
	snap, err := r1.Snapshot(ctx, src.ID, &driver.SnapshotRequest{Name: "n", Mode: driver.SnapshotFilesystem, Labels: map[string]string{"l": "v"}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = r1.DeleteSnapshot(context.Background(), snap.ID) })
	require.True(t, strings.HasPrefix(snap.ID, "sha256:"), snap.ID)

	got, err := r1.GetSnapshot(ctx, snap.ID)
	require.NoError(t, err)
	require.Equal(t, "n", got.Name)
	require.Equal(t, map[string]string{"l": "v"}, got.Labels)
	require.Equal(t, src.ID, got.SourceID)

	// Another key: not its snapshot.
	_, err = r2.GetSnapshot(ctx, snap.ID)
	require.True(t, errors.Is(err, sberrors.ErrNotFound), "other key's GetSnapshot: %v", err)
	in, err := r2.Create(ctx, &driver.CreateRequest{FromSnapshot: snap.ID, Timeout: time.Minute})
	if in.ID != "" {
		_ = r2.Destroy(ctx, in.ID)
	}
	require.True(t, errors.Is(err, sberrors.ErrNotFound), "other key's Create: %v", err)
	require.True(t, errors.Is(r2.DeleteSnapshot(ctx, snap.ID), sberrors.ErrNotFound))
	page, _, err := r2.ListSnapshots(ctx, &driver.ListSnapshotsRequest{PageSize: 100})
	require.NoError(t, err)
	for _, s := range page {
		require.NotEqual(t, snap.ID, s.ID, "another key lists this provider's snapshot")
	}

	// A foreign image, even one carrying copied snapshot labels, is never
	// a snapshot and is never removed.
	ins, err := raw.ImageInspect(ctx, image)
	require.NoError(t, err)
	_, err = r1.GetSnapshot(ctx, ins.ID)
	require.True(t, errors.Is(err, sberrors.ErrNotFound), "foreign image: %v", err)
	require.True(t, errors.Is(r1.DeleteSnapshot(ctx, ins.ID), sberrors.ErrNotFound))
	_, err = raw.ImageInspect(ctx, ins.ID)
	require.NoError(t, err, "DeleteSnapshot removed a foreign image")
	// A tag of our repository moved onto the foreign image proves nothing.
	tag := "sandboxkit-snapshot:forged"
	_, err = raw.ImageTag(ctx, client.ImageTagOptions{Source: ins.ID, Target: tag})
	require.NoError(t, err)
	t.Cleanup(func() { _, _ = raw.ImageRemove(context.Background(), tag, client.ImageRemoveOptions{}) })
	_, err = r1.GetSnapshot(ctx, ins.ID)
	require.True(t, errors.Is(err, sberrors.ErrNotFound), "forged tag: %v", err)
	_, err = r1.GetSnapshot(ctx, tag)
	require.True(t, errors.Is(err, sberrors.ErrNotFound), "by tag: %v", err)
}

// TestSnapshotChildLabelsAndLease: a sandbox created from a snapshot has
// its own labels (not the committed container's), its own auto-pause, and
// the snapshot survives the source's Destroy and a new Runtime.
func TestSnapshotChildLabelsAndRestart(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	key := filepath.Join(t.TempDir(), "key")
	r := newRuntime(t, docker.WithKeyFile(key))
	t.Cleanup(func() { _ = r.Close() }) // last: the clean-ups below use r again
	src := dcreate(ctx, t, r, &driver.CreateRequest{Labels: map[string]string{"parent-only": t.Name()}, AutoPause: true})
	require.NoError(t, r.Upload(ctx, src.ID, src.Home+"/f.txt", strings.NewReader("kept")))
	snap, err := r.Snapshot(ctx, src.ID, &driver.SnapshotRequest{Mode: driver.SnapshotFilesystem})
	require.NoError(t, err)
	t.Cleanup(func() { _ = r.DeleteSnapshot(context.Background(), snap.ID) })
	require.NoError(t, r.Destroy(ctx, src.ID))
	require.NoError(t, r.Close())

	r2 := newRuntime(t, docker.WithKeyFile(key))
	t.Cleanup(func() { _ = r2.Close() })
	_, err = r2.GetSnapshot(ctx, snap.ID)
	require.NoError(t, err, "the snapshot did not survive its sandbox and the Runtime")
	child := dcreate(ctx, t, r2, &driver.CreateRequest{FromSnapshot: snap.ID, Labels: map[string]string{"child": "1"}})
	require.Equal(t, "kept", dread(ctx, t, r2, child.ID, child.Home+"/f.txt"))
	got, err := r2.Get(ctx, child.ID)
	require.NoError(t, err)
	require.Equal(t, map[string]string{"child": "1"}, got.Labels, "the child shows the committed container's labels")
	require.Equal(t, "0", got.Detail["autopause"], "the child inherited the source's auto-pause")
	page, _, err := r2.List(ctx, &driver.ListRequest{Labels: map[string]string{"parent-only": t.Name()}, PageSize: 10})
	require.NoError(t, err)
	require.Empty(t, page, "List by the parent's label finds the child")
	require.Equal(t, snap.ID, got.Template)
}

// TestSnapshotDeleteWhileInUse: deleting a snapshot a sandbox was created
// from untags it (the engine keeps the layers the sandbox uses); the
// snapshot is then gone for the provider and the sandbox unaffected.
func TestSnapshotDeleteWhileInUse(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	raw := rawClient(t)
	r := newRuntime(t)
	t.Cleanup(func() { _ = r.Close() })
	src := dcreate(ctx, t, r, &driver.CreateRequest{})
	require.NoError(t, r.Upload(ctx, src.ID, src.Home+"/g.txt", strings.NewReader("g")))
	require.NoError(t, r.Pause(ctx, src.ID))
	snap, err := r.Snapshot(ctx, src.ID, &driver.SnapshotRequest{Mode: driver.SnapshotFilesystem})
	require.NoError(t, err)
	t.Cleanup(func() { _, _ = raw.ImageRemove(context.Background(), snap.ID, client.ImageRemoveOptions{Force: true}) })
	in, err := r.Get(ctx, src.ID)
	require.NoError(t, err)
	require.Equal(t, driver.StatePaused, in.State, "a paused sandbox did not stay paused")
	child := dcreate(ctx, t, r, &driver.CreateRequest{FromSnapshot: snap.ID})
	require.NoError(t, r.DeleteSnapshot(ctx, snap.ID))
	_, err = r.GetSnapshot(ctx, snap.ID)
	require.True(t, errors.Is(err, sberrors.ErrNotFound), "after delete: %v", err)
	_, err = r.Create(ctx, &driver.CreateRequest{FromSnapshot: snap.ID, Timeout: time.Minute})
	require.True(t, errors.Is(err, sberrors.ErrNotFound), "create after delete: %v", err)
	require.Equal(t, "g", dread(ctx, t, r, child.ID, child.Home+"/g.txt"))
	require.NoError(t, r.DeleteSnapshot(ctx, snap.ID), "deleting twice")
	_, err = r.Snapshot(ctx, src.ID, &driver.SnapshotRequest{Mode: driver.SnapshotFull})
	require.True(t, errors.Is(err, sberrors.ErrFailedPrecondition), "full mode: %v", err)
}

// TestSnapshotFullSaysWhatIsMissing: full mode is FailedPrecondition
// naming the mode and what this engine lacks, asked of the engine (its
// experimental mode, which the checkpoint API needs); after a Ping the
// capabilities say the same, and the portable layer refuses it with it.
func TestSnapshotFullSaysWhatIsMissing(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	engine(t)
	raw := rawClient(t)
	ping, err := raw.Ping(ctx, client.PingOptions{NegotiateAPIVersion: true})
	require.NoError(t, err)
	want := "serves only in experimental mode (dockerd --experimental"
	if ping.Experimental {
		want = "runs in experimental mode with its checkpoint API, but this provider does not restore"
	}
	r := newRuntime(t)
	t.Cleanup(func() { _ = r.Close() })
	require.NotContains(t, r.Capabilities().SnapshotModes, driver.SnapshotFull)
	in := dcreate(ctx, t, r, &driver.CreateRequest{})
	// A Runtime that has not pinged asks the engine.
	_, err = r.Snapshot(ctx, in.ID, &driver.SnapshotRequest{Mode: driver.SnapshotFull})
	require.Error(t, err)
	require.True(t, errors.Is(err, sberrors.ErrFailedPrecondition), "%v", err)
	require.Contains(t, err.Error(), `snapshot mode "full"`)
	require.Contains(t, err.Error(), want)
	require.Contains(t, r.Capabilities().SnapshotNote, want)
	c := sandbox.NewClient(r)
	sb, err := c.Attach(ctx, in.ID)
	require.NoError(t, err)
	_, err = sb.Snapshot(ctx, sandbox.SnapshotOptions{Mode: sandbox.SnapshotFull})
	require.Equal(t, sandbox.FailedPrecondition, sandbox.CodeOf(err), "%v", err)
	require.Contains(t, err.Error(), want)
}
