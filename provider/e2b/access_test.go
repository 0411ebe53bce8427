package e2b_test

import (
	"context"
	"errors"
	"io/fs"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/driver"
	"github.com/sandboxkit/sandbox/provider/e2b"
	"github.com/sandboxkit/sandbox/provider/e2b/e2bfake"
	"github.com/sandboxkit/sandbox/provider/memory"
)

// newRootEnv is newMemoryEnv with the adapter given envd's root rights on
// files (WithRootFileAccess).
func newRootEnv(t *testing.T) *env {
	t.Helper()
	fake := e2bfake.New(memory.New(memory.WithRootFileAccess()))
	t.Cleanup(fake.Close)
	rt, err := e2b.New(e2b.WithAPIKey(fake.APIKey()), e2b.WithAPIURL(fake.APIURL()), e2b.WithSandboxURL(fake.SandboxURL()),
		e2b.WithRootFileAccess())
	require.NoError(t, err)
	c := sandbox.NewClient(rt)
	t.Cleanup(func() { _ = c.Close() })
	return &env{fake: fake, rt: rt, client: c}
}

func owner(ctx context.Context, t *testing.T, sb *sandbox.Sandbox, p string) string {
	t.Helper()
	r, err := sb.Exec(ctx, sandbox.Command{Args: []string{"stat", "-c", "%U", p}})
	require.NoError(t, err)
	require.Equal(t, 0, r.ExitCode, "stat %s: %s", p, r.Stderr)
	return strings.TrimSpace(string(r.Stdout))
}

func wantDenied(t *testing.T, what string, err error) {
	t.Helper()
	assert.Equal(t, sandbox.PermissionDenied, sandbox.CodeOf(err), "%s: %v", what, err)
	assert.True(t, errors.Is(err, fs.ErrPermission), "%s: %v does not match fs.ErrPermission", what, err)
}

// envd writes as root (the fake, over memory sandboxes whose file methods
// have root's rights, does too): the adapter holds the file methods to the
// sandbox user's rights, refusing before anything is written.
func TestFileMethodsHaveTheUsersRights(t *testing.T) {
	t.Parallel()
	e := newMemoryEnv(t)
	ctx := ctxT(t)
	sb, err := e.client.Create(ctx, sandbox.CreateOptions{})
	require.NoError(t, err)
	defer sb.Destroy(ctx)

	wantDenied(t, "WriteFile(/usr/x)", sb.WriteFile(ctx, "/usr/x", []byte("x")))
	wantDenied(t, "WriteFile(/usr/new/dir/x)", sb.WriteFile(ctx, "/usr/new/dir/x", []byte("x")))
	wantDenied(t, "MkdirAll(/etc/app/sub)", sb.MkdirAll(ctx, "/etc/app/sub"))
	wantDenied(t, "Remove(/usr/bin)", sb.Remove(ctx, "/usr/bin"))
	require.NoError(t, sb.WriteFile(ctx, "f", []byte("x")))
	wantDenied(t, "Rename(f, /etc/f)", sb.Rename(ctx, "f", "/etc/f"))
	wantDenied(t, "Rename(/usr/bin, b)", sb.Rename(ctx, "/usr/bin", "b"))
	err = sb.WriteFile(ctx, "/usr/x", []byte("x"))
	assert.Contains(t, err.Error(), "/usr", "the error names the place")
	for _, p := range []string{"/usr/x", "/usr/new", "/etc/app", "/etc/f"} {
		_, err := sb.Stat(ctx, p)
		assert.True(t, errors.Is(err, fs.ErrNotExist), "%s after the refused writes: %v", p, err)
	}
	_, err = sb.Stat(ctx, "/usr/bin")
	assert.NoError(t, err, "/usr/bin after the refused Remove and Rename")

	// What the user may write works, and is the user's.
	require.NoError(t, sb.WriteFile(ctx, "a/b/c.txt", []byte("x")))
	require.NoError(t, sb.MkdirAll(ctx, "d/e"))
	require.NoError(t, sb.Rename(ctx, "a/b/c.txt", "d/e/c.txt"))
	require.NoError(t, sb.Remove(ctx, "a"))
	assert.Equal(t, "user", owner(ctx, t, sb, "d/e/c.txt"))
	assert.Equal(t, "user", owner(ctx, t, sb, "d"))
}

// With WithRootFileAccess the adapter uses envd's root rights: writes
// where the user's commands may not succeed, and what they create is the
// user's, as envd makes it.
func TestRootFileAccess(t *testing.T) {
	t.Parallel()
	e := newRootEnv(t)
	ctx := ctxT(t)
	sb, err := e.client.Create(ctx, sandbox.CreateOptions{})
	require.NoError(t, err)
	defer sb.Destroy(ctx)
	require.NoError(t, sb.WriteFile(ctx, "/usr/new/x", []byte("x")))
	require.NoError(t, sb.MkdirAll(ctx, "/etc/app"))
	require.NoError(t, sb.Rename(ctx, "/usr/new/x", "/etc/app/x"))
	assert.Equal(t, "user", owner(ctx, t, sb, "/etc/app/x"))
	assert.Equal(t, "user", owner(ctx, t, sb, "/usr/new"))
	require.NoError(t, sb.Remove(ctx, "/etc/app"))
	// The sandbox's commands still may not write there.
	r, err := sb.Exec(ctx, sandbox.Command{Shell: "touch /usr/y"})
	require.NoError(t, err)
	assert.NotEqual(t, 0, r.ExitCode)
}

func TestFileAccessURL(t *testing.T) {
	t.Setenv("E2B_API_KEY", "e2b_0123")
	open, ok := driver.Lookup(e2b.Scheme)
	require.True(t, ok)
	for _, v := range []string{"root", "user"} {
		u, _ := url.Parse("e2b://?file_access=" + v)
		_, err := open(context.Background(), u, driver.OpenOptions{})
		assert.NoError(t, err, "file_access=%s", v)
	}
	u, _ := url.Parse("e2b://?file_access=admin")
	_, err := open(context.Background(), u, driver.OpenOptions{})
	assert.Equal(t, sandbox.InvalidArgument, sandbox.CodeOf(err), "%v", err)
	assert.Contains(t, err.Error(), "file_access")
}

// A WriteFile costs one Stat more than the upload and the rename (envd's
// Stat of the file's directory); who the user is was learned at Create.
func TestWriteFileRoundTrips(t *testing.T) {
	t.Parallel()
	e := newMemoryEnv(t)
	ctx := ctxT(t)
	sb, err := e.client.Create(ctx, sandbox.CreateOptions{})
	require.NoError(t, err)
	defer sb.Destroy(ctx)
	require.NoError(t, sb.MkdirAll(ctx, "dir"))
	keys := []string{"POST /files", "POST /filesystem.Filesystem/Move", "POST /filesystem.Filesystem/Stat", "POST /process.Process/Start"}
	before := map[string]int{}
	for _, k := range keys {
		before[k] = e.fake.Count(k)
	}
	const n = 5
	for range n {
		require.NoError(t, sb.WriteFile(ctx, "dir/f", []byte("x")))
	}
	got := map[string]int{}
	for _, k := range keys {
		got[k] = (e.fake.Count(k) - before[k]) / n
	}
	t.Logf("per WriteFile: %v", got)
	assert.Equal(t, map[string]int{"POST /files": 1, "POST /filesystem.Filesystem/Move": 1,
		"POST /filesystem.Filesystem/Stat": 1, "POST /process.Process/Start": 0}, got)
}
