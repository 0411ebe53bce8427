package interp_test

import (
	"bytes"
	"context"
	"errors"
	"image/png"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/driver"
	"github.com/sandboxkit/sandbox/internal/testpar"
	"github.com/sandboxkit/sandbox/interp"
	"github.com/sandboxkit/sandbox/provider/daytona"
	"github.com/sandboxkit/sandbox/provider/daytona/daytonafake"
	"github.com/sandboxkit/sandbox/provider/e2b"
	"github.com/sandboxkit/sandbox/provider/e2b/e2bfake"
	"github.com/sandboxkit/sandbox/provider/local"
	"github.com/sandboxkit/sandbox/provider/local/localtest"
	"github.com/sandboxkit/sandbox/sandboxtest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

// TestMain runs more tests at once than go test's default of one per CPU:
// they wait on kernels' starts, timeouts and graces far more than they
// compute. (A cell timed from Run's start that must print before its
// timeout tries again with a longer one on a host too loaded for it.)
func TestMain(m *testing.M) {
	testpar.Widen(4)
	goleak.VerifyTestMain(m)
}

// runTimedOut runs cell, which prints a line and then runs on until its
// timeout (opts.Timeout) interrupts it, and returns the execution and how
// long Run took. On a host so loaded that the timeout came before the
// line, it runs the cell once more with five times the timeout: the tests
// check what a timeout keeps of the output, and a cell that printed
// nothing tells them nothing. An error from Run fails the test.
func runTimedOut(t *testing.T, k *interp.Kernel, cell string, opts interp.RunOptions) (*interp.Execution, time.Duration) {
	t.Helper()
	for try := 0; ; try++ {
		start := time.Now()
		ex, err := k.Run(t.Context(), cell, opts)
		took := time.Since(start)
		require.NoError(t, err)
		if ex.Stdout != "" || try == 1 {
			return ex, took
		}
		t.Logf("the cell printed nothing before its %v timeout (after %v): once more with %v", opts.Timeout, took, 5*opts.Timeout)
		opts.Timeout *= 5
	}
}

// providers builds a sandbox on each provider the package is tested over:
// local at this host's best isolation level, e2b over e2bfake and daytona
// over daytonafake (both executing through provider/local).
var providers = []struct {
	name string
	new  func(t *testing.T) *sandbox.Sandbox
}{
	{"local", func(t *testing.T) *sandbox.Sandbox { return create(t, localRuntime(t)) }},
	{"e2b", func(t *testing.T) *sandbox.Sandbox {
		fake := e2bfake.New(localRuntime(t))
		t.Cleanup(fake.Close)
		rt, err := e2b.New(e2b.WithAPIKey(fake.APIKey()), e2b.WithAPIURL(fake.APIURL()), e2b.WithSandboxURL(fake.SandboxURL()))
		require.NoError(t, err)
		return create(t, rt)
	}},
	{"daytona", func(t *testing.T) *sandbox.Sandbox {
		fake := daytonafake.New(localRuntime(t))
		t.Cleanup(fake.Close)
		rt, err := daytona.New(daytona.WithAPIKey(fake.APIKey()), daytona.WithAPIURL(fake.URL()))
		require.NoError(t, err)
		t.Cleanup(func() { _ = rt.ResetTransport() })
		return create(t, rt)
	}},
}

// fullRun reports whether every check runs on every provider
// (sandboxtest.FullEnv set to 1, as CI and a release check set it).
func fullRun() bool { return os.Getenv(sandboxtest.FullEnv) == "1" }

// adapterOnly skips, on the providers other than local unless fullRun, a
// check of the kernel's own logic: the fakes execute through
// provider/local, so over them such a check takes the same path through
// the kernel as on local, and only the adapter's carrying of commands,
// bytes and contexts, which the other checks cover, is new.
func adapterOnly(t *testing.T, provider string) {
	t.Helper()
	if provider != "local" && !fullRun() {
		t.Skipf("the kernel's own logic, checked on local (%s=1 runs it on every provider)", sandboxtest.FullEnv)
	}
}

// localRuntime is the local provider the kernels run on, directly or
// behind the fakes. No cell here reaches beyond the host: its sandboxes
// get no network where the level allows it (localtest.Offline), which
// spares a pasta each.
func localRuntime(t *testing.T) *local.Runtime {
	t.Helper()
	rt, err := localtest.Offline(local.WithRoot(t.TempDir()))
	require.NoError(t, err)
	t.Cleanup(func() { rt.Close() })
	return rt
}

func create(t *testing.T, rt driver.Runtime) *sandbox.Sandbox {
	t.Helper()
	c := sandbox.NewClient(rt)
	t.Cleanup(func() { _ = c.Close() })
	sb, err := c.Create(t.Context(), sandbox.CreateOptions{Timeout: 10 * time.Minute, SecretEnv: map[string]string{"API_TOKEN": "s3cr3t-t0ken"}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = sb.Destroy(context.Background()) })
	if _, err := sb.Exec(t.Context(), sandbox.Command{Args: []string{"python3", "-c", "pass"}}); err != nil {
		t.Skipf("python3 does not run in the sandbox: %v", err)
	}
	return sb
}

func newKernel(t *testing.T, sb *sandbox.Sandbox, opts interp.Options) *interp.Kernel {
	t.Helper()
	k, err := interp.New(t.Context(), sb, opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = k.Close(context.Background()) })
	return k
}

func run(t *testing.T, k *interp.Kernel, code string) *interp.Execution {
	t.Helper()
	ex, err := k.Run(t.Context(), code, interp.RunOptions{})
	require.NoError(t, err, "cell %q", code)
	return ex
}

func TestPython(t *testing.T) {
	t.Parallel()
	for _, p := range providers {
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			sb := p.new(t)
			k := newKernel(t, sb, interp.Options{})

			t.Run("State", func(t *testing.T) {
				ex := run(t, k, "import os\nx = 40\ndef f(y):\n    return x + y\nos.makedirs('w', exist_ok=True)\nos.chdir('w')")
				require.Nil(t, ex.Error)
				assert.Empty(t, ex.Results, "a cell ending in a statement has no value")
				ex = run(t, k, "print('cwd', os.path.basename(os.getcwd()))\nf(2)")
				require.Nil(t, ex.Error)
				assert.Equal(t, "cwd w\n", ex.Stdout)
				assert.Equal(t, "42", ex.Text())
				require.Len(t, ex.Results, 1)
				assert.True(t, ex.Results[0].Main)
				assert.Equal(t, 2, ex.Count)
			})
			t.Run("UnicodeAndLargeCells", func(t *testing.T) {
				ex := run(t, k, "s = 'héllo ✓ 日本'\nprint(s)\ns")
				require.Nil(t, ex.Error)
				assert.Equal(t, "héllo ✓ 日本\n", ex.Stdout)
				assert.Equal(t, "'héllo ✓ 日本'", ex.Text())
				// Over the 64 KiB a request may take as an argument: it goes
				// by WriteFile.
				big := "blob = '" + strings.Repeat("x", 100<<10) + "'\nlen(blob)"
				ex = run(t, k, big)
				require.Nil(t, ex.Error)
				assert.Equal(t, "102400", ex.Text())
			})
			t.Run("OldEventsRemoved", func(t *testing.T) {
				adapterOnly(t, p.name)
				for range 3 {
					run(t, k, "print('x' * 1000)")
				}
				// The kernel's own files: the previous request's events and
				// this one's.
				ex := run(t, k, "import sys as _s, os as _o\nsorted(_o.listdir(_o.path.join(_s.argv[1], 'ev')), key=len)")
				require.Nil(t, ex.Error)
				assert.Len(t, strings.Split(ex.Text(), ","), 3, "files: %s", ex.Text())
			})
			t.Run("RichValue", func(t *testing.T) {
				adapterOnly(t, p.name)
				ex := run(t, k, "class T:\n    def _repr_html_(self): return '<b>hi</b>'\n    def _repr_json_(self): return {'a': 1}\n    def __repr__(self): return 'T()'\nT()")
				require.Nil(t, ex.Error)
				require.Len(t, ex.Results, 1)
				r := ex.Results[0]
				assert.Equal(t, "T()", r.Text)
				assert.Equal(t, "<b>hi</b>", r.HTML)
				assert.JSONEq(t, `{"a":1}`, string(r.JSON))
				assert.ElementsMatch(t, []string{"text/plain", "text/html", "application/json"}, r.Formats())
			})
			t.Run("Traceback", func(t *testing.T) {
				adapterOnly(t, p.name)
				ex := run(t, k, "print('before')\na = 1\nb = a / 0\nprint('after')")
				require.NotNil(t, ex.Error)
				assert.Equal(t, "ZeroDivisionError", ex.Error.Name)
				assert.Equal(t, "division by zero", ex.Error.Value)
				tb := strings.Join(ex.Error.Traceback, "")
				assert.Contains(t, tb, "line 3")
				assert.Contains(t, tb, "b = a / 0")
				assert.NotContains(t, tb, "kernel", "the kernel's own frames are left out")
				assert.Equal(t, "before\n", ex.Stdout)
				ex = run(t, k, "def (:")
				require.NotNil(t, ex.Error)
				assert.Equal(t, "SyntaxError", ex.Error.Name)
			})
			t.Run("LargeOutputInOrder", func(t *testing.T) {
				var live strings.Builder
				calls := 0
				ex, err := k.Run(t.Context(), "import sys\nfor i in range(16384):\n    sys.stdout.write('%063d\\n' % i)\nsys.stderr.write('err\\n')",
					interp.RunOptions{OnStdout: func(s string) { live.WriteString(s); calls++ }})
				require.NoError(t, err)
				require.Nil(t, ex.Error)
				require.Len(t, ex.Stdout, 1<<20)
				assert.Equal(t, ex.Stdout, live.String(), "the callback sees what is collected")
				lines := strings.Split(strings.TrimSuffix(ex.Stdout, "\n"), "\n")
				require.Len(t, lines, 16384)
				for i, l := range lines {
					if l != strings.Repeat("0", 63-len(itoa(i)))+itoa(i) {
						t.Fatalf("line %d is %q", i, l)
					}
				}
				assert.Equal(t, "err\n", ex.Stderr)
				t.Logf("1 MiB came in %d callbacks", calls)
			})
			t.Run("TimeoutKeepsState", func(t *testing.T) {
				run(t, k, "kept = 'yes'")
				ex, took := runTimedOut(t, k, "import time\nprint('start', flush=True)\ntime.sleep(60)", interp.RunOptions{Timeout: time.Second, TimeoutGrace: coopGrace})
				assert.Less(t, took, 30*time.Second)
				t.Logf("a 1 s timeout ended the cell after %v", took)
				assert.True(t, ex.TimedOut)
				assert.True(t, ex.Interrupted)
				require.NotNil(t, ex.Error)
				assert.Equal(t, "KeyboardInterrupt", ex.Error.Name)
				assert.Equal(t, "start\n", ex.Stdout)
				assert.Equal(t, "'yes'", run(t, k, "kept").Text())
			})
			t.Run("CancelInterrupts", func(t *testing.T) {
				run(t, k, "kept = 'yes'")
				ctx, cancel := context.WithCancel(t.Context())
				ex, err := k.Run(ctx, "import time\nprint('go', flush=True)\ntime.sleep(60)", interp.RunOptions{OnStdout: func(string) { cancel() }, TimeoutGrace: coopGrace})
				require.ErrorIs(t, err, context.Canceled)
				assert.Equal(t, "go\n", ex.Stdout)
				start := time.Now()
				assert.Equal(t, "'yes'", run(t, k, "kept").Text(), "the next cell runs once the interrupted one ended")
				t.Logf("the next cell came after %v", time.Since(start))
			})
			t.Run("Secrets", func(t *testing.T) {
				ex := run(t, k, "import os\nt = os.environ.get('API_TOKEN', 's3cr3t-t0ken')\nprint('tok', t[:6], t[6:], sep='')\nraise ValueError('bad ' + t)")
				assert.NotContains(t, ex.Stdout, "s3cr3t-t0ken")
				assert.Contains(t, ex.Stdout, "tok")
				require.NotNil(t, ex.Error)
				assert.NotContains(t, ex.Error.Value, "s3cr3t-t0ken")
				assert.NotContains(t, strings.Join(ex.Error.Traceback, ""), "s3cr3t-t0ken")
				ex = run(t, k, "t")
				assert.NotContains(t, ex.Text(), "s3cr3t-t0ken")
			})
			t.Run("Contexts", func(t *testing.T) {
				k2, err := k.NewContext(t.Context())
				require.NoError(t, err)
				defer k2.Close(context.Background())
				var wg sync.WaitGroup
				res := make([]*interp.Execution, 2)
				errs := make([]error, 2)
				start := time.Now()
				for i, kk := range []*interp.Kernel{k, k2} {
					wg.Add(1)
					go func() {
						defer wg.Done()
						res[i], errs[i] = kk.Run(t.Context(), "import time\nown = "+itoa(i)+"\ntime.sleep(2)\nown", interp.RunOptions{})
					}()
				}
				wg.Wait()
				require.NoError(t, errs[0])
				require.NoError(t, errs[1])
				assert.Equal(t, "0", res[0].Text())
				assert.Equal(t, "1", res[1].Text())
				t.Logf("two 2 s cells on two contexts took %v", time.Since(start))
				ex := run(t, k2, "'kept' in globals()")
				assert.Equal(t, "False", ex.Text(), "a new context does not share state")
			})
			t.Run("KilledAndRestart", func(t *testing.T) {
				adapterOnly(t, p.name)
				k3 := newKernel(t, sb, interp.Options{})
				run(t, k3, "z = 1")
				_, err := k3.Run(t.Context(), "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)", interp.RunOptions{})
				require.ErrorIs(t, err, interp.ErrDied)
				_, err = k3.Run(t.Context(), "z", interp.RunOptions{})
				require.ErrorIs(t, err, interp.ErrDied, "the next call reports the dead kernel")
				require.NoError(t, k3.Restart(t.Context()))
				ex := run(t, k3, "'z' in globals()")
				assert.Equal(t, "False", ex.Text())
				assert.Equal(t, 1, ex.Count)
				require.NoError(t, k3.Close(t.Context()))
				_, err = k3.Run(t.Context(), "1", interp.RunOptions{})
				require.ErrorIs(t, err, interp.ErrClosed)
			})
			t.Run("MatplotlibPNG", func(t *testing.T) {
				adapterOnly(t, p.name)
				if ex := run(t, k, "import importlib.util\nimportlib.util.find_spec('matplotlib') is not None"); ex.Text() != "True" {
					t.Skip("matplotlib is not installed in the sandbox: install python3-matplotlib (apt-get install -y -qq python3-matplotlib)")
				}
				ex := run(t, k, "import matplotlib.pyplot as plt\nfig = plt.figure(figsize=(4, 3), dpi=100)\nplt.plot([1, 2, 3], [1, 4, 9])\nplt.show()")
				require.Nil(t, ex.Error)
				require.Len(t, ex.Results, 1)
				img, err := png.Decode(bytes.NewReader(ex.Results[0].PNG))
				require.NoError(t, err)
				assert.Equal(t, 400, img.Bounds().Dx())
				assert.Equal(t, 300, img.Bounds().Dy())
				ex = run(t, k, "x2 = 1")
				assert.Empty(t, ex.Results, "an unchanged figure is not shown again")
				ex = run(t, k, "plt.title('changed')")
				require.Len(t, ex.Results, 2, "the changed figure and the value")
			})
		})
	}
}

func TestBadInput(t *testing.T) {
	t.Parallel()
	_, err := interp.New(t.Context(), nil, interp.Options{})
	require.ErrorContains(t, err, "sandbox is nil")
	sb := create(t, localRuntime(t))
	_, err = interp.New(t.Context(), sb, interp.Options{Language: "cobol"})
	require.ErrorContains(t, err, `"cobol"`)
	assert.Equal(t, sandbox.InvalidArgument, sandbox.CodeOf(err))
	k := newKernel(t, sb, interp.Options{})
	_, err = k.Run(t.Context(), "1", interp.RunOptions{Timeout: -time.Second})
	require.ErrorContains(t, err, "Timeout")
	require.False(t, errors.Is(err, interp.ErrDied))
}

func itoa(i int) string { return strconv.Itoa(i) }

// coopGrace is the TimeoutGrace of the tests of cells that do end on their
// interrupt: wide enough that a loaded host never mistakes one for a cell
// that ignores it (which TestTimeoutEndsCellForSure covers).
const coopGrace = 15 * time.Second

func TestBash(t *testing.T) {
	t.Parallel()
	for _, p := range providers {
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			adapterOnly(t, p.name) // the adapters carry its calls as TestPython's
			sb := p.new(t)
			k := newKernel(t, sb, interp.Options{Language: interp.Bash})
			ex := run(t, k, "x=41\ngreet() { echo \"hi $1\"; }\nmkdir -p wd && cd wd\nexport E=e1")
			require.Nil(t, ex.Error)
			ex = run(t, k, "greet $((x + 1))\nbasename \"$PWD\"\nsh -c 'echo $E'\necho oops >&2")
			require.Nil(t, ex.Error)
			assert.Equal(t, "hi 42\nwd\ne1\n", ex.Stdout)
			assert.Equal(t, "oops\n", ex.Stderr)
			assert.Equal(t, 2, ex.Count)

			ex = run(t, k, "echo partial\nfalse")
			require.NotNil(t, ex.Error, "a cell's non-zero status is its error")
			assert.Equal(t, "ExitStatus", ex.Error.Name)
			assert.Equal(t, "1", ex.Error.Value)
			assert.Equal(t, "partial\n", ex.Stdout)

			ex = run(t, k, "sleep 0.2 &\nwait\necho waited")
			assert.Equal(t, "waited\n", ex.Stdout, "a cell's own wait does not wait for the kernel's helpers")

			var live strings.Builder
			ex, err := k.Run(t.Context(), "head -c 1048576 /dev/zero | tr '\\0' 'a'; echo", interp.RunOptions{OnStdout: func(s string) { live.WriteString(s) }})
			require.NoError(t, err)
			assert.Equal(t, strings.Repeat("a", 1<<20)+"\n", ex.Stdout)
			assert.Equal(t, ex.Stdout, live.String())

			ex, took := runTimedOut(t, k, "echo start\nsleep 60\necho not-reached", interp.RunOptions{Timeout: time.Second, TimeoutGrace: coopGrace})
			t.Logf("a 1 s timeout ended the bash cell after %v", took)
			assert.True(t, ex.TimedOut)
			assert.Equal(t, "start\n", ex.Stdout)
			assert.Equal(t, "41 wd", run(t, k, "echo $x $(basename $PWD)").Stdout[:5], "state survives the interrupt")
		})
	}
}

// Output a cell writes reaches OnStdout while the cell still runs, even
// when the kernel is too busy to announce it: a Node cell's loop holds the
// kernel's only thread, so output written in a cell's first 200 ms (when
// the kernel holds back its wake-up, sparing a quick cell's poll a round
// trip) was announced by nothing, and reached the caller only when the
// poll ended 25 s later. The client looks at the events on each tick of
// the kernel's clock (once a second): the output must arrive within 5 s.
func TestOutputWhileCellIsBusy(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		lang interp.Language
		code string
	}{
		{"python", interp.Python, "print('go', flush=True)\nwhile True: pass"},
		{"node", interp.Node, "console.log('go'); for (;;) {}"},
	} {
		for _, p := range providers {
			t.Run(c.name+"/"+p.name, func(t *testing.T) {
				t.Parallel()
				adapterOnly(t, p.name)
				sb := p.new(t)
				if c.lang == interp.Node {
					if _, err := sb.Exec(t.Context(), sandbox.Command{Args: []string{"node", "-e", ""}}); err != nil {
						t.Skipf("node does not run in the sandbox: %v", err)
					}
				}
				k := newKernel(t, sb, interp.Options{Language: c.lang})
				ctx, cancel := context.WithCancel(t.Context())
				defer cancel()
				var first time.Duration
				start := time.Now()
				_, err := k.Run(ctx, c.code, interp.RunOptions{Timeout: 30 * time.Second, TimeoutGrace: coopGrace,
					OnStdout: func(string) {
						if first == 0 {
							first = time.Since(start)
						}
						cancel()
					}})
				if first == 0 {
					t.Fatalf("the cell's output never reached OnStdout while it ran (30 s; Run: %v)", err)
				}
				require.ErrorIs(t, err, context.Canceled)
				t.Logf("output reached OnStdout %v after Run began", first.Round(time.Millisecond))
				if first > 5*time.Second {
					t.Errorf("the cell's output reached OnStdout %v after Run began: want within 5 s (a tick of the kernel's clock and a poll)", first)
				}
				assert.Equal(t, "1", run(t, k, "1").Text(), "the kernel serves the next cell")
			})
		}
	}
}

func TestNode(t *testing.T) {
	t.Parallel()
	for _, p := range providers[:2] {
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			adapterOnly(t, p.name) // the adapters carry its calls as TestPython's
			sb := p.new(t)
			if _, err := sb.Exec(t.Context(), sandbox.Command{Args: []string{"node", "-e", ""}}); err != nil {
				t.Skipf("node does not run in the sandbox: %v", err)
			}
			k := newKernel(t, sb, interp.Options{Language: interp.Node})
			ex := run(t, k, "var x = 40\nfunction f(y) { return x + y }\nconsole.log('hi', 'there')")
			require.Nil(t, ex.Error)
			assert.Equal(t, "hi there\n", ex.Stdout)
			ex = run(t, k, "f(2)")
			require.Nil(t, ex.Error)
			assert.Equal(t, "42", ex.Text())
			assert.Equal(t, 2, ex.Count)
			ex = run(t, k, "null.x")
			require.NotNil(t, ex.Error)
			assert.Equal(t, "TypeError", ex.Error.Name)
			assert.Contains(t, strings.Join(ex.Error.Traceback, ""), "<cell-3>:1")
			ex, took := runTimedOut(t, k, "console.log('start'); for (;;) {}", interp.RunOptions{Timeout: time.Second, TimeoutGrace: coopGrace})
			t.Logf("a 1 s timeout ended the node cell after %v", took)
			assert.True(t, ex.TimedOut)
			assert.Equal(t, "start\n", ex.Stdout)
			ctx, cancel := context.WithCancel(t.Context())
			_, err := k.Run(ctx, "console.log('go'); for (;;) {}", interp.RunOptions{OnStdout: func(string) { cancel() }, TimeoutGrace: coopGrace})
			require.ErrorIs(t, err, context.Canceled)
			assert.Equal(t, "41", run(t, k, "x + 1").Text(), "state survives interrupts")
		})
	}
}
