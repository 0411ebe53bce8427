package interp_test

import (
	"strings"
	"testing"

	"github.com/sandboxkit/sandbox/interp"
	"github.com/stretchr/testify/require"
)

// A cell writes its own cell's status file with the sandbox's secret in
// it: the status line the host then reads makes no sense, and the error
// that quotes it has the secret redacted; the kernel, which can no longer
// be followed, is ended and restarted.
func TestHostileStatusLineIsRedacted(t *testing.T) {
	t.Parallel()
	sb := create(t, localRuntime(t))
	k := newKernel(t, sb, interp.Options{})
	ex, err := k.Run(t.Context(), `import os, sys, time
d, n = sys.argv[1], sys.modules['__main__'].State.n
open(os.path.join(d, 'ev', n + '.done'), 'w').write(os.environ['API_TOKEN'] + '\n')
time.sleep(3)`, interp.RunOptions{})
	require.Error(t, err)
	require.NotContains(t, err.Error(), token, "the secret is in Run's error")
	require.ErrorIs(t, err, interp.ErrRestarted)
	require.True(t, ex.Restarted)
	require.Equal(t, "ok\n", run(t, k, "print('ok')").Stdout)
}

// A cell replaces the kernel program it runs: the next start (a Restart,
// which promises a fresh state) runs the library's program, not the
// cell's.
func TestHostileKernelProgramNotReused(t *testing.T) {
	t.Parallel()
	sb := create(t, localRuntime(t))
	k := newKernel(t, sb, interp.Options{})
	run(t, k, `import sys
p = sys.modules['__main__'].__file__
open(p, 'w').write("import sys\nprint('planted')\nsys.exit(1)\n")`)
	require.NoError(t, k.Restart(t.Context()))
	ex := run(t, k, "x = 41\nprint(x + 1)")
	require.Equal(t, "42\n", ex.Stdout)
}

// A kernel that fails at start has the end of its log in the error, with
// the sandbox's secrets redacted (here Python's own report of a bad
// PYTHONHOME, which names it).
func TestStartFailureLogIsRedacted(t *testing.T) {
	t.Parallel()
	sb := create(t, localRuntime(t))
	_, err := interp.New(t.Context(), sb, interp.Options{Env: map[string]string{"PYTHONHOME": "/nonexistent-" + token}})
	require.Error(t, err)
	require.ErrorIs(t, err, interp.ErrDied)
	require.NotContains(t, err.Error(), token, "the secret is in the start's error")
	require.Contains(t, err.Error(), "nonexistent-", "the log's tail is not in the error")
}

// A cell that raises an exception with a huge message is reported as
// failed, its message cut and marked so, however small the result caps.
func TestHugeExceptionStillAnError(t *testing.T) {
	t.Parallel()
	sb := create(t, localRuntime(t))
	k := newKernel(t, sb, interp.Options{})
	ex, err := k.Run(t.Context(), "raise ValueError('x' * 8_000_000)", interp.RunOptions{MaxResultBytes: 1000})
	require.NoError(t, err)
	require.NotNil(t, ex.Error, "a cell that raised ValueError reports no Error")
	require.Equal(t, "ValueError", ex.Error.Name)
	require.True(t, ex.Error.Truncated)
	require.LessOrEqual(t, len(ex.Error.Value), 64<<10)
	n := 0
	for _, l := range ex.Error.Traceback {
		n += len(l)
	}
	require.LessOrEqual(t, n, 64<<10)
	require.True(t, strings.HasPrefix(ex.Error.Value, "xxxx"))
}
