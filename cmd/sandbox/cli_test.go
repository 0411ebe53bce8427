package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"go.uber.org/goleak"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/internal/lostcreate"
	"github.com/sandboxkit/sandbox/internal/testpar"
	"github.com/sandboxkit/sandbox/sandboxtest"
)

// The API keys of the package's fakes (see TestMain), new each run.
var (
	testE2BKey     = "e2b_" + randomHex(20)
	testDaytonaKey = "dtn_" + randomHex(16)
)

// TestMain runs more tests at once than go test's default of one per CPU:
// they wait on the tool's processes, sandboxes and fakes far more than
// they compute.
func TestMain(m *testing.M) {
	testpar.Widen(4)
	// The providers read their API keys from the process environment:
	// the package's e2b and daytona fakes all take these, set once, so
	// that a test that makes fakes need not set them (t.Setenv would keep
	// it from running beside the others).
	os.Setenv("E2B_API_KEY", testE2BKey)
	os.Setenv("DAYTONA_API_KEY", testDaytonaKey)
	// A hung create makes the tool wait for the providers' search for the
	// sandbox it may have made (TestCLICallTimeout): 3 s, not 15, is
	// enough to show that it waits.
	lostcreate.Budget = 3 * time.Second
	goleak.VerifyTestMain(m, goleak.Cleanup(func(int) {
		if binDir != "" {
			os.RemoveAll(binDir)
		}
	}))
}

// providers returns the URLs the CLI tests run over: a named memory
// provider (shared by the invocations of one test) and a local provider on
// a fresh root. Sandboxes left over are destroyed at cleanup.
func providers(t *testing.T) map[string]string {
	t.Helper()
	urls := map[string]string{
		"memory": "memory://" + strings.ReplaceAll(t.Name(), "/", "-") + "-" + randomHex(4),
	}
	if runtime.GOOS == "linux" {
		urls["local"] = "local://" + t.TempDir()
	}
	for _, u := range urls {
		t.Cleanup(func() { destroyAll(t, u) })
	}
	return urls
}

func destroyAll(t *testing.T, url string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := sandbox.Open(ctx, url)
	if err != nil {
		t.Errorf("cleanup: open %s: %v", url, err)
		return
	}
	defer c.Close()
	for info, err := range c.List(ctx, sandbox.ListOptions{}) {
		if err != nil {
			t.Errorf("cleanup: list: %v", err)
			return
		}
		if err := c.Destroy(ctx, info.ID); err != nil {
			t.Errorf("cleanup: destroy %s: %v", info.ID, err)
		}
	}
}

// cliRun is one invocation's outcome.
type cliRun struct {
	stdout, stderr string
	code           int
}

// invoke runs the tool in process with url, stdin and args.
func invoke(t *testing.T, url string, stdin io.Reader, args ...string) cliRun {
	t.Helper()
	var out, errb bytes.Buffer
	a := newApp(stdin, &out, &errb)
	a.getenv = func(string) string { return "" }
	return invokeApp(t, a, url, args...)
}

func invokeApp(t *testing.T, a *app, url string, args ...string) cliRun {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	code := a.run(ctx, append([]string{"--url", url}, args...))
	r := cliRun{code: code}
	if b, ok := a.stdout.(*bytes.Buffer); ok {
		r.stdout = b.String()
	}
	if b, ok := a.stderr.(*bytes.Buffer); ok {
		r.stderr = b.String()
	}
	return r
}

// fullRun reports whether SANDBOXTEST_FULL=1 (sandboxtest.FullEnv, set by
// CI) asks for full-size data.
func fullRun() bool { return os.Getenv(sandboxtest.FullEnv) == "1" }

func mustOK(t *testing.T, r cliRun, what string) cliRun {
	t.Helper()
	if r.code != 0 {
		t.Fatalf("%s: exit %d, stderr %q", what, r.code, r.stderr)
	}
	return r
}

func createSandbox(t *testing.T, url string, args ...string) string {
	t.Helper()
	r := mustOK(t, invoke(t, url, nil, append([]string{"create"}, args...)...), "create")
	id := strings.TrimSpace(r.stdout)
	if id == "" || strings.Contains(id, "\n") {
		t.Fatalf("create printed %q, want one id", r.stdout)
	}
	return id
}

func TestCLILifecycle(t *testing.T) {
	t.Parallel()
	for name, url := range providers(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			// create --json prints the sandbox; plain create prints its id.
			r := mustOK(t, invoke(t, url, nil, "create", "--json", "--label", "team=cli", "--label", "run=1", "--env", "GREETING=hi"), "create --json")
			var created infoJSON
			if err := json.Unmarshal([]byte(r.stdout), &created); err != nil {
				t.Fatalf("create --json: %v in %q", err, r.stdout)
			}
			if created.ID == "" || created.State != "running" || created.Labels["team"] != "cli" || created.Labels["run"] != "1" {
				t.Errorf("create --json = %+v", created)
			}
			other := createSandbox(t, url, "--label", "team=other")
			id := created.ID

			// ls filters by label and prints a table with a header.
			r = mustOK(t, invoke(t, url, nil, "ls", "--json", "--label", "team=cli"), "ls --json")
			var list []infoJSON
			if err := json.Unmarshal([]byte(r.stdout), &list); err != nil {
				t.Fatalf("ls --json: %v in %q", err, r.stdout)
			}
			if len(list) != 1 || list[0].ID != id {
				t.Errorf("ls --label team=cli = %+v, want only %s", list, id)
			}
			r = mustOK(t, invoke(t, url, nil, "ls"), "ls")
			lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
			if len(lines) != 3 || !strings.HasPrefix(lines[0], "ID") || !strings.Contains(r.stdout, id) || !strings.Contains(r.stdout, other) {
				t.Errorf("ls table:\n%s", r.stdout)
			}
			r = mustOK(t, invoke(t, url, nil, "ls", "--json", "--state", "paused"), "ls --state paused")
			if strings.TrimSpace(r.stdout) != "[]" {
				t.Errorf("ls --state paused = %s, want []", r.stdout)
			}

			// The env given at create reaches commands.
			r = mustOK(t, invoke(t, url, nil, "exec", id, "--", "sh", "-c", `echo "$GREETING"`), "exec env")
			if r.stdout != "hi\n" {
				t.Errorf("exec printed %q, want hi", r.stdout)
			}

			// pause, resume, info.
			mustOK(t, invoke(t, url, nil, "pause", id), "pause")
			r = mustOK(t, invoke(t, url, nil, "info", "--json", id), "info")
			var info infoJSON
			if err := json.Unmarshal([]byte(r.stdout), &info); err != nil || info.State != "paused" {
				t.Errorf("info after pause: %v %+v", err, info)
			}
			mustOK(t, invoke(t, url, nil, "resume", id), "resume")
			r = mustOK(t, invoke(t, url, nil, "info", id), "info")
			if !strings.Contains(r.stdout, "state:") || !strings.Contains(r.stdout, "running") {
				t.Errorf("info after resume:\n%s", r.stdout)
			}

			// timeout extends the lease.
			r = mustOK(t, invoke(t, url, nil, "timeout", "--json", id, "3h"), "timeout")
			if err := json.Unmarshal([]byte(r.stdout), &info); err != nil || info.LeaseEnd == nil || time.Until(*info.LeaseEnd) < 2*time.Hour {
				t.Errorf("timeout 3h: %v lease end %v", err, info.LeaseEnd)
			}

			// rm is idempotent; the sandbox is gone afterwards.
			mustOK(t, invoke(t, url, nil, "rm", id, other), "rm")
			mustOK(t, invoke(t, url, nil, "rm", id), "rm again")
			r = invoke(t, url, nil, "info", id)
			if r.code != exitToolFailure || !strings.HasPrefix(r.stderr, "sandbox: NotFound: ") || strings.Count(r.stderr, "\n") != 1 {
				t.Errorf("info of a removed sandbox: exit %d stderr %q, want 125 and one NotFound line", r.code, r.stderr)
			}
			r = invoke(t, url, nil, "--json", "info", id)
			var e struct {
				Error struct{ Code, Message string }
			}
			if err := json.Unmarshal([]byte(r.stderr), &e); err != nil || e.Error.Code != "NotFound" || e.Error.Message == "" || r.code != exitToolFailure {
				t.Errorf("--json error: exit %d stderr %q (%v)", r.code, r.stderr, err)
			}
		})
	}
}

func TestCLIExecExitCodes(t *testing.T) {
	t.Parallel()
	for name, url := range providers(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			id := createSandbox(t, url)
			if name == "local" {
				mustOK(t, invoke(t, url, strings.NewReader("echo hi\n"), "cp", "-", id+":noexec.sh"), "cp noexec")
			}
			for _, tc := range []struct {
				name   string
				args   []string
				want   int
				local  bool   // only on a real system
				stderr string // a line stderr must contain
			}{
				{name: "success", args: []string{"true"}, want: 0},
				{name: "exit 3", args: []string{"sh", "-c", "exit 3"}, want: 3},
				{name: "missing program", args: []string{"no-such-program-cli-test"}, want: 127},
				{name: "timeout", args: []string{"--timeout", "1s", "--", "sleep", "60"}, want: exitTimeout},
				{name: "not executable", args: []string{"./noexec.sh"}, want: 126, local: true},
				{name: "signal", args: []string{"sh", "-c", "kill -9 $$"}, want: 137, local: true, stderr: "killed by signal SIGKILL (9); exiting 137"},
				{name: "SIGTERM", args: []string{"sh", "-c", "kill -TERM $$"}, want: 143, local: true, stderr: "killed by signal SIGTERM (15); exiting 143"},
			} {
				if tc.local && name != "local" {
					continue
				}
				args := append([]string{"exec", id}, tc.args...)
				if tc.args[0] != "--timeout" {
					args = append([]string{"exec", id, "--"}, tc.args...)
				}
				start := time.Now()
				r := invoke(t, url, nil, args...)
				if r.code != tc.want {
					t.Errorf("%s: exit %d, want %d (stderr %q)", tc.name, r.code, tc.want, r.stderr)
				}
				if !strings.Contains(r.stderr, tc.stderr) {
					t.Errorf("%s: stderr %q, want it to say %q", tc.name, r.stderr, tc.stderr)
				}
				if tc.name == "timeout" {
					t.Logf("exec --timeout 1s -- sleep 60 returned after %v", time.Since(start))
				}
			}

			// Usage errors exit 125 and name the problem on one line.
			for _, args := range [][]string{
				{"exec", id},
				{"exec", id, "extra", "--", "true"},
				{"exec", id, "--env", "NOEQUALS", "--", "true"},
				{"create", "--label", "novalue"},
				{"timeout", id, "soon"},
				{"nosuchverb"},
				{"ls", "--nosuchflag"},
				{"ls", "--state", "sleeping"},
				{"cp", "a", "b"},
			} {
				r := invoke(t, url, nil, args...)
				if r.code != exitToolFailure || !strings.HasPrefix(r.stderr, "sandbox: InvalidArgument: ") || strings.Count(r.stderr, "\n") != 1 {
					t.Errorf("%q: exit %d stderr %q, want 125 and one InvalidArgument line", args, r.code, r.stderr)
				}
			}

			// --json captures and prints the result, and still exits with the status.
			r := invoke(t, url, nil, "--json", "exec", id, "--", "sh", "-c", "echo out; echo err >&2; exit 5")
			var res execJSON
			if err := json.Unmarshal([]byte(r.stdout), &res); err != nil {
				t.Fatalf("exec --json: %v in %q", err, r.stdout)
			}
			if r.code != 5 || res.ExitCode != 5 || res.Stdout == nil || *res.Stdout != "out\n" || res.Stderr == nil || *res.Stderr != "err\n" ||
				res.StdoutEncoding != "utf-8" || res.TimedOut {
				t.Errorf("exec --json: exit %d %+v", r.code, res)
			}
		})
	}
}

// eventLog records writes to stdout and stderr in the order they arrive and
// reacts to lines as they come.
type eventLog struct {
	mu     sync.Mutex
	events []string
	onLine func(stream, line string)
}

type streamWriter struct {
	log    *eventLog
	stream string
	buf    []byte
}

func (w *streamWriter) Write(p []byte) (int, error) {
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			return len(p), nil
		}
		line := string(w.buf[:i])
		w.buf = w.buf[i+1:]
		w.log.mu.Lock()
		w.log.events = append(w.log.events, w.stream+":"+line)
		w.log.mu.Unlock()
		if w.log.onLine != nil {
			w.log.onLine(w.stream, line)
		}
	}
}

// TestCLIExecStreamsLive checks that output reaches the terminal while the
// command runs, in order across stdout and stderr, and that stdin is passed
// through: the command waits for a line of stdin that the test writes only
// after seeing the command's previous output.
func TestCLIExecStreamsLive(t *testing.T) {
	t.Parallel()
	for name, url := range providers(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			id := createSandbox(t, url)
			pr, pw := io.Pipe()
			defer pr.Close()
			log := &eventLog{}
			log.onLine = func(stream, line string) {
				switch stream + ":" + line {
				case "out:ready":
					fmt.Fprintln(pw, "one")
				case "err:got one":
					fmt.Fprintln(pw, "two")
					pw.Close()
				}
			}
			a := newApp(pr, &streamWriter{log: log, stream: "out"}, &streamWriter{log: log, stream: "err"})
			a.getenv = func(string) string { return "" }
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			code := a.run(ctx, []string{"--url", url, "exec", id, "--timeout", "2m", "--", "sh", "-c",
				`echo ready; read a; echo "got $a" >&2; read b; echo "got $b"; read c || echo eof`})
			want := []string{"out:ready", "err:got one", "out:got two", "out:eof"}
			if code != 0 || fmt.Sprint(log.events) != fmt.Sprint(want) {
				t.Errorf("exit %d, events %q, want %q", code, log.events, want)
			}
		})
	}
}

// TestCLICopy checks cp in every direction. The large file is larger than
// the client's whole-file read cap (sandbox.DefaultMaxReadFile) and cp's
// progress threshold, so cp must stream it and draws no bar off a
// terminal: 64 MiB in a full run (SANDBOXTEST_FULL=1, as CI sets it), 12
// MiB and a byte in a plain one, as every copy of the data is checked byte
// by byte under -race.
func TestCLICopy(t *testing.T) {
	t.Parallel()
	size := 12<<20 + 1
	if fullRun() {
		size = 64 << 20
	}
	if size <= sandbox.DefaultMaxReadFile || size <= progressThreshold {
		t.Fatalf("a %d-byte file does not exceed the read cap and the progress threshold", size)
	}
	data := make([]byte, size)
	rand.Read(data)
	dir := t.TempDir()
	src := filepath.Join(dir, "big.bin")
	if err := os.WriteFile(src, data, 0o644); err != nil {
		t.Fatal(err)
	}
	want := sha256.Sum256(data)
	for name, url := range providers(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			id := createSandbox(t, url)
			start := time.Now()
			r := mustOK(t, invoke(t, url, nil, "cp", src, id+":data/big.bin"), "cp up")
			if r.stderr != "" || r.stdout != "" {
				t.Errorf("cp up printed stdout %q stderr %q; want nothing (no progress bar off a terminal)", r.stdout, r.stderr)
			}
			back := filepath.Join(dir, name+".bin")
			r = mustOK(t, invoke(t, url, nil, "cp", id+":data/big.bin", back), "cp down")
			if r.stderr != "" {
				t.Errorf("cp down printed %q on stderr", r.stderr)
			}
			t.Logf("%d bytes up and down in %v", size, time.Since(start))
			got, err := os.ReadFile(back)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != size || sha256.Sum256(got) != want {
				t.Fatalf("round trip: %d bytes, sha256 differs: %v", len(got), sha256.Sum256(got) != want)
			}

			// Into a directory (local and remote), from stdin, to stdout.
			r = mustOK(t, invoke(t, url, strings.NewReader("line\x00bin\xff"), "cp", "-", id+":data/small"), "cp from stdin")
			r = mustOK(t, invoke(t, url, nil, "cp", id+":data/small", "-"), "cp to stdout")
			if r.stdout != "line\x00bin\xff" {
				t.Errorf("cp to stdout = %q", r.stdout)
			}
			sub := t.TempDir()
			mustOK(t, invoke(t, url, nil, "cp", id+":data/small", sub), "cp into a local dir")
			if b, err := os.ReadFile(filepath.Join(sub, "small")); err != nil || string(b) != "line\x00bin\xff" {
				t.Errorf("cp into a dir: %q %v", b, err)
			}
			mustOK(t, invoke(t, url, nil, "cp", filepath.Join(sub, "small"), id+":data/copied/"), "cp into a remote dir")
			r = mustOK(t, invoke(t, url, nil, "exec", id, "--", "cat", "data/copied/small"), "cat")
			if r.stdout != "line\x00bin\xff" {
				t.Errorf("cp into a remote dir: %q", r.stdout)
			}

			// Between sandboxes (here the same one), streamed through the tool.
			mustOK(t, invoke(t, url, nil, "cp", id+":data/small", id+":data/dup"), "cp sandbox to sandbox")
			r = mustOK(t, invoke(t, url, nil, "cp", id+":data/dup", "-"), "cp dup to stdout")
			if r.stdout != "line\x00bin\xff" {
				t.Errorf("cp between sandboxes: %q", r.stdout)
			}

			// A missing file is the tool's failure with the error's code.
			r = invoke(t, url, nil, "cp", id+":data/missing", filepath.Join(dir, "x"))
			if r.code != exitToolFailure || !strings.HasPrefix(r.stderr, "sandbox: NotFound: ") {
				t.Errorf("cp of a missing file: exit %d stderr %q", r.code, r.stderr)
			}
			if _, err := os.Stat(filepath.Join(dir, "x")); err == nil {
				t.Errorf("a failed cp left a local file")
			}
		})
	}
}

// TestCLICopyProgress checks that the progress bar is drawn when stderr is a
// terminal and the file is large, and only then.
func TestCLICopyProgress(t *testing.T) {
	t.Parallel()
	url := providers(t)["memory"]
	id := createSandbox(t, url)
	dir := t.TempDir()
	for _, tc := range []struct {
		size int
		tty  bool
		bar  bool
	}{{progressThreshold, true, true}, {progressThreshold, false, false}, {1 << 10, true, false}} {
		src := filepath.Join(dir, "f")
		if err := os.WriteFile(src, make([]byte, tc.size), 0o644); err != nil {
			t.Fatal(err)
		}
		var out, errb bytes.Buffer
		a := newApp(nil, &out, &errb)
		a.stderrTTY = tc.tty
		r := mustOK(t, invokeApp(t, a, url, "cp", src, id+":f"), "cp")
		if got := strings.Contains(r.stderr, "100.0%"); got != tc.bar {
			t.Errorf("size %d tty %v: stderr %q, want a bar: %v", tc.size, tc.tty, r.stderr, tc.bar)
		}
	}
}

func TestCLIRun(t *testing.T) {
	t.Parallel()
	url, ok := providers(t)["local"]
	if !ok {
		t.Skip("the run package needs /proc and POSIX tools: local provider (Linux) only")
	}
	id := createSandbox(t, url)
	r := mustOK(t, invoke(t, url, nil, "--json", "run", "start", id, "job", "--", "sh", "-c", "echo one; sleep 600; echo never"), "run start")
	var st runJSON
	if err := json.Unmarshal([]byte(r.stdout), &st); err != nil || st.ID != "job" || (st.State != "running" && st.State != "pending") {
		t.Fatalf("run start --json: %v %q", err, r.stdout)
	}
	// Starting the same id and command again is the same run; another
	// command under the id is a conflict.
	again := mustOK(t, invoke(t, url, nil, "--json", "run", "start", id, "job", "--", "sh", "-c", "echo one; sleep 600; echo never"), "run start again")
	var st2 runJSON
	if err := json.Unmarshal([]byte(again.stdout), &st2); err != nil || st2.PID != st.PID {
		t.Errorf("second start: %v %+v, want pid %d", err, st2, st.PID)
	}
	if r := invoke(t, url, nil, "run", "start", id, "job", "--", "true"); r.code != exitToolFailure || !strings.Contains(r.stderr, "AlreadyExists") {
		t.Errorf("conflicting start: exit %d %q", r.code, r.stderr)
	}
	// The output shows up in logs while the run goes on.
	deadline := time.Now().Add(time.Minute)
	for {
		r = mustOK(t, invoke(t, url, nil, "run", "logs", id, "job"), "run logs")
		if r.stdout == "one\n" || time.Now().After(deadline) {
			break
		}
	}
	if r.stdout != "one\n" {
		t.Errorf("run logs = %q, want one", r.stdout)
	}
	r = mustOK(t, invoke(t, url, nil, "run", "kill", id, "job"), "run kill")
	if !strings.HasPrefix(r.stdout, "exited") || !strings.Contains(r.stdout, "killed") {
		t.Errorf("run kill printed %q", r.stdout)
	}
	// A run that ends: logs -f follows to its end, status reports its code.
	mustOK(t, invoke(t, url, nil, "run", "start", id, "counted", "--", "sh", "-c", "for i in 1 2 3; do echo $i; sleep 0.2; done; exit 4"), "run start")
	r = mustOK(t, invoke(t, url, nil, "run", "logs", "-f", "--poll", "100ms", id, "counted"), "run logs -f")
	if r.stdout != "1\n2\n3\n" {
		t.Errorf("logs -f = %q", r.stdout)
	}
	r = mustOK(t, invoke(t, url, nil, "--json", "run", "status", id, "counted"), "run status")
	if err := json.Unmarshal([]byte(r.stdout), &st); err != nil || st.State != "exited" || st.ExitCode == nil || *st.ExitCode != 4 {
		t.Errorf("status: %v %q", err, r.stdout)
	}
	if r := invoke(t, url, nil, "run", "status", id, "nosuchrun"); r.code != exitToolFailure || !strings.Contains(r.stderr, "NotFound") {
		t.Errorf("status of a missing run: exit %d %q", r.code, r.stderr)
	}
}

// TestCLIHelpAndCompletion checks that every verb has an example, that the
// completion scripts are generated and that ids complete.
func TestCLIHelpAndCompletion(t *testing.T) {
	t.Parallel()
	a := newApp(nil, io.Discard, io.Discard)
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.Runnable() && c.Name() != "help" && c.Parent() != nil && c.Parent().Name() != "completion" && c.Example == "" {
			t.Errorf("%s has no example in --help", c.CommandPath())
		}
		for _, s := range c.Commands() {
			walk(s)
		}
	}
	walk(a.rootCmd())

	url := providers(t)["memory"]
	id := createSandbox(t, url)
	r := mustOK(t, invoke(t, url, nil, "exec", "--help"), "exec --help")
	if !strings.Contains(r.stdout, "Examples:") || !strings.Contains(r.stdout, "python3") {
		t.Errorf("exec --help:\n%s", r.stdout)
	}
	for _, sh := range []string{"bash", "zsh", "fish", "powershell"} {
		r := mustOK(t, invoke(t, url, nil, "completion", sh), "completion "+sh)
		if !strings.Contains(r.stdout, "sandbox") || len(r.stdout) < 500 {
			t.Errorf("completion %s: %d bytes", sh, len(r.stdout))
		}
	}
	var out bytes.Buffer
	ca := newApp(nil, &out, io.Discard)
	ca.getenv = func(k string) string { return map[string]string{"SANDBOX_URL": url}[k] }
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if code := ca.run(ctx, []string{"__complete", "info", id[:3]}); code != 0 {
		t.Fatalf("__complete: exit %d", code)
	}
	r = cliRun{stdout: out.String()}
	sc := bufio.NewScanner(strings.NewReader(r.stdout))
	found := false
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), id) {
			found = true
		}
	}
	if !found {
		t.Errorf("completing info %s: %q, want %s", id[:3], r.stdout, id)
	}
}
