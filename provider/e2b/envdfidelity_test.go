package e2b_test

import (
	"io"
	"time"

	"github.com/sandboxkit/sandbox/driver"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/provider/e2b/e2bfake"
)

// An argv over the kernel's limit (ARG_MAX in all, though every argument
// is under 128 KiB) is refused by envd before anything starts; the
// adapter's error is InvalidArgument and bounded: it names the size and
// the limit, never the megabytes of the command envd echoes. The portable
// layer refuses such a command first (sandboxtest Exec/PathLimits), so the
// adapter is driven directly here, as another caller of the driver would.
func TestExecOverArgMaxIsBoundedInvalidArgument(t *testing.T) {
	t.Parallel()
	e := newMemoryEnv(t)
	ctx := ctxT(t)
	sb, err := e.client.Create(ctx, sandbox.CreateOptions{})
	require.NoError(t, err)
	defer sb.Destroy(ctx)

	args := []string{"echo"}
	for range 24 {
		args = append(args, strings.Repeat("a", 100<<10))
	}
	_, err = e.rt.Exec(ctx, sb.ID(), &driver.Command{Args: args, Dir: sb.Home(), Stdout: io.Discard, Stderr: io.Discard, Timeout: time.Minute})
	require.Error(t, err, "an argv of 2.4 MB ran")
	assert.Equal(t, sandbox.InvalidArgument, sandbox.CodeOf(err), "%.300s", err)
	assert.Less(t, len(err.Error()), 1024, "the error carries the command: %.300s…", err)
	assert.Contains(t, err.Error(), "argument list too long")
	assert.Contains(t, err.Error(), "2457", "the error names the command's size: %v", err)
}

// A Shell line runs in bash, as envd runs "/bin/bash -l -c": bash's
// printf writes the bytes an \x escape names, sh's does not.
func TestShellLineRunsInBash(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash on this host")
	}
	e := newEnv(t)
	ctx := ctxT(t)
	sb, err := e.client.Create(ctx, sandbox.CreateOptions{})
	require.NoError(t, err)
	defer sb.Destroy(ctx)

	res, err := sb.Exec(ctx, sandbox.Command{Shell: `printf '\x00\xff\xfe abc'`})
	require.NoError(t, err)
	assert.Equal(t, "\x00\xff\xfe abc", string(res.Stdout))
	res, err = sb.Exec(ctx, sandbox.Command{Shell: `[[ -n x ]] && echo "$BASH_VERSION" | cut -c1`})
	require.NoError(t, err)
	assert.NotEmpty(t, strings.TrimSpace(string(res.Stdout)), "BASH_VERSION is empty: not bash")
}

// A program that does not exist exits 127 with envd's message (its
// wrapper's nice(1) names it), over both backends.
func TestMissingProgramAnswersAsEnvd(t *testing.T) {
	t.Parallel()
	for name, newE := range map[string]func(*testing.T, ...e2bfake.Option) *env{"memory": newMemoryEnv, "local": newEnv} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := newE(t)
			ctx := ctxT(t)
			sb, err := e.client.Create(ctx, sandbox.CreateOptions{})
			require.NoError(t, err)
			defer sb.Destroy(ctx)
			res, err := sb.Exec(ctx, sandbox.Command{Args: []string{"no-such-program", "x"}})
			require.NoError(t, err)
			assert.Equal(t, 127, res.ExitCode)
			assert.Equal(t, "/usr/bin/nice: 'no-such-program': No such file or directory\n", string(res.Stderr))
			res, err = sb.Exec(ctx, sandbox.Command{Args: []string{"/no/such/program"}})
			require.NoError(t, err)
			assert.Equal(t, 127, res.ExitCode)
			assert.Equal(t, "/usr/bin/nice: '/no/such/program': No such file or directory\n", string(res.Stderr))
			// A program that exists still gets its arguments as given.
			res, err = sb.Exec(ctx, sandbox.Command{Args: []string{"printf", "%s|", "a b", "$HOME", "'"}})
			require.NoError(t, err)
			assert.Equal(t, "a b|$HOME|'|", string(res.Stdout))
			if name == "local" { // provider/memory runs no program by its path
				res, err = sb.Exec(ctx, sandbox.Command{Args: []string{"/usr/bin/printf", "ok"}})
				require.NoError(t, err)
				assert.Equal(t, "ok", string(res.Stdout), "stderr %q", res.Stderr)
			}
		})
	}
}
