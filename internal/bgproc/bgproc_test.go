//go:build unix

package bgproc

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sandboxkit/sandbox/internal/testpar"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// shells are the POSIX shells the scripts run under here: /bin/sh (dash
// on Debian) and bash, when present.

// TestMain runs the timeout cases four a CPU: each waits out a real timeout
// of a second or two.
func TestMain(m *testing.M) {
	testpar.Widen(4)
	os.Exit(m.Run())
}

func shells(t *testing.T) []string {
	var out []string
	for _, sh := range []string{"/bin/sh", "bash"} {
		if p, err := exec.LookPath(sh); err == nil {
			out = append(out, p)
		}
	}
	if len(out) == 0 {
		t.Skip("needs a POSIX shell (package dash or bash)")
	}
	if _, err := exec.LookPath("timeout"); err != nil {
		t.Skip("needs timeout(1) (package coreutils)")
	}
	return out
}

// run runs Lib followed by body under sh in dir, with the positional
// arguments args, and returns its stdout, stderr and exit status.
func run(t *testing.T, sh, dir, body string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, sh, append([]string{"-c", Lib + body, "test"}, args...)...)
	cmd.Dir = dir
	cmd.WaitDelay = 5 * time.Second
	t.Cleanup(func() { killGroup(filepath.Join(dir, "pid")) })
	var o, e strings.Builder
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	require.NoError(t, ctx.Err(), "the script did not end within 60 s")
	if ee, ok := err.(*exec.ExitError); ok {
		return o.String(), e.String(), ee.ExitCode()
	}
	require.NoError(t, err)
	return o.String(), e.String(), 0
}

// record reads and parses the exit record at p.
func record(t *testing.T, p string) Exit {
	t.Helper()
	b, err := os.ReadFile(p)
	require.NoError(t, err)
	e, err := ParseExit(string(b))
	require.NoError(t, err)
	return e
}

// finish is the tail of a script that waits for the command and writes
// its exit record to $1/exit.
const finish = `
bg_wait
bg_put "$1/exit" "$bg_rc $bg_why"
`

func TestStartRecordsExitAndKeepsStreams(t *testing.T) {
	for _, sh := range shells(t) {
		t.Run(filepath.Base(sh), func(t *testing.T) {
			d := t.TempDir()
			out, errOut, code := run(t, sh, d, `bg_start "$1/pid" KILL 0 30 sh -c 'echo out; echo err >&2; exit 7'`+finish, d)
			require.Equal(t, 0, code, "stderr: %s", errOut)
			assert.Equal(t, "out\n", out)
			assert.Equal(t, "err\n", errOut, "the command's stderr is the caller's")
			assert.Equal(t, Exit{Code: 7}, record(t, filepath.Join(d, "exit")))
			pid, err := os.ReadFile(filepath.Join(d, "pid"))
			require.NoError(t, err)
			assert.Regexp(t, `^[0-9]+\n$`, string(pid))
			left, _ := filepath.Glob(filepath.Join(d, "*.tmp.*"))
			assert.Empty(t, left, "bg_put leaves no temporary file")
		})
	}
}

func TestTimeoutIsRecorded(t *testing.T) {
	t.Parallel()
	for _, sh := range shells(t) {
		for _, c := range []struct {
			name, sig, killAfter, cmd string
			code                      int
		}{
			{"kill", "KILL", "0", "sleep 30", 137},
			{"term", "TERM", "0", "sleep 30", 124},
			// The command ignores TERM: KILL follows a second later.
			{"term-then-kill", "TERM", "1", `trap "" TERM; sleep 30`, 137},
		} {
			t.Run(filepath.Base(sh)+"/"+c.name, func(t *testing.T) {
				t.Parallel() // each waits out its timeout, in a directory of its own
				d := t.TempDir()
				start := time.Now()
				_, errOut, code := run(t, sh, d, `bg_start "$1/pid" "$2" "$3" 1.000 sh -c "$4"`+finish, d, c.sig, c.killAfter, c.cmd)
				took := time.Since(start)
				require.Equal(t, 0, code, "stderr: %s", errOut)
				assert.Equal(t, Exit{Code: c.code, TimedOut: true}, record(t, filepath.Join(d, "exit")))
				assert.Less(t, took, 25*time.Second, "a 1 s timeout ended a 30 s command")
				t.Logf("a 1 s timeout ended the command after %v", took)
			})
		}
	}
}

// A signal sent from outside is not a timeout, even when timeout(1)
// forwarded an earlier TERM (writing its -v notice, which daytona's old
// launcher took for a timeout) before a KILL ended it.
func TestSignalIsNotTimeout(t *testing.T) {
	t.Parallel()
	for _, sh := range shells(t) {
		t.Run(filepath.Base(sh), func(t *testing.T) {
			d := t.TempDir()
			_, errOut, code := run(t, sh, d, `bg_start "$1/pid" KILL 0 30 sh -c 'trap "" TERM; echo $$ >"$1/ready"; while :; do sleep 0.05; done' sh "$1"
i=0
while [ ! -s "$1/ready" ] && [ $i -lt 400 ]; do sleep 0.05; i=$((i + 1)); done
bg_signal "$1/pid" TERM
sleep 0.3
bg_signal "$1/pid" 9
`+finish, d)
			require.Equal(t, 0, code, "stderr: %s", errOut)
			assert.Equal(t, Exit{Code: 137}, record(t, filepath.Join(d, "exit")))
		})
	}
}

// bg_signal reaches the command's whole process group, a grandchild
// included.
func TestSignalReachesGroup(t *testing.T) {
	for _, sh := range shells(t) {
		t.Run(filepath.Base(sh), func(t *testing.T) {
			d := t.TempDir()
			_, errOut, code := run(t, sh, d, `bg_start "$1/pid" KILL 0 0 sh -c 'sleep 30 & echo $! >"$1/gc.tmp"; mv "$1/gc.tmp" "$1/gc"; wait' sh "$1"
i=0
while [ ! -s "$1/gc" ] && [ $i -lt 400 ]; do sleep 0.05; i=$((i + 1)); done
bg_signal "$1/pid" TERM || echo "bg_signal failed: $?" >&2
`+finish, d)
			require.Equal(t, 0, code, "stderr: %s", errOut)
			assert.Empty(t, errOut)
			assert.Equal(t, Exit{Code: 143}, record(t, filepath.Join(d, "exit")))
			b, err := os.ReadFile(filepath.Join(d, "gc"))
			require.NoError(t, err)
			var gc int
			_, err = fmt.Sscan(strings.TrimSpace(string(b)), &gc)
			require.NoError(t, err)
			// The grandchild was in the group: it is gone (or a zombie
			// awaiting init) within 5 s.
			deadline := time.Now().Add(5 * time.Second)
			for alive(gc) && time.Now().Before(deadline) {
				time.Sleep(50 * time.Millisecond)
			}
			assert.False(t, alive(gc), "the grandchild %d outlived the signal to its group", gc)
		})
	}
}

// The command reads the caller's stdin (a shell gives a background
// command /dev/null unless told otherwise).
func TestStdin(t *testing.T) {
	for _, sh := range shells(t) {
		t.Run(filepath.Base(sh), func(t *testing.T) {
			d := t.TempDir()
			require.NoError(t, os.WriteFile(filepath.Join(d, "in"), []byte("line one\n"), 0o600))
			out, errOut, code := run(t, sh, d, `bg_start "$1/pid" KILL 0 30 cat < "$1/in"`+finish+`bg_start "$1/pid" KILL 0 0 cat < "$1/in"`+finish, d)
			require.Equal(t, 0, code, "stderr: %s", errOut)
			assert.Equal(t, "line one\nline one\n", out)
		})
	}
}

func TestSignalWithoutPid(t *testing.T) {
	t.Parallel()
	for _, sh := range shells(t) {
		d := t.TempDir()
		_, _, code := run(t, sh, d, `bg_signal "$1/none" TERM`, d)
		assert.Equal(t, 3, code, sh)
		// With a wait, the pid written meanwhile is found.
		_, errOut, code2 := run(t, sh, d, `sleep 30 &
s=$!
echo $s >"$1/late.tmp"
(sleep 0.3; mv "$1/late.tmp" "$1/late") &
bg_signal "$1/late" KILL 50 || exit
wait $s`, d)
		assert.Equal(t, 137, code2, "%s: %s", sh, errOut)
		// An exit record ends the wait: a minute's wait returns at once.
		require.NoError(t, os.WriteFile(filepath.Join(d, "gone.exit"), []byte("0 \n"), 0o644))
		start := time.Now()
		_, _, code3 := run(t, sh, d, `bg_signal "$1/gone.pid" TERM 600 "$1/gone.exit"`, d)
		assert.Equal(t, 3, code3, sh)
		assert.Less(t, time.Since(start), 30*time.Second, "%s: bg_signal waited for the pid of a command whose exit record exists", sh)
	}
}

// bg_pre changes the command's directory and environment, not the
// script's; when it fails, the command does not run and its status is
// the command's.
func TestPre(t *testing.T) {
	for _, sh := range shells(t) {
		t.Run(filepath.Base(sh), func(t *testing.T) {
			d := t.TempDir()
			sub := filepath.Join(d, "sub")
			require.NoError(t, os.Mkdir(sub, 0o755))
			out, errOut, code := run(t, sh, d, `sub=$2
bg_pre() { cd "$sub" || exit 126; PATH=/nowhere; X=set; export PATH X; }
bg_start "$1/pid" KILL 0 30 /bin/sh -c 'echo "$PWD $X $PATH"'
bg_wait
echo "$bg_rc $PWD ${X-unset}"
bg_pre() { cd "$sub/missing" 2>/dev/null || exit 126; }
bg_start "$1/pid" KILL 0 30 echo never
bg_wait
echo "$bg_rc $PWD"
`, d, sub)
			lines := strings.Split(strings.TrimSpace(out), "\n")
			require.Len(t, lines, 3, "stdout %q stderr %q code %d", out, errOut, code)
			assert.Equal(t, sub+" set /nowhere", lines[0])
			assert.Equal(t, "0 "+d+" unset", lines[1])
			assert.Equal(t, "126 "+d, lines[2], "a failing bg_pre's status is the command's")
		})
	}
}

func TestParseExit(t *testing.T) {
	for rec, want := range map[string]Exit{
		"0\n":          {Code: 0},
		"7 ":           {Code: 7},
		"137 timeout":  {Code: 137, TimedOut: true},
		"124 budget\n": {Code: 124, TimedOut: true},
		"137 killed":   {Code: 137, Killed: true},
	} {
		got, err := ParseExit(rec)
		require.NoError(t, err, "%q", rec)
		assert.Equal(t, want, got, "%q", rec)
	}
	for _, rec := range []string{"", "x", "-1", "256", "1 other", "1 timeout extra"} {
		_, err := ParseExit(rec)
		assert.ErrorIs(t, err, ErrBadRecord, "%q", rec)
	}
}

func TestSecs(t *testing.T) {
	for d, want := range map[time.Duration]string{
		0:                       "0",
		-time.Second:            "0",
		time.Nanosecond:         "0.001",
		1500 * time.Millisecond: "1.500",
		time.Minute:             "60.000",
	} {
		assert.Equal(t, want, Secs(d), "%v", d)
	}
}

func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return syscall.Kill(pid, 0) == nil
	}
	// A zombie (state Z) has ended.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || !strings.HasPrefix(s[i+1:], " Z")
}

// killGroup ends what a failed test left of the group whose leader's pid
// the file p holds.
func killGroup(p string) {
	b, err := os.ReadFile(p)
	if err != nil {
		return
	}
	var pid int
	if _, err := fmt.Sscan(strings.TrimSpace(string(b)), &pid); err == nil && pid > 1 {
		_ = syscall.Kill(-pid, syscall.SIGKILL)
	}
}
