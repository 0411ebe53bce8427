package interp_test

import (
	"bytes"
	"context"
	"errors"
	"image/png"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/interp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const token = "s3cr3t-t0ken" // the sandbox's secret value (see create)

func hasMatplotlib(t *testing.T, k *interp.Kernel) bool {
	t.Helper()
	return run(t, k, "import importlib.util\nimportlib.util.find_spec('matplotlib') is not None").Text() == "True"
}

// An event line longer than what one poll returns (4 MiB) is read across
// polls: a value or a figure of any size within the caps comes back whole.
func TestEventsLargerThanAPoll(t *testing.T) {
	t.Parallel()
	sb := create(t, localRuntime(t))
	k := newKernel(t, sb, interp.Options{})
	t.Run("Value", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
		defer cancel()
		start := time.Now()
		ex, err := k.Run(ctx, "'x' * (6 << 20)", interp.RunOptions{})
		require.NoError(t, err)
		t.Logf("a 6 MiB value came back in %v", time.Since(start))
		require.Nil(t, ex.Error)
		assert.False(t, ex.ResultsTruncated)
		require.Equal(t, 6<<20+2, len(ex.Text()))
		assert.Equal(t, "'"+strings.Repeat("x", 6<<20)+"'", ex.Text())
	})
	t.Run("Figure", func(t *testing.T) {
		if !hasMatplotlib(t, k) {
			t.Skip("matplotlib is not installed in the sandbox: install python3-matplotlib (apt-get install -y -qq python3-matplotlib)")
		}
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
		defer cancel()
		// Noise does not compress: a PNG of about 4.3 MB, 5.8 MB in base64.
		ex, err := k.Run(ctx, "import numpy as np, matplotlib.pyplot as plt\nfig = plt.figure(figsize=(12, 12), dpi=100)\n"+
			"fig.figimage(np.random.default_rng(1).integers(0, 255, (1200, 1200, 3), dtype=np.uint8))\nNone", interp.RunOptions{})
		require.NoError(t, err)
		require.Nil(t, ex.Error)
		require.Len(t, ex.Results, 1)
		p := ex.Results[0].PNG
		assert.Greater(t, len(p)*4/3, 4<<20, "the figure's event is larger than a poll")
		img, err := png.Decode(bytes.NewReader(p))
		require.NoError(t, err)
		assert.Equal(t, 1200, img.Bounds().Dx())
		assert.Equal(t, 1200, img.Bounds().Dy())
		run(t, k, "plt.close('all')")
	})
	t.Run("Node", func(t *testing.T) {
		if _, err := sb.Exec(t.Context(), sandbox.Command{Args: []string{"node", "-e", ""}}); err != nil {
			t.Skipf("node does not run in the sandbox: %v", err)
		}
		kn := newKernel(t, sb, interp.Options{Language: interp.Node})
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
		defer cancel()
		ex, err := kn.Run(ctx, "({ _repr_html_: () => '<p>' + 'h'.repeat(6 << 20) })", interp.RunOptions{})
		require.NoError(t, err)
		require.Nil(t, ex.Error)
		require.Len(t, ex.Results, 1)
		assert.Equal(t, "<p>"+strings.Repeat("h", 6<<20), ex.Results[0].HTML)
	})
}

// A cell that catches or ignores its interrupt is still ended by Timeout:
// its kernel is killed after the grace and a fresh one started, which the
// error and Execution.Restarted report; the next cell runs on it.
func TestTimeoutEndsCellForSure(t *testing.T) {
	t.Parallel()
	const timeout = 2 * time.Second
	// The goal: the timeout, the grace and a kernel start; 5 times that.
	const bound = 5 * (timeout + interp.DefaultTimeoutGrace + 2*time.Second)
	cases := []struct {
		lang         interp.Language
		setup, cell  string
		check, fresh string
	}{
		{interp.Python, "kept = 1", "import time\nprint('start', flush=True)\nwhile True:\n    try:\n        time.sleep(0.1)\n    except:\n        pass",
			"'kept' in globals()", "False"},
		{interp.Bash, "kept=1", "echo start\ntrap '' INT\nwhile :; do sleep 0.1; done", "echo ${kept:-gone}", "gone\n"},
		{interp.Node, "var kept = 1", "console.log('start'); require('child_process').execSync(\"trap '' INT; sleep 60\")",
			"typeof kept", "'undefined'"},
	}
	for i, tc := range cases {
		for _, p := range providers {
			if p.name != "local" && i > 0 {
				continue // the path is the same; Python shows it on every provider
			}
			t.Run(string(tc.lang)+"/"+p.name, func(t *testing.T) {
				t.Parallel()
				sb := p.new(t)
				if tc.lang == interp.Node {
					if _, err := sb.Exec(t.Context(), sandbox.Command{Args: []string{"node", "-e", ""}}); err != nil {
						t.Skipf("node does not run in the sandbox: %v", err)
					}
				}
				k := newKernel(t, sb, interp.Options{Language: tc.lang})
				// The cell prints a line and then ignores the interrupt; on
				// a host so loaded that the line was not out when the
				// timeout came, the cell runs again with a timeout four
				// times as long (a fresh kernel: the setup again).
				var ex *interp.Execution
				for _, timeout := range []time.Duration{timeout, 4 * timeout} {
					run(t, k, tc.setup)
					bound := 5 * (timeout + interp.DefaultTimeoutGrace + 2*time.Second)
					ctx, cancel := context.WithTimeout(t.Context(), 2*bound)
					defer cancel()
					start := time.Now()
					var err error
					ex, err = k.Run(ctx, tc.cell, interp.RunOptions{Timeout: timeout})
					took := time.Since(start)
					t.Logf("a %v timeout ended the %s cell after %v: %v", timeout, tc.lang, took, err)
					require.ErrorIs(t, err, interp.ErrRestarted)
					require.NoError(t, ctx.Err(), "Run returned before its ctx ended")
					assert.Less(t, took, bound)
					assert.GreaterOrEqual(t, took, timeout+interp.DefaultTimeoutGrace)
					require.NotNil(t, ex)
					if ex.Stdout != "" {
						break
					}
				}
				assert.True(t, ex.TimedOut)
				assert.True(t, ex.Restarted)
				assert.True(t, ex.Interrupted)
				assert.Equal(t, "start\n", ex.Stdout, "output seen before the kill is kept")
				start := time.Now()
				ex = run(t, k, tc.check)
				t.Logf("the next cell took %v", time.Since(start))
				assert.Equal(t, tc.fresh, ex.Text()+ex.Stdout, "the next cell runs on a fresh kernel")
				assert.Equal(t, 1, ex.Count)
			})
		}
	}
	t.Run("ContextEnds", func(t *testing.T) {
		t.Parallel()
		sb := create(t, localRuntime(t))
		k := newKernel(t, sb, interp.Options{})
		run(t, k, "kept = 1")
		ctx, cancel := context.WithTimeout(t.Context(), timeout)
		defer cancel()
		start := time.Now()
		_, err := k.Run(ctx, "import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True:\n    time.sleep(0.1)", interp.RunOptions{})
		took := time.Since(start)
		t.Logf("the cell's ctx ended; Run returned after %v: %v", took, err)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		require.ErrorIs(t, err, interp.ErrRestarted)
		assert.Less(t, took, bound)
		ex := run(t, k, "'kept' in globals()")
		assert.Equal(t, "False", ex.Text())
		assert.Equal(t, 1, ex.Count)
	})
	t.Run("Cooperative", func(t *testing.T) {
		t.Parallel()
		sb := create(t, localRuntime(t))
		k := newKernel(t, sb, interp.Options{})
		run(t, k, "kept = 1")
		ctx, cancel := context.WithTimeout(t.Context(), timeout)
		defer cancel()
		ex, err := k.Run(ctx, "import time\ntime.sleep(60)", interp.RunOptions{TimeoutGrace: coopGrace})
		require.ErrorIs(t, err, context.DeadlineExceeded)
		require.False(t, errors.Is(err, interp.ErrRestarted), "a cell that ends on its interrupt keeps its kernel")
		assert.True(t, ex.Interrupted)
		assert.False(t, ex.Restarted)
		assert.Equal(t, "1", run(t, k, "kept").Text())
	})
}

// heapPeak runs f while sampling the heap, and returns how far the heap
// grew above where it was before.
func heapPeak(f func()) uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	base, peak := m.HeapAlloc, m.HeapAlloc
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			peak = max(peak, m.HeapAlloc)
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	}()
	f()
	close(stop)
	wg.Wait()
	return peak - base
}

// heapChildEnv, set to 1, makes TestOutputHeapBounded do its checks in
// this process: it is set in the child process the test starts.
const heapChildEnv = "SANDBOXKIT_INTERP_HEAP_CHILD"

// heapCellBound bounds the wait for each cell of the heap checks: a cell
// whose 33 MiB of events the host reads and redacts under -race, while the
// package's other tests run beside its process, took over 2 minutes on a
// host at load 170.
const heapCellBound = 5 * time.Minute

// The host's heap stays bounded whatever a cell prints or its kernel sends.
// The heap is the process's, and a test running beside the checks would be
// counted as their growth: they run in a child process of their own (this
// test binary, running this test alone), so that the package's other
// tests can run beside it here.
func TestOutputHeapBounded(t *testing.T) {
	if os.Getenv(heapChildEnv) != "1" {
		t.Parallel()
		args := []string{"-test.run=^TestOutputHeapBounded$", "-test.count=1", "-test.v"}
		if dl, ok := t.Deadline(); ok {
			args = append(args, "-test.timeout="+time.Until(dl).String())
		}
		cmd := exec.CommandContext(t.Context(), os.Args[0], args...)
		cmd.Env = append(os.Environ(), heapChildEnv+"=1")
		out, err := cmd.CombinedOutput()
		t.Logf("the child process's output:\n%s", out)
		if err != nil {
			t.Fatalf("the heap checks in a child process: %v", err)
		}
		if bytes.Contains(out, []byte("--- SKIP: TestOutputHeapBounded ")) {
			t.Skip("the child process skipped the checks (see its output)")
		}
		for _, sub := range []string{"Heap", "KernelPastItsCaps"} {
			if !bytes.Contains(out, []byte("--- PASS: TestOutputHeapBounded/"+sub+" ")) {
				t.Errorf("the child process did not pass TestOutputHeapBounded/%s", sub)
			}
		}
		return
	}
	sb := create(t, localRuntime(t))
	k := newKernel(t, sb, interp.Options{})
	t.Run("Heap", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), heapCellBound)
		defer cancel()
		var ex *interp.Execution
		var err error
		grew := heapPeak(func() {
			ex, err = k.Run(ctx, "import sys\nfor i in range(1024):\n    sys.stdout.write('y' * 65535 + '\\n')", interp.RunOptions{})
		})
		require.NoError(t, err)
		t.Logf("a cell printing 64 MiB grew the heap by %d MiB at most", grew>>20)
		require.Len(t, ex.Stdout, interp.DefaultMaxOutput)
		assert.True(t, ex.StdoutTruncated)
		assert.False(t, ex.StderrTruncated)
		assert.Equal(t, strings.Repeat(strings.Repeat("y", 65535)+"\n", interp.DefaultMaxOutput>>16), ex.Stdout)
		assert.Less(t, grew, uint64(80<<20), "the heap grew by %d MiB", grew>>20)
	})
	t.Run("KernelPastItsCaps", func(t *testing.T) {
		// The cell's code reaches the kernel's own event writer: Run keeps
		// its caps whatever the kernel sends.
		ctx, cancel := context.WithTimeout(t.Context(), heapCellBound)
		defer cancel()
		var ex *interp.Execution
		var err error
		grew := heapPeak(func() {
			ex, err = k.Run(ctx, "import sys, base64\nkm = sys.modules['__main__']\n"+
				"km.emit({'type': 'result', 'main': True, 'data': {'text/plain': 'q' * (24 << 20)}})\n"+
				"km.emit({'type': 'result', 'main': False, 'data': {'text/plain': 'r' * (3 << 20)}})\n"+
				"km.emit({'type': 'stdout', 'data': base64.b64encode(b'w' * (3 << 20)).decode()})\n"+
				"km.emit({'type': 'stdout', 'data': base64.b64encode(b'v' * (3 << 20)).decode()})",
				interp.RunOptions{MaxOutput: 1 << 20, MaxResultBytes: 1 << 20})
		})
		require.NoError(t, err)
		t.Logf("a kernel sending 33 MiB past the caps grew the heap by %d MiB at most", grew>>20)
		require.Len(t, ex.Results, 1, "the 24 MiB result is dropped")
		assert.Equal(t, strings.Repeat("r", 1<<20), ex.Results[0].Text)
		assert.True(t, ex.ResultsTruncated)
		assert.Equal(t, strings.Repeat("w", 1<<20), ex.Stdout)
		assert.True(t, ex.StdoutTruncated)
		assert.Less(t, grew, uint64(64<<20))
	})
}

// What a cell prints, and what it displays, is kept up to caps: the host's
// memory stays bounded whatever the cell does.
func TestOutputBounded(t *testing.T) {
	t.Parallel()
	sb := create(t, localRuntime(t))
	k := newKernel(t, sb, interp.Options{})
	t.Run("CallbackGetsAll", func(t *testing.T) {
		var live strings.Builder
		ex, err := k.Run(t.Context(), "import sys\nprint('o' * 5000)\nsys.stderr.write('e' * 3000)", interp.RunOptions{MaxOutput: 1000,
			OnStdout: func(s string) { live.WriteString(s) }})
		require.NoError(t, err)
		assert.Equal(t, strings.Repeat("o", 1000), ex.Stdout)
		assert.True(t, ex.StdoutTruncated)
		assert.Equal(t, strings.Repeat("e", 1000), ex.Stderr)
		assert.True(t, ex.StderrTruncated)
		assert.Equal(t, strings.Repeat("o", 5000)+"\n", live.String(), "the callback gets what is past the cap")
	})
	t.Run("SecretAtTheCut", func(t *testing.T) {
		ex, err := k.Run(t.Context(), "import os\nt = os.environ['API_TOKEN']\nprint('a' * 95 + t + 'b' * 200000)", interp.RunOptions{MaxOutput: 100})
		require.NoError(t, err)
		assert.True(t, ex.StdoutTruncated)
		assert.Equal(t, strings.Repeat("a", 95), ex.Stdout, "the secret the cut went through is left out whole")
		ex, err = k.Run(t.Context(), "'a' * 95 + t", interp.RunOptions{MaxResultBytes: 100})
		require.NoError(t, err)
		assert.NotContains(t, ex.Text(), "s3c")
		assert.Equal(t, "'"+strings.Repeat("a", 95)+"[RED", ex.Text(), "redacted before it is cut")
		assert.True(t, ex.ResultsTruncated)
		// A line past the kernel's margin: the cut is the kernel's.
		ex, err = k.Run(t.Context(), "print('c' * 1000 + t * 10000)", interp.RunOptions{MaxOutput: 1010})
		require.NoError(t, err)
		assert.NotContains(t, ex.Stdout, "s3c")
		assert.Equal(t, strings.Repeat("c", 1000), ex.Stdout)
	})
	t.Run("LongLineInPieces", func(t *testing.T) {
		// One 1.3 MB line dense with the secret is handed on in pieces,
		// none of which holds a part of it.
		var live strings.Builder
		calls := 0
		ex, err := k.Run(t.Context(), "print((t + 'x') * 100000)", interp.RunOptions{OnStdout: func(s string) {
			calls++
			assert.NotContains(t, s, "s3c")
			live.WriteString(s)
		}})
		require.NoError(t, err)
		want := strings.Repeat("[REDACTED]x", 100000) + "\n"
		assert.Equal(t, want, live.String())
		assert.Equal(t, want, ex.Stdout)
		assert.Greater(t, calls, 1)
		t.Logf("a 1.3 MB line came in %d pieces", calls)
	})
	t.Run("Results", func(t *testing.T) {
		ex, err := k.Run(t.Context(), "'z' * 5000", interp.RunOptions{MaxResultBytes: 1000})
		require.NoError(t, err)
		require.Len(t, ex.Results, 1)
		assert.Equal(t, "'"+strings.Repeat("z", 999), ex.Text())
		assert.True(t, ex.Results[0].Truncated)
		assert.True(t, ex.ResultsTruncated)
		ex, err = k.Run(t.Context(), "class H:\n    def _repr_html_(self): return '<p>' + 'h' * 5000\n    def __repr__(self): return 'H()'\nH()",
			interp.RunOptions{MaxResultBytes: 1000})
		require.NoError(t, err)
		require.Len(t, ex.Results, 1)
		assert.Equal(t, "H()", ex.Text())
		assert.Empty(t, ex.Results[0].HTML, "a form that does not fit is dropped whole")
		assert.True(t, ex.ResultsTruncated)
		if !hasMatplotlib(t, k) {
			t.Skip("matplotlib is not installed in the sandbox: install python3-matplotlib (apt-get install -y -qq python3-matplotlib)")
		}
		ex, err = k.Run(t.Context(), "import matplotlib.pyplot as plt\nfor i in range(4):\n    plt.figure(figsize=(1, 1))\n'v'",
			interp.RunOptions{MaxResults: 2})
		require.NoError(t, err)
		require.Len(t, ex.Results, 2, "the value and one figure")
		assert.Equal(t, "'v'", ex.Text())
		assert.NotEmpty(t, ex.Results[1].PNG)
		assert.True(t, ex.ResultsTruncated)
		run(t, k, "plt.close('all')")
	})
	t.Run("Bash", func(t *testing.T) {
		kb := newKernel(t, sb, interp.Options{Language: interp.Bash})
		ex, err := kb.Run(t.Context(), "head -c 67108864 /dev/zero | tr '\\0' y; echo err >&2", interp.RunOptions{MaxOutput: 1 << 20})
		require.NoError(t, err)
		assert.Equal(t, strings.Repeat("y", 1<<20), ex.Stdout)
		assert.True(t, ex.StdoutTruncated)
		assert.Equal(t, "err\n", ex.Stderr)
		assert.False(t, ex.StderrTruncated)
	})
	t.Run("BadInput", func(t *testing.T) {
		for name, o := range map[string]interp.RunOptions{
			"MaxOutput": {MaxOutput: -1}, "MaxResults": {MaxResults: -1},
			"MaxResultBytes": {MaxResultBytes: -1}, "TimeoutGrace": {TimeoutGrace: -1},
		} {
			_, err := k.Run(t.Context(), "1", o)
			require.ErrorContains(t, err, name)
			assert.Equal(t, sandbox.InvalidArgument, sandbox.CodeOf(err))
		}
	})
}
