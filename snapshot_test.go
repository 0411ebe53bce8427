package sandbox_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/driver"
	"github.com/sandboxkit/sandbox/provider/memory"
	"github.com/sandboxkit/sandbox/sberrors"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// snapCount counts the snapshots of rt.
func snapCount(t *testing.T, rt *memory.Runtime) int {
	t.Helper()
	page, _, err := rt.ListSnapshots(context.Background(), &driver.ListSnapshotsRequest{PageSize: 1000})
	require.NoError(t, err)
	return len(page)
}

func TestSnapshotCapabilities(t *testing.T) {
	t.Parallel()
	caps := sandbox.NewClient(memory.New()).Capabilities()
	assert.True(t, caps.Snapshots)
	assert.True(t, caps.Fork)
	assert.False(t, caps.NativeFork)
	assert.Equal(t, []sandbox.SnapshotMode{sandbox.SnapshotFilesystem}, caps.SnapshotModes)
	caps.SnapshotModes[0] = "changed"
	assert.Equal(t, sandbox.SnapshotFilesystem, sandbox.NewClient(memory.New()).Capabilities().SnapshotModes[0])

	bare := sandbox.NewClient(bareRuntime{memory.New()}).Capabilities()
	assert.False(t, bare.Snapshots, "Snapshots without a driver.Snapshotter")
	assert.False(t, bare.Fork)
	assert.Empty(t, bare.SnapshotModes, "SnapshotModes without a driver.Snapshotter")
}

func TestSnapshotUnimplemented(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := sandbox.NewClient(bareRuntime{memory.New()})
	defer c.Close()
	sb, err := c.Create(ctx, sandbox.CreateOptions{})
	require.NoError(t, err)
	_, err = sb.Snapshot(ctx, sandbox.SnapshotOptions{})
	assert.ErrorIs(t, err, sandbox.ErrUnimplemented)
	_, err = sb.Fork(ctx, 2, sandbox.ForkOptions{})
	assert.ErrorIs(t, err, sandbox.ErrUnimplemented)
	_, err = c.Create(ctx, sandbox.CreateOptions{FromSnapshot: "snap-x"})
	assert.ErrorIs(t, err, sandbox.ErrUnimplemented)
	_, err = c.GetSnapshot(ctx, "snap-x")
	assert.ErrorIs(t, err, sandbox.ErrUnimplemented)
	assert.ErrorIs(t, c.DeleteSnapshot(ctx, "snap-x"), sandbox.ErrUnimplemented)
	for _, err := range c.ListSnapshots(ctx, sandbox.ListSnapshotsOptions{}) {
		assert.ErrorIs(t, err, sandbox.ErrUnimplemented)
	}
}

// A mode the provider lacks is refused before any request, naming the
// mode and what the provider has.
func TestSnapshotModeNotOffered(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rt := memory.New()
	c := sandbox.NewClient(rt)
	defer c.Close()
	sb, err := c.Create(ctx, sandbox.CreateOptions{})
	require.NoError(t, err)
	_, err = sb.Snapshot(ctx, sandbox.SnapshotOptions{Mode: sandbox.SnapshotFull})
	assert.Equal(t, sandbox.FailedPrecondition, sandbox.CodeOf(err))
	assert.Contains(t, err.Error(), `"full"`)
	assert.Contains(t, err.Error(), "filesystem")
	assert.Empty(t, rt.CallsOf(memory.OpSnapshot), "refused before any request")
	var se *sandbox.Error
	require.ErrorAs(t, err, &se)
	assert.Equal(t, "snapshot", se.Op)
	assert.Equal(t, sb.ID(), se.SandboxID)
}

// Snapshot reads the sandbox: a handle that does not own it may take one.
func TestSnapshotByAttachedHandle(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := sandbox.NewClient(memory.New())
	defer c.Close()
	sb, err := c.Create(ctx, sandbox.CreateOptions{})
	require.NoError(t, err)
	require.NoError(t, sb.WriteFile(ctx, "f", []byte("1")))
	att, err := c.Attach(ctx, sb.ID())
	require.NoError(t, err)
	snap, err := att.Snapshot(ctx, sandbox.SnapshotOptions{Name: "n"})
	require.NoError(t, err)
	assert.Equal(t, sb.ID(), snap.SourceID)
	assert.Equal(t, "memory", snap.Provider)
	assert.Equal(t, int64(1), snap.Size)
	kids, err := att.Fork(ctx, 1, sandbox.ForkOptions{})
	require.NoError(t, err)
	require.Len(t, kids, 1)
	assert.True(t, kids[0].Owned())
}

// A create that fails is reported, and the others are returned, owned;
// the fork's snapshot is deleted all the same.
func TestForkPartialFailure(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rt := memory.New()
	c := sandbox.NewClient(rt)
	defer c.Close()
	sb, err := c.Create(ctx, sandbox.CreateOptions{})
	require.NoError(t, err)
	rt.FailNext(memory.OpCreate, 1, sberrors.Errorf(sberrors.PermissionDenied, "quota"))
	kids, err := sb.Fork(ctx, 4, sandbox.ForkOptions{})
	require.Error(t, err)
	assert.Equal(t, sandbox.PermissionDenied, sandbox.CodeOf(err))
	assert.Contains(t, err.Error(), "quota")
	assert.Len(t, kids, 3)
	for _, k := range kids {
		assert.True(t, k.Owned())
	}
	assert.Equal(t, 4, rt.Live())
	assert.Equal(t, 0, snapCount(t, rt), "the fork's snapshot is deleted")

	kids, err = sb.Fork(ctx, 2, sandbox.ForkOptions{KeepSnapshot: true, Labels: map[string]string{"k": "v"}})
	require.NoError(t, err)
	assert.Len(t, kids, 2)
	assert.Equal(t, 1, snapCount(t, rt), "KeepSnapshot keeps it")
	for sn, err := range c.ListSnapshots(ctx, sandbox.ListSnapshotsOptions{Labels: map[string]string{"k": "v"}}) {
		require.NoError(t, err)
		assert.Equal(t, sb.ID(), sn.SourceID)
	}
}

// blockingCreates lets creates from a snapshot through until n have
// succeeded, then holds the next until its ctx ends.
type blockingCreates struct {
	*memory.Runtime
	n       int32
	count   atomic.Int32
	blocked chan struct{}
	once    sync.Once
}

func (b *blockingCreates) Create(ctx context.Context, req *driver.CreateRequest) (driver.Info, error) {
	if req.FromSnapshot != "" && b.count.Add(1) > b.n {
		b.once.Do(func() { close(b.blocked) })
		<-ctx.Done()
		return driver.Info{}, ctx.Err()
	}
	return b.Runtime.Create(ctx, req)
}

// A cancelled Fork returns nothing and leaves nothing: the sandboxes it
// made are destroyed and its snapshot deleted (Close waits for that).
func TestForkCancelledLeavesNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rt := &blockingCreates{Runtime: memory.New(), n: 2, blocked: make(chan struct{})}
	c := sandbox.NewClient(rt)
	sb, err := c.Create(ctx, sandbox.CreateOptions{})
	require.NoError(t, err)
	fctx, cancel := context.WithCancel(ctx)
	go func() {
		<-rt.blocked
		cancel()
	}()
	kids, err := sb.Fork(fctx, 4, sandbox.ForkOptions{})
	assert.Nil(t, kids)
	assert.Equal(t, sandbox.Canceled, sandbox.CodeOf(err), "%v", err)
	require.NoError(t, c.Close())
	assert.Equal(t, 1, rt.Live(), "only the source is left")
	assert.Equal(t, 0, snapCount(t, rt.Runtime), "no snapshot is left")
}

// orphanSnapshots makes the snapshot, then fails.
type orphanSnapshots struct{ *memory.Runtime }

func (o orphanSnapshots) Snapshot(ctx context.Context, id string, req *driver.SnapshotRequest) (driver.SnapshotInfo, error) {
	in, err := o.Runtime.Snapshot(ctx, id, req)
	if err != nil {
		return in, err
	}
	return in, sberrors.Errorf(sberrors.Internal, "lost after making it")
}

func TestSnapshotFailedAfterMakingIsDeleted(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rt := orphanSnapshots{memory.New()}
	c := sandbox.NewClient(rt)
	sb, err := c.Create(ctx, sandbox.CreateOptions{})
	require.NoError(t, err)
	_, err = sb.Snapshot(ctx, sandbox.SnapshotOptions{})
	assert.Equal(t, sandbox.Internal, sandbox.CodeOf(err))
	require.NoError(t, c.Close())
	assert.Equal(t, 0, snapCount(t, rt.Runtime))
}

// nativeFork forks by creating n plain sandboxes, failing the last.
type nativeFork struct {
	*memory.Runtime
	fail bool
	reqs []*driver.CreateRequest
}

func (f *nativeFork) Fork(ctx context.Context, id string, n int, req *driver.CreateRequest) ([]driver.Info, error) {
	f.reqs = append(f.reqs, req)
	var out []driver.Info
	for i := range n {
		if f.fail && i == n-1 {
			return out, errors.Join(sberrors.Errorf(sberrors.ResourceExhausted, "child %d: no capacity", i))
		}
		in, err := f.Runtime.Create(ctx, req)
		if err != nil {
			return out, err
		}
		out = append(out, in)
	}
	return out, nil
}

func TestForkNative(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rt := &nativeFork{Runtime: memory.New(), fail: true}
	c := sandbox.NewClient(rt)
	defer c.Close()
	assert.True(t, c.Capabilities().NativeFork)
	sb, err := c.Create(ctx, sandbox.CreateOptions{})
	require.NoError(t, err)
	kids, err := sb.Fork(ctx, 3, sandbox.ForkOptions{Labels: map[string]string{"a": "b"}, Env: map[string]string{"X": "1"}})
	assert.Equal(t, sandbox.ResourceExhausted, sandbox.CodeOf(err))
	assert.Len(t, kids, 2)
	require.Len(t, rt.reqs, 1)
	assert.Equal(t, "b", rt.reqs[0].Labels["a"])
	assert.Equal(t, "1", rt.reqs[0].Env["X"])
	assert.Empty(t, rt.reqs[0].Template)
	assert.Empty(t, rt.reqs[0].FromSnapshot)
	assert.Empty(t, rt.CallsOf(memory.OpSnapshot), "a native fork takes no snapshot")

	// Cancelled after the provider made them: they are destroyed.
	rt.fail = false
	fctx, cancel := context.WithCancel(ctx)
	cancel()
	kids, err = sb.Fork(fctx, 2, sandbox.ForkOptions{})
	assert.Nil(t, kids)
	assert.Equal(t, sandbox.Canceled, sandbox.CodeOf(err))
}

func TestCreateFromSnapshotInput(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := sandbox.NewClient(memory.New())
	defer c.Close()
	_, err := c.Create(ctx, sandbox.CreateOptions{Template: "base", FromSnapshot: "snap-1"})
	assert.Equal(t, sandbox.InvalidArgument, sandbox.CodeOf(err))
	assert.Contains(t, err.Error(), "FromSnapshot")
	assert.Contains(t, err.Error(), "template")
	_, err = c.Create(ctx, sandbox.CreateOptions{FromSnapshot: "a b"})
	assert.Equal(t, sandbox.InvalidArgument, sandbox.CodeOf(err))
	assert.Contains(t, err.Error(), "snapshot id")
	_, err = c.Create(ctx, sandbox.CreateOptions{FromSnapshot: "snap-missing"})
	assert.Equal(t, sandbox.NotFound, sandbox.CodeOf(err))

	sb, err := c.Create(ctx, sandbox.CreateOptions{})
	require.NoError(t, err)
	for _, n := range []int{0, -1, 257} {
		_, err = sb.Fork(ctx, n, sandbox.ForkOptions{})
		assert.Equal(t, sandbox.InvalidArgument, sandbox.CodeOf(err), "n=%d", n)
		assert.True(t, strings.Contains(err.Error(), "fork count"), "%v", err)
	}
	// GetOrCreate keys a snapshot apart from a template of the same name.
	snap, err := sb.Snapshot(ctx, sandbox.SnapshotOptions{})
	require.NoError(t, err)
	a, created, err := c.GetOrCreate(ctx, sandbox.CreateOptions{FromSnapshot: snap.ID, Labels: map[string]string{"k": "1"}})
	require.NoError(t, err)
	assert.True(t, created)
	b, _, err := c.GetOrCreate(ctx, sandbox.CreateOptions{FromSnapshot: snap.ID, Labels: map[string]string{"k": "1"}})
	require.NoError(t, err)
	assert.Equal(t, a.ID(), b.ID())
}

// A fork of a sandbox without network has none either, unless asked.
func TestForkKeepsNoNetwork(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := sandbox.NewClient(memory.New())
	defer c.Close()
	sb, err := c.Create(ctx, sandbox.CreateOptions{NoNetwork: true})
	require.NoError(t, err)
	kids, err := sb.Fork(ctx, 2, sandbox.ForkOptions{})
	require.NoError(t, err)
	for _, k := range kids {
		require.NotNil(t, k.Info().Network)
		assert.Equal(t, sandbox.NetworkDenyAll, k.Info().Network.Mode)
	}
	kids, err = sb.Fork(ctx, 1, sandbox.ForkOptions{Network: &sandbox.NetworkPolicy{Mode: sandbox.NetworkAllowAll}})
	require.NoError(t, err)
	assert.Equal(t, sandbox.NetworkAllowAll, kids[0].Info().Network.Mode)
}

// A fork of a sandbox with brokered secrets is never more open than its
// source: the creating handle carries the secrets over (each child with
// placeholders of its own), a handle that does not know their values
// (Attach) is refused with FailedPrecondition naming BrokeredSecrets
// unless they are given again or the children have no network. It holds
// with a native fork and through a snapshot.
func TestForkOfBrokeredSandbox(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for name, rt := range map[string]driver.Runtime{"native": &nativeFork{Runtime: memory.New()}, "snapshot": memory.New()} {
		t.Run(name, func(t *testing.T) {
			c := sandbox.NewClient(rt)
			defer c.Close()
			bs := []sandbox.BrokeredSecret{{Value: brokeredValue, Hosts: []string{"api.example.com"}, Env: "API_KEY"}}
			sb, err := c.Create(ctx, sandbox.CreateOptions{BrokeredSecrets: bs})
			require.NoError(t, err)
			defer sb.Destroy(ctx)
			parent := sb.Info().BrokeredSecrets
			require.Len(t, parent, 1)

			kids, err := sb.Fork(ctx, 2, sandbox.ForkOptions{})
			require.NoError(t, err)
			for _, k := range kids {
				got := k.Info().BrokeredSecrets
				require.Len(t, got, 1, "a fork of a sandbox with brokered secrets has none")
				assert.Equal(t, []string{"api.example.com"}, got[0].Hosts)
				res, err := k.Exec(ctx, sandbox.Command{Shell: "echo $API_KEY"})
				require.NoError(t, err)
				ph := strings.TrimSpace(string(res.Stdout))
				assert.Regexp(t, placeholderRE, ph)
				assert.NotEqual(t, parent[0].Placeholder, ph, "a child shares its parent's placeholder")
				// A child's own fork carries them on too.
				grand, err := k.Fork(ctx, 1, sandbox.ForkOptions{})
				require.NoError(t, err)
				assert.Len(t, grand[0].Info().BrokeredSecrets, 1)
			}

			att, err := c.Attach(ctx, sb.ID())
			require.NoError(t, err)
			_, err = att.Fork(ctx, 1, sandbox.ForkOptions{})
			require.ErrorIs(t, err, sandbox.ErrFailedPrecondition)
			assert.Contains(t, err.Error(), "ForkOptions.BrokeredSecrets")
			kids, err = att.Fork(ctx, 1, sandbox.ForkOptions{BrokeredSecrets: bs})
			require.NoError(t, err)
			assert.Len(t, kids[0].Info().BrokeredSecrets, 1)
			kids, err = att.Fork(ctx, 1, sandbox.ForkOptions{NoNetwork: true})
			require.NoError(t, err)
			assert.Empty(t, kids[0].Info().BrokeredSecrets)
			assert.Equal(t, sandbox.NetworkDenyAll, kids[0].Info().Network.Mode)
		})
	}
}
