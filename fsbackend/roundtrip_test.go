package fsbackend

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/backend"
	"github.com/sandboxkit/sandbox/provider/memory"

	"github.com/stretchr/testify/require"
)

// calls counts the provider calls f makes.
func calls(rt *memory.Runtime, f func()) int {
	before := len(rt.Calls())
	f()
	return len(rt.Calls()) - before
}

func TestRoundTripsPerOperation(t *testing.T) {
	t.Parallel()
	for _, n := range []int{10, 100} {
		t.Run(fmt.Sprint(n, " files"), func(t *testing.T) {
			b, rt, _, err := newMemory(ctx, Options{})
			require.NoError(t, err)
			defer b.Close()
			files := make([]backend.File, n)
			for i := range files {
				files[i] = backend.File{Path: fmt.Sprintf("dir%d/file%d.txt", i%7, i), Data: []byte("needle line\nother\n")}
			}
			// Warm up: the $HOME probe happens once, and so does the
			// lease's extension (a get and a set-timeout): the memory
			// provider's 5-minute lease is shorter than the 10-minute
			// command timeout the helper runs with, so the first command
			// extends the lease to cover it, and the commands that follow
			// within its grace do not.
			require.Equal(t, 3+n, calls(rt, func() {
				_, err := b.SetFiles(ctx, &backend.SetFilesRequest{Files: files})
				require.NoError(t, err)
			}))
			ops := []struct {
				name string
				want int
				f    func() error
			}{
				{"read", 1, func() error { _, err := b.Read(ctx, &backend.ReadRequest{Path: "dir0/file0.txt"}); return err }},
				{"read_chars", 1, func() error {
					_, err := b.ReadChars(ctx, &backend.ReadCharsRequest{Path: "dir0/file0.txt"})
					return err
				}},
				{"read_bytes", 1, func() error {
					_, err := b.ReadBytes(ctx, &backend.ReadBytesRequest{Path: "dir0/file0.txt"})
					return err
				}},
				{"write with new parents", 1, func() error {
					_, err := b.Write(ctx, &backend.WriteRequest{Path: "new/a/b/c.txt", Content: "x"})
					return err
				}},
				{"write_bytes", 1, func() error {
					_, err := b.WriteBytes(ctx, &backend.WriteBytesRequest{Path: "new/x.bin", Data: []byte{0}})
					return err
				}},
				{"edit", 2, func() error {
					r, err := b.Edit(ctx, &backend.EditRequest{Path: "dir0/file0.txt", OldString: "other", NewString: "else"})
					if err == nil && r.Error != nil {
						err = r.Error
					}
					return err
				}},
				{"ls", 1, func() error { _, err := b.Ls(ctx, &backend.LsRequest{}); return err }},
				{"glob", 1, func() error {
					r, err := b.Glob(ctx, &backend.GlobRequest{Pattern: "*.txt"})
					if err == nil && len(r.Files) < n {
						err = fmt.Errorf("glob found %d files", len(r.Files))
					}
					return err
				}},
				{"grep", 1, func() error {
					r, err := b.Grep(ctx, &backend.GrepRequest{Pattern: "needle"})
					if err == nil && len(r.Matches) != n {
						err = fmt.Errorf("grep found %d matches", len(r.Matches))
					}
					return err
				}},
				{"grep with a regular expression, case and context", 1, func() error {
					r, err := b.Grep(ctx, &backend.GrepRequest{Pattern: "NEE+DLE", Regex: true, IgnoreCase: true, Before: 2, After: 2})
					if err == nil && len(r.Matches) < n {
						err = fmt.Errorf("grep found %d lines", len(r.Matches))
					}
					return err
				}},
				{"get all", 3, func() error {
					r, err := b.GetFiles(ctx, &backend.GetFilesRequest{})
					if err == nil && len(r.Files) < n {
						err = fmt.Errorf("get found %d files", len(r.Files))
					}
					return err
				}},
			}
			for _, op := range ops {
				var err error
				got := calls(rt, func() { err = op.f() })
				require.NoError(t, err, op.name)
				require.Equal(t, op.want, got, "round trips of %s with %d files", op.name, n)
			}
			// GetFiles leaves no archive behind.
			rm := rt.CallsOf(memory.OpRemove)
			require.Len(t, rm, 1)
			_, err = b.sb.Stat(ctx, rm[0].Path)
			require.True(t, errors.Is(err, sandbox.ErrNotFound), "archive removed")
		})
	}
}

func TestBaseDirProbe(t *testing.T) {
	t.Parallel()
	b, rt, _, err := newMemory(ctx, Options{})
	require.NoError(t, err)
	defer b.Close()
	base, err := b.BaseDir(ctx)
	require.NoError(t, err)
	require.Equal(t, memory.Home+"/workspace", base)
	_, _ = b.BaseDir(ctx)
	write(t, b, "a.txt", "x")
	require.Len(t, rt.CallsOf(memory.OpExec), 2, "probed once, then one write")

	// An explicit base directory wins and needs no probe.
	b2, rt2, _, err := newMemory(ctx, Options{BaseDir: "/srv/data/"})
	require.NoError(t, err)
	defer b2.Close()
	base, err = b2.BaseDir(ctx)
	require.NoError(t, err)
	require.Equal(t, "/srv/data", base)
	require.Len(t, rt2.Calls(), 1, "only the create")

	// A failed probe falls back.
	rt3 := memory.New()
	client := sandbox.NewClient(rt3)
	rt3.HandleShell(func(line string) bool { return line == `printf '%s' "$HOME"` }, func(_ context.Context, c *memory.Call) int { return 1 })
	sb, err := client.Create(ctx, sandbox.CreateOptions{})
	require.NoError(t, err)
	b3, err := New(sb, Options{})
	require.NoError(t, err)
	defer b3.Close()
	base, err = b3.BaseDir(ctx)
	require.NoError(t, err)
	require.Equal(t, FallbackBaseDir, base)

	// HOME=/ is not a usable home either.
	rt4 := memory.New()
	client = sandbox.NewClient(rt4)
	rt4.HandleShell(func(line string) bool { return line == `printf '%s' "$HOME"` }, func(_ context.Context, c *memory.Call) int {
		fmt.Fprint(c.Stdout, "/")
		return 0
	})
	sb, err = client.Create(ctx, sandbox.CreateOptions{})
	require.NoError(t, err)
	b4, err := New(sb, Options{})
	require.NoError(t, err)
	defer b4.Close()
	base, err = b4.BaseDir(ctx)
	require.NoError(t, err)
	require.Equal(t, FallbackBaseDir, base)

	_, err = New(sb, Options{BaseDir: "relative/dir"})
	require.Error(t, err)
	_, err = New(nil, Options{})
	require.Error(t, err)
}

func TestStaleTransportRetriedOnce(t *testing.T) {
	t.Parallel()
	b, rt, _, err := newMemory(ctx, Options{})
	require.NoError(t, err)
	defer b.Close()
	write(t, b, "a.txt", "hello")

	// One stale failure: retried once, transparently; the reset listener
	// dropped the cached workspace, so the next call probes again.
	rt.FailNext(memory.OpExec, 1, sandbox.ErrStaleTransport)
	n := calls(rt, func() { require.Equal(t, "     1\thello", readText(t, b, "a.txt").Content) })
	require.Equal(t, 2, n, "the failed call and its one retry")
	n = calls(rt, func() { require.Equal(t, "     1\thello", readText(t, b, "a.txt").Content) })
	require.Equal(t, 2, n, "caches dropped: the probe runs again, then the read")

	// Two stale failures in a row: surfaced, not retried again, not swallowed.
	rt.FailNext(memory.OpExec, 2, sandbox.ErrStaleTransport)
	n = calls(rt, func() {
		r, err := b.Read(ctx, &backend.ReadRequest{Path: "a.txt"})
		require.Error(t, err)
		require.True(t, errors.Is(err, sandbox.ErrStaleTransport), "got %v", err)
		require.Nil(t, r)
	})
	require.Equal(t, 2, n)

	// The same for writes and for the download of GetFiles.
	write(t, b, "warm.txt", "x")
	rt.FailNext(memory.OpExec, 2, sandbox.ErrStaleTransport)
	_, err = b.Write(ctx, &backend.WriteRequest{Path: "b.txt", Content: "x"})
	require.True(t, errors.Is(err, sandbox.ErrStaleTransport), "got %v", err)
	write(t, b, "warm.txt", "x")
	rt.FailNext(memory.OpDownload, 1, sandbox.ErrStaleTransport)
	all, err := b.GetFiles(ctx, &backend.GetFilesRequest{})
	require.NoError(t, err)
	require.Len(t, all.Files, 2)
	require.Len(t, rt.CallsOf(memory.OpDownload), 2)
	rt.FailNext(memory.OpDownload, 2, sandbox.ErrStaleTransport)
	_, err = b.GetFiles(ctx, &backend.GetFilesRequest{})
	require.True(t, errors.Is(err, sandbox.ErrStaleTransport), "got %v", err)

	// Edit: a stale failure is retried once; two surface.
	write(t, b, "e.txt", "old")
	write(t, b, "warm.txt", "x")
	rt.FailNext(memory.OpExec, 1, sandbox.ErrStaleTransport)
	ed, err := b.Edit(ctx, &backend.EditRequest{Path: "e.txt", OldString: "old", NewString: "new"})
	require.NoError(t, err)
	require.Equal(t, 1, ed.Occurrences)
	write(t, b, "warm.txt", "x")
	rt.FailNext(memory.OpExec, 2, sandbox.ErrStaleTransport)
	_, err = b.Edit(ctx, &backend.EditRequest{Path: "e.txt", OldString: "new", NewString: "newer"})
	require.True(t, errors.Is(err, sandbox.ErrStaleTransport), "got %v", err)
}

func TestExecuteStaleTransport(t *testing.T) {
	t.Parallel()
	b, rt, _, err := newMemory(ctx, Options{AllowExecute: true})
	require.NoError(t, err)
	defer b.Close()
	rt.HandleShell(func(line string) bool { return line == "echo hi" }, func(_ context.Context, c *memory.Call) int {
		fmt.Fprintln(c.Stdout, "hi")
		return 0
	})
	r, err := b.Execute(ctx, &backend.ExecuteRequest{Command: "echo hi"})
	require.NoError(t, err)
	require.Equal(t, "hi\n", r.Output)

	rt.FailNext(memory.OpExec, 1, sandbox.ErrStaleTransport)
	n := calls(rt, func() {
		r, err = b.Execute(ctx, &backend.ExecuteRequest{Command: "echo hi"})
		require.NoError(t, err)
		require.Equal(t, "hi\n", r.Output)
	})
	require.Equal(t, 2, n, "one retry")

	_, _ = b.BaseDir(ctx)
	rt.FailNext(memory.OpExec, 2, sandbox.ErrStaleTransport)
	_, err = b.Execute(ctx, &backend.ExecuteRequest{Command: "echo hi"})
	require.True(t, errors.Is(err, sandbox.ErrStaleTransport), "got %v", err)
}

func TestCloseUnregistersResetListener(t *testing.T) {
	t.Parallel()
	b, rt, _, err := newMemory(ctx, Options{})
	require.NoError(t, err)
	write(t, b, "a.txt", "x")
	require.NoError(t, b.Close())
	rt.FailNext(memory.OpExec, 1, sandbox.ErrStaleTransport)
	readText(t, b, "a.txt")
	n := calls(rt, func() { readText(t, b, "a.txt") })
	require.Equal(t, 1, n, "a closed backend keeps its caches: no new probe")
}

func TestBrokenShellSurfacesHelperFailure(t *testing.T) {
	t.Parallel()
	rt := memory.New()
	client := sandbox.NewClient(rt)
	// A sandbox whose sh cannot run the helper (as a shell without
	// functions or $(…) would fail it).
	rt.Handle("sh", func(_ context.Context, c *memory.Call) int {
		fmt.Fprintln(c.Stderr, "sh: 1: Syntax error: \"(\" unexpected")
		return 2
	})
	sb, err := client.Create(ctx, sandbox.CreateOptions{})
	require.NoError(t, err)
	b, err := New(sb, Options{BaseDir: memory.Home + "/ws"})
	require.NoError(t, err)
	defer b.Close()
	_, err = b.Read(ctx, &backend.ReadRequest{Path: "a"})
	require.Error(t, err, "a sandbox whose shell cannot run the helper is an error, not an agent result")
	require.True(t, sandbox.CodeOf(err) == sandbox.Internal, "got %v", err)
}
