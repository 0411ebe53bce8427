package fsbackend

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/backend"
	"github.com/sandboxkit/sandbox/driver"
	"github.com/sandboxkit/sandbox/provider/local"
	"github.com/sandboxkit/sandbox/provider/local/localtest"

	"github.com/stretchr/testify/require"
)

// helperSums reads helperbin/SHA256SUMS: the Go release that built the
// helpers and each binary's SHA-256.
func helperSums(t *testing.T) (goVersion string, sums map[string]string) {
	t.Helper()
	data, err := helperFiles.ReadFile("helperbin/SHA256SUMS")
	require.NoError(t, err)
	sums = map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := sc.Text()
		if v, ok := strings.CutPrefix(line, "# "); ok {
			goVersion = v
			continue
		}
		sum, name, ok := strings.Cut(line, "  ")
		require.True(t, ok, "malformed line %q", line)
		sums[name] = sum
	}
	require.True(t, goVersion != "", "SHA256SUMS names the Go release")
	return goVersion, sums
}

func sha(data []byte) string {
	s := sha256.Sum256(data)
	return hex.EncodeToString(s[:])
}

// TestHelperReproducible rebuilds the embedded helpers from the source in
// the repository, with the flags of the go generate step, and requires the
// same bytes: the committed binaries are what the source says.
func TestHelperReproducible(t *testing.T) {
	t.Parallel()
	goVersion, sums := helperSums(t)
	for _, arch := range helperArches {
		gz, err := helperFiles.ReadFile("helperbin/fshelper-linux-" + arch + ".gz")
		require.NoError(t, err)
		zr, err := gzip.NewReader(bytes.NewReader(gz))
		require.NoError(t, err)
		data, err := io.ReadAll(zr)
		require.NoError(t, err)
		require.Equal(t, sums["fshelper-linux-"+arch], sha(data), "the embedded %s helper matches SHA256SUMS", arch)
		require.Equal(t, sha(data), helperBlob()[arch].Sum())
	}
	if testing.Short() {
		t.Skip("-short: the rebuild takes a minute")
	}
	if runtime.Version() != goVersion {
		t.Skipf("the helpers were built with %s, this toolchain is %s: the bytes differ between Go releases", goVersion, runtime.Version())
	}
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("the go command is not on PATH")
	}
	dir := t.TempDir()
	for _, arch := range helperArches {
		bin := filepath.Join(dir, "fshelper-linux-"+arch)
		cmd := exec.Command(gobin, "build", "-trimpath", "-ldflags", "-s -w -buildid=", "-o", bin, "./internal/fshelper")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+arch, "GOFLAGS=", "GOAMD64=v1", "GOARM64=v8.0")
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s", out)
		data, err := os.ReadFile(bin)
		require.NoError(t, err)
		require.Equal(t, sums["fshelper-linux-"+arch], sha(data), "rebuilt %s helper; run go generate ./fsbackend after changing internal/fshelper", arch)
	}
}

// countingRT counts the calls that cross a Runtime: one call is one round
// trip.
type countingRT struct {
	driver.Runtime
	n atomic.Int64
}

func (c *countingRT) Exec(ctx context.Context, id string, cmd *driver.Command) (driver.ExitStatus, error) {
	c.n.Add(1)
	return c.Runtime.Exec(ctx, id, cmd)
}

func (c *countingRT) Upload(ctx context.Context, id, p string, r io.Reader) error {
	c.n.Add(1)
	return c.Runtime.Upload(ctx, id, p, r)
}

func (c *countingRT) Download(ctx context.Context, id, p string) (io.ReadCloser, error) {
	c.n.Add(1)
	return c.Runtime.Download(ctx, id, p)
}

func (c *countingRT) Remove(ctx context.Context, id, p string) error {
	c.n.Add(1)
	return c.Runtime.Remove(ctx, id, p)
}

func needHelper(t *testing.T) {
	t.Helper()
	if helperBlob()[runtime.GOARCH] == nil {
		t.Skipf("no file helper is built for %s; the shell path serves it", runtime.GOARCH)
	}
}

// TestHelperServesFileTools: the first call in a sandbox puts the helper
// there (one extra round trip, once); every later call is served by it
// in its usual number of round trips, a new backend instance over the same
// sandbox finds it, and one that vanished is put back.
func TestHelperServesFileTools(t *testing.T) {
	t.Parallel()
	needHelper(t)
	rt, err := localtest.Offline(local.WithRoot(t.TempDir()))
	require.NoError(t, err)
	t.Cleanup(func() { _ = rt.Close() })
	crt := &countingRT{Runtime: rt}
	c := sandbox.NewClient(crt)
	t.Cleanup(func() { _ = c.Close() })
	sb, err := c.Create(ctx, sandbox.CreateOptions{Timeout: 30 * time.Minute})
	require.NoError(t, err)
	t.Cleanup(func() { _ = sb.Destroy(context.Background()) })
	e := &env{sb: sb}
	home := strings.TrimSpace(e.sh(t, `printf '%s' "$HOME"`))
	e.opts.BaseDir, e.base = home+"/workspace", home+"/workspace"
	e.b, err = New(sb, e.opts)
	require.NoError(t, err)
	t.Cleanup(func() { e.b.Close() })
	trips := func(f func()) int64 {
		before := crt.n.Load()
		f()
		return crt.n.Load() - before
	}
	require.Equal(t, int64(2), trips(func() { write(t, e.b, "a/b.txt", "hello\nneedle\n") }), "first contact: the call, then the helper's upload")
	require.Equal(t, int64(0), e.b.helperRuns.Load(), "the first call ran the shell path")
	require.True(t, e.try("test -x "+helperBlob()[runtime.GOARCH].Path(helperDir(e.base))), "the helper is in the sandbox")

	ops := []struct {
		name       string
		want, runs int64 // round trips, helper runs
		f          func()
	}{
		{"read", 1, 1, func() { require.Equal(t, "     1\thello\n     2\tneedle", readText(t, e.b, "a/b.txt").Content) }},
		{"write", 1, 1, func() { write(t, e.b, "c/d/e.txt", "x") }},
		{"write_bytes", 1, 1, func() {
			w, err := e.b.WriteBytes(ctx, &backend.WriteBytesRequest{Path: "bin.dat", Data: []byte{0, 1, 2}})
			require.NoError(t, err)
			require.Nil(t, w.Error)
		}},
		{"edit", 2, 2, func() {
			r, err := e.b.Edit(ctx, &backend.EditRequest{Path: "a/b.txt", OldString: "hello", NewString: "hi"})
			require.NoError(t, err)
			require.Nil(t, r.Error)
		}},
		{"ls", 1, 1, func() {
			r, err := e.b.Ls(ctx, &backend.LsRequest{Path: "/"})
			require.NoError(t, err)
			require.Equal(t, "a/\nbin.dat\nc/", r.Text())
		}},
		{"glob", 1, 1, func() {
			r, err := e.b.Glob(ctx, &backend.GlobRequest{Pattern: "**/*.txt"})
			require.NoError(t, err)
			require.Len(t, r.Files, 2)
		}},
		{"grep", 1, 1, func() {
			r, err := e.b.Grep(ctx, &backend.GrepRequest{Pattern: "needle"})
			require.NoError(t, err)
			require.Equal(t, "a/b.txt:2:needle", r.Text())
		}},
		{"get-all", 3, 1, func() {
			r, err := e.b.GetFiles(ctx, &backend.GetFilesRequest{})
			require.NoError(t, err)
			require.Equal(t, []backend.File{{Path: "a/b.txt", Data: []byte("hi\nneedle\n")}, {Path: "bin.dat", Data: []byte{0, 1, 2}, Binary: true}, {Path: "c/d/e.txt", Data: []byte("x")}}, r.Files)
		}},
		{"read binary", 1, 1, func() { require.Equal(t, backend.CodeBinaryFile, codeOf(readText(t, e.b, "bin.dat").Error)) }},
	}
	for _, op := range ops {
		before := e.b.helperRuns.Load()
		require.Equal(t, op.want, trips(op.f), op.name)
		require.Equal(t, before+op.runs, e.b.helperRuns.Load(), "%s was served by the helper", op.name)
	}

	// A new instance over the same sandbox finds the helper.
	fresh := e.reopen(t)
	require.Equal(t, int64(1), trips(func() { require.Equal(t, "     1\tx", readText(t, fresh, "c/d/e.txt").Content) }))
	require.Equal(t, int64(1), fresh.helperRuns.Load())

	// Removed by a command: the next call takes the shell path and puts it
	// back, the one after is served by it again.
	e.sh(t, "rm -rf "+helperDir(e.base))
	before := e.b.helperRuns.Load()
	require.Equal(t, int64(2), trips(func() { require.Equal(t, "     1\tx", readText(t, e.b, "c/d/e.txt").Content) }))
	require.Equal(t, before, e.b.helperRuns.Load())
	require.Equal(t, int64(1), trips(func() { require.Equal(t, "     1\tx", readText(t, e.b, "c/d/e.txt").Content) }))
	require.Equal(t, before+1, e.b.helperRuns.Load())
}

// TestHelperUnrunnableFallsBackToShell: a helper the sandbox cannot run
// (here a script whose interpreter does not exist: execve fails as on a
// noexec mount, and the shell answers 127 where a noexec mount gives 126)
// costs nothing but the attempt: the call is answered by
// the shell path in the same round trip, and the backend stops trying.
func TestHelperUnrunnableFallsBackToShell(t *testing.T) {
	t.Parallel()
	needHelper(t)
	e := newLocal(t, Options{})
	write(t, e.b, "a.txt", "one\n")
	p := helperBlob()[runtime.GOARCH].Path(helperDir(e.base))
	e.sh(t, "printf '#!/nonexistent/interpreter\\n' > "+p+" && chmod 755 "+p)
	require.Equal(t, "     1\tone", readText(t, e.b, "a.txt").Content)
	write(t, e.b, "a.txt", "two\n")
	require.Equal(t, "     1\ttwo", readText(t, e.b, "a.txt").Content)
	e.b.mu.Lock()
	state := e.b.helperState
	e.b.mu.Unlock()
	require.Equal(t, helperOff, state)
}

// shellOnly keeps the backend to the shell path.
func (b *FilesystemBackend) shellOnly() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.helperState = helperOff
}
