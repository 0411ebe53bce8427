package fsbackend

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"go.uber.org/goleak"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/backend"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// env is one backend under test over a sandbox whose commands run for real.
type env struct {
	b     *FilesystemBackend
	sb    *sandbox.Sandbox
	base  string // the workspace, as the sandbox sees it
	out   string // a directory outside the workspace, as the sandbox sees it
	opts  Options
	calls func() int64
}

// sh runs a setup command in the sandbox and fails the test if it fails.
func (e *env) sh(t *testing.T, line string) string {
	t.Helper()
	res, err := e.sb.Exec(context.Background(), sandbox.Command{Shell: line})
	require.NoError(t, err)
	require.Equal(t, 0, res.ExitCode, "%s: %s", line, res.Stderr)
	return string(res.Stdout)
}

// reopen returns a new backend instance over the same sandbox and workspace.
func (e *env) reopen(t *testing.T) *FilesystemBackend {
	t.Helper()
	b, err := New(e.sb, e.opts)
	require.NoError(t, err)
	t.Cleanup(func() { b.Close() })
	return b
}

// newHost returns a backend over the host runtime: real sh, find, grep,
// tar and symbolic links in a temporary directory.
func newHost(t *testing.T, opts Options) *env {
	t.Helper()
	dir, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	rt := &hostRuntime{home: filepath.Join(dir, "home")}
	require.NoError(t, os.MkdirAll(rt.home, 0o755))
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "outside"), 0o755))
	sb, err := sandbox.NewClient(rt).Create(context.Background(), sandbox.CreateOptions{})
	require.NoError(t, err)
	if opts.BaseDir == "" {
		opts.BaseDir = filepath.Join(rt.home, "workspace")
	}
	b, err := New(sb, opts)
	require.NoError(t, err)
	t.Cleanup(func() { b.Close() })
	return &env{b: b, sb: sb, base: opts.BaseDir, out: filepath.Join(dir, "outside"), opts: opts, calls: rt.calls.Load}
}

// envs returns the real-shell environments the behavioural tests run on.
func envs(t *testing.T, opts Options) map[string]*env {
	return map[string]*env{"host": newHost(t, opts)}
}

var ctx = context.Background()

func write(t *testing.T, b backend.Backend, p, content string) {
	t.Helper()
	r, err := b.Write(ctx, &backend.WriteRequest{Path: p, Content: content})
	require.NoError(t, err)
	require.Nil(t, r.Error, "write %s", p)
}

func readText(t *testing.T, b backend.Backend, p string) *backend.ReadResult {
	t.Helper()
	r, err := b.Read(ctx, &backend.ReadRequest{Path: p})
	require.NoError(t, err)
	return r
}

func codeOf(e *backend.Error) backend.Code {
	if e == nil {
		return ""
	}
	return e.Code
}

func TestReadWindow(t *testing.T) {
	for name, e := range envs(t, Options{}) {
		t.Run(name, func(t *testing.T) {
			write(t, e.b, "notes.txt", "alpha\nbeta\ngamma\n")
			r := readText(t, e.b, "notes.txt")
			require.Nil(t, r.Error)
			require.Equal(t, "     1\talpha\n     2\tbeta\n     3\tgamma", r.Content)
			require.Equal(t, 3, r.TotalLines)

			r, err := e.b.Read(ctx, &backend.ReadRequest{Path: "notes.txt", Offset: 1, Limit: 1})
			require.NoError(t, err)
			require.Equal(t, "     2\tbeta", r.Text())

			r, err = e.b.Read(ctx, &backend.ReadRequest{Path: "notes.txt", Offset: 10})
			require.NoError(t, err)
			require.Nil(t, r.Error)
			require.Equal(t, "", r.Content)

			write(t, e.b, "empty.txt", "")
			require.Equal(t, "", readText(t, e.b, "empty.txt").Content)
		})
	}
}

func TestReadChars(t *testing.T) {
	for name, e := range envs(t, Options{}) {
		t.Run(name, func(t *testing.T) {
			write(t, e.b, "long.txt", "héllo wörld")
			r, err := e.b.ReadChars(ctx, &backend.ReadCharsRequest{Path: "long.txt", Offset: 6, MaxChars: 3})
			require.NoError(t, err)
			require.Equal(t, "wör", r.Content)
			require.Equal(t, 11, r.TotalChars)
			r, err = e.b.ReadChars(ctx, &backend.ReadCharsRequest{Path: "long.txt", Offset: 11})
			require.NoError(t, err)
			require.Equal(t, backend.EndOfFile, r.Content)
			write(t, e.b, "empty.txt", "")
			r, err = e.b.ReadChars(ctx, &backend.ReadCharsRequest{Path: "empty.txt"})
			require.NoError(t, err)
			require.Equal(t, "", r.Content)
			r, err = e.b.ReadChars(ctx, &backend.ReadCharsRequest{Path: "nope.txt"})
			require.NoError(t, err)
			require.Equal(t, backend.CodeFileNotFound, codeOf(r.Error))
		})
	}
}

func TestWriteCreatesParentsAndReplaces(t *testing.T) {
	for name, e := range envs(t, Options{}) {
		t.Run(name, func(t *testing.T) {
			r, err := e.b.Write(ctx, &backend.WriteRequest{Path: "a/b/c/deep.txt", Content: "one"})
			require.NoError(t, err)
			require.Nil(t, r.Error)
			require.Equal(t, "a/b/c/deep.txt", r.Path)
			require.Equal(t, int64(3), r.Bytes)
			write(t, e.b, "a/b/c/deep.txt", "two")
			require.Equal(t, "two", e.sh(t, "cat "+e.base+"/a/b/c/deep.txt"))

			// A parent that is a file, and a target that is a directory.
			r, err = e.b.Write(ctx, &backend.WriteRequest{Path: "a/b/c/deep.txt/x", Content: "x"})
			require.NoError(t, err)
			require.Equal(t, backend.CodeNotDirectory, codeOf(r.Error))
			r, err = e.b.Write(ctx, &backend.WriteRequest{Path: "a/b", Content: "x"})
			require.NoError(t, err)
			require.Equal(t, backend.CodeIsDirectory, codeOf(r.Error))
		})
	}
}

func TestEdit(t *testing.T) {
	for name, e := range envs(t, Options{}) {
		t.Run(name, func(t *testing.T) {
			write(t, e.b, "code.py", "x = 1\ny = 1\nz = 2\n")
			r, err := e.b.Edit(ctx, &backend.EditRequest{Path: "code.py", OldString: "z = 2", NewString: "z = 3"})
			require.NoError(t, err)
			require.Nil(t, r.Error)
			require.Equal(t, 1, r.Occurrences)

			r, err = e.b.Edit(ctx, &backend.EditRequest{Path: "code.py", OldString: "= 1", NewString: "= 0"})
			require.NoError(t, err)
			require.Equal(t, backend.CodeAmbiguousMatch, codeOf(r.Error))
			require.Contains(t, r.Text(), "occurs 2 times")

			r, err = e.b.Edit(ctx, &backend.EditRequest{Path: "code.py", OldString: "= 1", NewString: "= 0", ReplaceAll: true})
			require.NoError(t, err)
			require.Nil(t, r.Error)
			require.Equal(t, 2, r.Occurrences)
			require.Equal(t, "x = 0\ny = 0\nz = 3\n", e.sh(t, "cat "+e.base+"/code.py"))

			r, err = e.b.Edit(ctx, &backend.EditRequest{Path: "code.py", OldString: "absent", NewString: "x"})
			require.NoError(t, err)
			require.Equal(t, backend.CodeNoMatch, codeOf(r.Error))

			r, err = e.b.Edit(ctx, &backend.EditRequest{Path: "missing.py", OldString: "a", NewString: "b"})
			require.NoError(t, err)
			require.Equal(t, backend.CodeFileNotFound, codeOf(r.Error))
		})
	}
}

func TestErrorCodes(t *testing.T) {
	for name, e := range envs(t, Options{}) {
		t.Run(name, func(t *testing.T) {
			write(t, e.b, "dir/file.txt", "x")
			require.Equal(t, backend.CodeIsDirectory, codeOf(readText(t, e.b, "dir").Error))
			require.Equal(t, backend.CodeIsDirectory, codeOf(readText(t, e.b, "/").Error))
			nf := readText(t, e.b, "dir/none.txt").Error
			require.Equal(t, backend.CodeFileNotFound, codeOf(nf))
			require.True(t, errors.Is(nf, fs.ErrNotExist))
			require.Equal(t, "Error: file 'dir/none.txt' not found", readText(t, e.b, "dir/none.txt").Text())
			require.Equal(t, backend.CodeInvalidPath, codeOf(readText(t, e.b, "../x").Error))
			require.Equal(t, backend.CodeInvalidPath, codeOf(readText(t, e.b, "a\x00b").Error))

			if os.Geteuid() != 0 {
				e.sh(t, "printf secret > "+e.base+"/locked.txt && chmod 000 "+e.base+"/locked.txt")
				require.Equal(t, backend.CodePermissionDenied, codeOf(readText(t, e.b, "locked.txt").Error))
				r, err := e.b.Write(ctx, &backend.WriteRequest{Path: "locked.txt", Content: "x"})
				require.NoError(t, err)
				require.Equal(t, backend.CodePermissionDenied, codeOf(r.Error))
			}
		})
	}
}

func TestJailNamesAndRerooting(t *testing.T) {
	for name, e := range envs(t, Options{}) {
		t.Run(name, func(t *testing.T) {
			// Unusual but valid names.
			for _, p := range []string{"report..final.md", "app/[...slug]/page.tsx", "..hidden", "a/...", "sp ace/é.txt"} {
				write(t, e.b, p, "ok "+p)
				require.Equal(t, "     1\tok "+p, readText(t, e.b, p).Content, p)
			}
			require.Equal(t, "ok app/[...slug]/page.tsx", e.sh(t, "cat '"+e.base+"/app/[...slug]/page.tsx'"))

			// Absolute paths are re-rooted, never passed through.
			write(t, e.b, "/etc/passwd", "fake")
			require.Equal(t, "fake", e.sh(t, "cat "+e.base+"/etc/passwd"))
			// The workspace's own absolute path is accepted as is.
			write(t, e.b, e.base+"/abs.txt", "abs")
			require.Equal(t, "     1\tabs", readText(t, e.b, "abs.txt").Content)
			// ".." inside the workspace is fine; above it is not.
			require.Equal(t, "     1\tabs", readText(t, e.b, "x/../abs.txt").Content)
			for _, p := range []string{"../escape.txt", "/../../etc/passwd", "a/../../b", `..\..\etc\passwd`} {
				r, err := e.b.Write(ctx, &backend.WriteRequest{Path: p, Content: "x"})
				require.NoError(t, err)
				require.Equal(t, backend.CodeInvalidPath, codeOf(r.Error), p)
			}
			// Windows separators are normalized.
			require.Equal(t, "     1\tfake", readText(t, e.b, `etc\passwd`).Content)
		})
	}
}

func TestSymlinkEscapes(t *testing.T) {
	for name, e := range envs(t, Options{}) {
		t.Run(name, func(t *testing.T) {
			write(t, e.b, "inside.txt", "in")
			e.sh(t, "printf secret > "+e.out+"/secret.txt")
			e.sh(t, "ln -s "+e.out+" "+e.base+"/outdir")
			e.sh(t, "ln -s "+e.out+"/secret.txt "+e.base+"/outfile")
			e.sh(t, "ln -s "+e.out+"/new.txt "+e.base+"/dangling")
			e.sh(t, "ln -s inside.txt "+e.base+"/alias.txt")
			e.sh(t, "mkdir -p "+e.base+"/sub && ln -s ../../../outside "+e.base+"/sub/up")

			for _, p := range []string{"outdir/secret.txt", "outfile", "sub/up/secret.txt"} {
				require.Equal(t, backend.CodeInvalidPath, codeOf(readText(t, e.b, p).Error), "read %s", p)
				rb, err := e.b.ReadBytes(ctx, &backend.ReadBytesRequest{Path: p})
				require.NoError(t, err)
				require.Equal(t, backend.CodeInvalidPath, codeOf(rb.Error), "read bytes %s", p)
				rc, err := e.b.ReadChars(ctx, &backend.ReadCharsRequest{Path: p})
				require.NoError(t, err)
				require.Equal(t, backend.CodeInvalidPath, codeOf(rc.Error))
				ed, err := e.b.Edit(ctx, &backend.EditRequest{Path: p, OldString: "secret", NewString: "pwned"})
				require.NoError(t, err)
				require.Equal(t, backend.CodeInvalidPath, codeOf(ed.Error), "edit %s", p)
			}
			for _, p := range []string{"outdir/new.txt", "outfile", "dangling", "outdir/deep/new.txt", "sub/up/x.txt"} {
				w, err := e.b.Write(ctx, &backend.WriteRequest{Path: p, Content: "pwned"})
				require.NoError(t, err)
				require.Equal(t, backend.CodeInvalidPath, codeOf(w.Error), "write %s", p)
				w, err = e.b.WriteBytes(ctx, &backend.WriteBytesRequest{Path: p, Data: []byte{0, 1}})
				require.NoError(t, err)
				require.Equal(t, backend.CodeInvalidPath, codeOf(w.Error), "write bytes %s", p)
			}
			require.Equal(t, "secret", e.sh(t, "cat "+e.out+"/secret.txt"))
			require.Equal(t, "secret.txt\n", e.sh(t, "ls "+e.out), "nothing was created outside")

			ls, err := e.b.Ls(ctx, &backend.LsRequest{Path: "outdir"})
			require.NoError(t, err)
			require.Equal(t, backend.CodeInvalidPath, codeOf(ls.Error))
			gl, err := e.b.Glob(ctx, &backend.GlobRequest{Pattern: "**", Path: "outdir"})
			require.NoError(t, err)
			require.Equal(t, backend.CodeInvalidPath, codeOf(gl.Error))
			gl, err = e.b.Glob(ctx, &backend.GlobRequest{Pattern: "secret.txt"})
			require.NoError(t, err)
			require.Empty(t, gl.Files, "glob does not descend a link")
			gr, err := e.b.Grep(ctx, &backend.GrepRequest{Pattern: "secret", Path: "outdir"})
			require.NoError(t, err)
			require.Equal(t, backend.CodeInvalidPath, codeOf(gr.Error))
			gr, err = e.b.Grep(ctx, &backend.GrepRequest{Pattern: "secret"})
			require.NoError(t, err)
			require.Empty(t, gr.Matches, "grep does not follow links out")
			dl, err := e.b.DownloadFiles(ctx, &backend.DownloadFilesRequest{Paths: []string{"outfile", "inside.txt"}})
			require.NoError(t, err)
			require.Equal(t, backend.CodeInvalidPath, codeOf(dl.Results[0].Error))
			require.Equal(t, "in", string(dl.Results[1].Data))
			all, err := e.b.GetFiles(ctx, &backend.GetFilesRequest{})
			require.NoError(t, err)
			for _, f := range all.Files {
				require.NotContains(t, string(f.Data), "secret", f.Path)
			}

			// A link that stays inside works.
			require.Equal(t, "     1\tin", readText(t, e.b, "alias.txt").Content)
			write(t, e.b, "alias.txt", "through")
			require.Equal(t, "through", e.sh(t, "cat "+e.base+"/inside.txt"))

			// The workspace replaced by a link to the outside is refused too.
			e.sh(t, "mv "+e.base+" "+e.base+".real && ln -s "+e.out+" "+e.base)
			r := readText(t, e.b, "secret.txt")
			if r.Error == nil {
				// The workspace itself resolves physically, so this reads
				// the outside only if the backend trusted the link.
				t.Fatalf("read through a workspace replaced by a link: %q", r.Content)
			}
		})
	}
}
