package e2b_test

import (
	"bytes"
	"errors"
	"io/fs"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandboxkit/sandbox"
)

// run runs a shell line as the sandbox's user and requires it to succeed.
func run(t *testing.T, sb *sandbox.Sandbox, line string) {
	t.Helper()
	r, err := sb.Exec(ctxT(t), sandbox.Command{Shell: line})
	require.NoError(t, err)
	require.Equal(t, 0, r.ExitCode, "%s: %s%s", line, r.Stdout, r.Stderr)
}

// A symbolic link in the path must not get a change past the check: envd
// follows it as root, so the rights that decide are the real directory's.
func TestAccessThroughSymlinks(t *testing.T) {
	t.Parallel()
	e := newMemoryEnv(t)
	ctx := ctxT(t)
	sb, err := e.client.Create(ctx, sandbox.CreateOptions{})
	require.NoError(t, err)
	defer sb.Destroy(ctx)

	// A root-owned file to move or remove through a link, put there with
	// the backend's root file rights.
	bid, ok := e.fake.BackendID(sb.ID())
	require.True(t, ok)
	require.NoError(t, e.backend.Upload(ctx, bid, "/etc/victim", bytes.NewReader([]byte("v"))))
	require.NoError(t, e.backend.MkdirAll(ctx, bid, "/usr/bin"))
	require.NoError(t, e.backend.Upload(ctx, bid, "/usr/bin/tool", bytes.NewReader([]byte("t"))))

	run(t, sb, "ln -s /etc ~/etclink && ln -s ../../etc ~/rel && ln -s etclink ~/chain1 && ln -s chain1 ~/chain2 && "+
		"ln -s /usr/lib ~/dangling && ln -s loopb ~/loopa && ln -s loopa ~/loopb && mkdir ~/mine && ln -s mine ~/minelink")
	require.NoError(t, sb.WriteFile(ctx, "f", []byte("x")))

	for _, l := range []string{"etclink", "/home/user/etclink", "rel", "chain2"} {
		wantDenied(t, "WriteFile("+l+"/x)", sb.WriteFile(ctx, l+"/x", []byte("x")))
		wantDenied(t, "WriteFile("+l+"/deep/a/b)", sb.WriteFile(ctx, l+"/deep/a/b", []byte("x")))
		wantDenied(t, "MkdirAll("+l+"/a/b)", sb.MkdirAll(ctx, l+"/a/b"))
		wantDenied(t, "Rename(f, "+l+"/f)", sb.Rename(ctx, "f", l+"/f"))
		wantDenied(t, "Rename("+l+"/victim, v)", sb.Rename(ctx, l+"/victim", "v"))
		wantDenied(t, "Remove("+l+"/victim)", sb.Remove(ctx, l+"/victim"))
	}
	err = sb.WriteFile(ctx, "etclink/x", []byte("x"))
	assert.Contains(t, err.Error(), "/etc", "the error names the real directory")

	// A link to a missing directory: envd would create it as root.
	wantDenied(t, "WriteFile(dangling/x)", sb.WriteFile(ctx, "dangling/x", []byte("x")))
	wantDenied(t, "MkdirAll(dangling/a)", sb.MkdirAll(ctx, "dangling/a"))

	// A link loop is a clear error, not a write.
	err = sb.WriteFile(ctx, "loopa/x", []byte("x"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "symbolic links")

	// A root-level link to a root-owned directory, as /bin -> usr/bin.
	run(t, sb, "ln -s usr/bin /bin")
	wantDenied(t, "WriteFile(/bin/evil)", sb.WriteFile(ctx, "/bin/evil", []byte("x")))
	wantDenied(t, "MkdirAll(/bin/sub/dir)", sb.MkdirAll(ctx, "/bin/sub/dir"))
	wantDenied(t, "Remove(/bin/tool)", sb.Remove(ctx, "/bin/tool"))
	wantDenied(t, "Rename(/bin/tool, /bin/tool2)", sb.Rename(ctx, "/bin/tool", "/bin/tool2"))

	for _, p := range []string{"/etc/x", "/etc/deep", "/etc/a", "/etc/f", "/usr/lib", "/usr/bin/evil", "/usr/bin/sub", "/usr/bin/tool2"} {
		_, err := sb.Stat(ctx, p)
		assert.True(t, errors.Is(err, fs.ErrNotExist), "%s after the refused changes: %v", p, err)
	}
	for _, p := range []string{"/etc/victim", "/usr/bin/tool"} {
		_, err := sb.Stat(ctx, p)
		assert.NoError(t, err, "%s after the refused removes", p)
	}

	// Through a link to the user's own directory, changes work.
	require.NoError(t, sb.WriteFile(ctx, "minelink/a/x", []byte("x")))
	require.NoError(t, sb.MkdirAll(ctx, "minelink/b"))
	require.NoError(t, sb.Rename(ctx, "f", "minelink/f"))
	require.NoError(t, sb.Remove(ctx, "minelink/a"))
	got, err := sb.ReadFile(ctx, "mine/f")
	require.NoError(t, err)
	assert.Equal(t, "x", string(got))
}

// envd removes a directory tree as root; the user's own rm -rf stops at an
// entry the user may not remove, and so must Remove.
func TestRemoveTreeHasTheUsersRights(t *testing.T) {
	t.Parallel()
	e := newMemoryEnv(t)
	ctx := ctxT(t)
	sb, err := e.client.Create(ctx, sandbox.CreateOptions{})
	require.NoError(t, err)
	defer sb.Destroy(ctx)

	run(t, sb, "mkdir -p r/sub && echo x > r/sub/f && echo y > r/g && chmod 555 r/sub")
	err = sb.Remove(ctx, "r")
	wantDenied(t, "Remove(r) with a 555 subdirectory", err)
	assert.Contains(t, err.Error(), "remove /home/user/r:", "the error names the path")
	_, err = sb.Stat(ctx, "r/sub/f")
	assert.NoError(t, err, "r/sub/f after the refused Remove")

	// The user's own tree goes whole.
	run(t, sb, "chmod 755 r/sub && mkdir -p r/a/b && echo z > r/a/b/c")
	require.NoError(t, sb.Remove(ctx, "r"))
	_, err = sb.Stat(ctx, "r")
	assert.True(t, errors.Is(err, fs.ErrNotExist), "r after Remove: %v", err)

	// With root's file rights, envd's RemoveAll goes through.
	re := newRootEnv(t)
	rsb, err := re.client.Create(ctx, sandbox.CreateOptions{})
	require.NoError(t, err)
	defer rsb.Destroy(ctx)
	run(t, rsb, "mkdir -p r/sub && echo x > r/sub/f && chmod 555 r/sub")
	require.NoError(t, rsb.Remove(ctx, "r"))
}

// envd reads as root; the user's own cat fails on a file it may not read
// or in a directory it may not search, and so must ReadFile and Download.
func TestReadsHaveTheUsersRights(t *testing.T) {
	t.Parallel()
	e := newMemoryEnv(t)
	ctx := ctxT(t)
	sb, err := e.client.Create(ctx, sandbox.CreateOptions{})
	require.NoError(t, err)
	defer sb.Destroy(ctx)

	run(t, sb, "echo secret > s && chmod 000 s && mkdir d && echo x > d/f && chmod 000 d && ln -s s slink && "+
		"mkdir -p o && echo ok > o/f && chmod 400 o/f && chmod 100 o")
	for _, p := range []string{"s", "slink", "d/f"} {
		got, err := sb.ReadFile(ctx, p)
		wantDenied(t, "ReadFile("+p+")", err)
		assert.Empty(t, got)
		_, err = sb.Download(ctx, p)
		wantDenied(t, "Download("+p+")", err)
	}
	_, err = sb.ReadFile(ctx, "d/f")
	assert.Contains(t, err.Error(), "/home/user/d", "the error names the directory")

	// Search without read on the directory is enough, as for cat.
	got, err := sb.ReadFile(ctx, "o/f")
	require.NoError(t, err)
	assert.Equal(t, "ok\n", string(got))
	// A missing file is still NotFound.
	_, err = sb.ReadFile(ctx, "nope")
	wantCode(t, err, sandbox.NotFound)

	// With root's file rights, envd reads anything.
	re := newRootEnv(t)
	rsb, err := re.client.Create(ctx, sandbox.CreateOptions{})
	require.NoError(t, err)
	defer rsb.Destroy(ctx)
	run(t, rsb, "echo secret > s && chmod 000 s")
	got, err = rsb.ReadFile(ctx, "s")
	require.NoError(t, err)
	assert.Equal(t, "secret\n", string(got))
}
