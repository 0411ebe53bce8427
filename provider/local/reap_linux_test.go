package local

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sandboxkit/sandbox"
)

// TestOrphanReaped: a command's child that outlives it is reparented to
// the agent; once it exits it must be reaped, not left a zombie, even when
// no other command exits after it (the agent no longer blocks in waitid
// for every child, so the periodic sweep must catch it).
func TestOrphanReaped(t *testing.T) {
	t.Parallel() // waits for the agent's sweep, on Runtimes of its own
	for _, level := range []Level{L1, L4} {
		t.Run(level.String(), func(t *testing.T) {
			rt := newRuntime(t, WithIsolation(level))
			if got, _ := rt.Level(); got < level {
				t.Skipf("this host gives %s", got)
			}
			ctx := context.Background()
			c := sandbox.NewClient(rt)
			sb := mustCreate(ctx, t, c, sandbox.CreateOptions{})
			// The subshell exits at once; its sleep, orphaned, exits 0.3 s later.
			run(ctx, t, sb, "(sleep 0.3 &) ; exit 0")
			deadline := time.Now().Add(15 * time.Second) // the sweep runs every 2 s
			for {
				zombies := sandboxZombies(ctx, t, rt, sb.ID())
				if len(zombies) == 0 {
					return
				}
				if time.Now().After(deadline) {
					t.Fatalf("zombies left in the sandbox 15 s after they exited: %v", zombies)
				}
				time.Sleep(200 * time.Millisecond)
			}
		})
	}
}

// sandboxZombies lists the sandbox's processes that are zombies, and any
// sleep still running (the orphan not yet exited counts as not reaped).
func sandboxZombies(_ context.Context, t *testing.T, rt *Runtime, id string) []string {
	t.Helper()
	// A zombie has left its cgroup: walk the agent's descendants instead.
	m, err := rt.readMeta(id)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, pid := range descendants(m.AgentPID) {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 || i+2 >= len(s) {
			continue
		}
		comm := s[strings.IndexByte(s, '(')+1 : i]
		if s[i+2] == 'Z' || comm == "sleep" {
			out = append(out, fmt.Sprintf("%d(%s %c)", pid, comm, s[i+2]))
		}
	}
	return out
}

// TestRelayRawHalfClose: the raw relay of Expose passes bytes both
// ways and a half close in each direction on to the other side, in the
// order it happened: the client's shutdown of its writing side reaches
// the server as EOF while the server can still answer.
func TestRelayRawHalfClose(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	dialed, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	accepted, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer dialed.Close()
	defer accepted.Close()
	fds, err := socketpair()
	if err != nil {
		t.Fatal(err)
	}
	relayEnd, clientEnd := fds[0], fds[1]
	defer clientEnd.Close()
	done := make(chan struct{})
	go func() {
		defer close(done)
		relayRaw(relayEnd, accepted.(*net.TCPConn))
	}()
	// client (unix end) → server (dialed), then the client's half close.
	payload := bytes.Repeat([]byte("0123456789abcdef"), 64<<10) // 1 MiB
	go func() {
		_, _ = clientEnd.Write(payload)
		_ = clientEnd.CloseWrite()
	}()
	_ = dialed.SetDeadline(time.Now().Add(30 * time.Second))
	got, err := io.ReadAll(dialed)
	if err != nil || !bytes.Equal(got, payload) {
		t.Fatalf("server read %d bytes (%v), want the %d sent, then EOF", len(got), err, len(payload))
	}
	// The server answers after the client's half close, then closes.
	if _, err := dialed.Write([]byte("answer")); err != nil {
		t.Fatal(err)
	}
	_ = dialed.(*net.TCPConn).CloseWrite()
	_ = clientEnd.SetDeadline(time.Now().Add(30 * time.Second))
	back, err := io.ReadAll(clientEnd)
	if err != nil || string(back) != "answer" {
		t.Fatalf("client read %q (%v), want the answer, then EOF", back, err)
	}
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("relayRaw did not return once both directions ended")
	}
}

// socketpair returns a connected pair of unix stream sockets.
func socketpair() ([2]*net.UnixConn, error) {
	var out [2]*net.UnixConn
	dir, err := os.MkdirTemp("", "relay")
	if err != nil {
		return out, err
	}
	defer os.RemoveAll(dir)
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: dir + "/s", Net: "unix"})
	if err != nil {
		return out, err
	}
	defer ln.Close()
	c, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: dir + "/s", Net: "unix"})
	if err != nil {
		return out, err
	}
	a, err := ln.AcceptUnix()
	if err != nil {
		c.Close()
		return out, err
	}
	return [2]*net.UnixConn{a, c}, nil
}
