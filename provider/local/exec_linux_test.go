package local

import (
	"context"
	"errors"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/driver"
	"github.com/sandboxkit/sandbox/sberrors"
	"golang.org/x/sys/unix"
)

// TestExecAgentDiesMidCommand: when the agent dies while a foreground
// command runs (it sends no start frame for those), the outcome is
// unknown, not a stale transport the portable layer would retry.
func TestExecAgentDiesMidCommand(t *testing.T) {
	t.Parallel() // its own Runtime; it counts no descriptor of this process
	ctx := context.Background()
	rt := newRuntime(t, WithIsolation(L1))
	sb := mustCreate(ctx, t, sandbox.NewClient(rt), sandbox.CreateOptions{})
	run(ctx, t, sb, "true") // the agent runs
	m, err := rt.readMeta(sb.ID())
	if err != nil {
		t.Fatal(err)
	}
	agent := m.AgentPID
	done := make(chan error, 1)
	go func() {
		_, err := rt.Exec(ctx, sb.ID(), &driver.Command{Shell: "exec sleep 60", Timeout: time.Minute, Stdout: discard{}, Stderr: discard{}})
		done <- err
	}()
	// Wait until the command runs under the agent, then kill the agent.
	waitFor(t, func() bool {
		for _, pid := range descendants(agent) {
			if b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline"); strings.HasPrefix(string(b), "sleep\x0060") {
				return true
			}
		}
		return false
	})
	if err := syscall.Kill(agent, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case err = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("Exec still running 30s after its agent died")
	}
	if !errors.Is(err, sberrors.ErrOutcomeUnknown) || errors.Is(err, sberrors.ErrStaleTransport) {
		t.Errorf("Exec = %v, want ErrOutcomeUnknown (and not ErrStaleTransport)", err)
	}
	// The sandbox recovers: the next command starts a new agent.
	if res := run(ctx, t, sb, "echo again"); strings.TrimSpace(string(res.Stdout)) != "again" {
		t.Errorf("after the agent died: %q %q", res.Stdout, res.Stderr)
	}
}

// TestRunConnClassifiesFailures checks runConn against a fake agent: a
// request the agent read may have run (ErrOutcomeUnknown); one it never
// read, or could not be written, cannot have (ErrStaleTransport).
func TestRunConnClassifiesFailures(t *testing.T) {
	pair := func(t *testing.T) (client, agent net.Conn) {
		t.Helper()
		fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		conns := make([]net.Conn, 2)
		for i, fd := range fds {
			f := os.NewFile(uintptr(fd), "pair")
			c, err := net.FileConn(f)
			f.Close()
			if err != nil {
				t.Fatal(err)
			}
			conns[i] = c
			t.Cleanup(func() { c.Close() })
		}
		return conns[0], conns[1]
	}
	req := func() *request { return &request{Op: "exec", Args: []string{"true"}} }
	tests := []struct {
		name  string
		agent func(c net.Conn)
		want  error
		not   error
	}{
		{"read then gone", func(c net.Conn) { _, _, _ = readFrame(c, nil); c.Close() }, sberrors.ErrOutcomeUnknown, sberrors.ErrStaleTransport},
		{"output then gone", func(c net.Conn) {
			_, _, _ = readFrame(c, nil)
			_ = (&frameWriter{w: c}).write(frameStdout, []byte("x"))
			c.Close()
		}, sberrors.ErrOutcomeUnknown, sberrors.ErrStaleTransport},
		{"closed unread", func(c net.Conn) {
			// Wait until the request is queued, then close without reading it.
			for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
				if n, _ := inQueue(c); n > 0 {
					break
				}
			}
			c.Close()
		}, sberrors.ErrStaleTransport, sberrors.ErrOutcomeUnknown},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cl, ag := pair(t)
			go tc.agent(ag)
			_, err := runConn(context.Background(), cl, req(), nil, discard{}, discard{}, nil)
			if !errors.Is(err, tc.want) || errors.Is(err, tc.not) {
				t.Errorf("runConn = %v, want %v", err, tc.want)
			}
		})
	}
	t.Run("agent gone before the write", func(t *testing.T) {
		cl, ag := pair(t)
		ag.Close()
		_, err := runConn(context.Background(), cl, req(), nil, discard{}, discard{}, nil)
		if !errors.Is(err, sberrors.ErrStaleTransport) || errors.Is(err, sberrors.ErrOutcomeUnknown) {
			t.Errorf("runConn = %v, want ErrStaleTransport", err)
		}
	})
}

// inQueue returns the bytes waiting to be read on c.
func inQueue(c net.Conn) (int, error) {
	rc, err := c.(syscall.Conn).SyscallConn()
	if err != nil {
		return 0, err
	}
	var n int
	var ierr error
	if err := rc.Control(func(fd uintptr) { n, ierr = unix.IoctlGetInt(int(fd), unix.SIOCINQ) }); err != nil {
		return 0, err
	}
	return n, ierr
}
