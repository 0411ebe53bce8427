package local

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/internal/procnet"
	"github.com/sandboxkit/sandbox/internal/testpar"
	"github.com/sandboxkit/sandbox/internal/testport"
)

// TestExposeNoNetworkAndClose: a sandbox without network still serves
// the host through Expose (the relay runs in its namespace, not over a
// network), the endpoint listens on 127.0.0.1 only, and Client.Close
// closes it (connection refused).
func TestExposeNoNetworkAndClose(t *testing.T) {
	rt := newRuntime(t)
	if rt.level < L3 {
		t.Skipf("NoNetwork with a server needs a network namespace (L3+); this host gives %v", rt.level)
	}
	c := sandbox.NewClient(rt)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sb, err := c.Create(ctx, sandbox.CreateOptions{NoNetwork: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { // the Client is closed by then: destroy through a new Runtime
		r2, err := New(WithRoot(rt.Root()))
		if err != nil {
			t.Error(err)
			return
		}
		defer r2.Close()
		if err := r2.Destroy(context.Background(), sb.ID()); err != nil {
			t.Error(err)
		}
	})
	ep, port, p := serveFile(ctx, t, sb, "x", []byte("offline"))
	host, _, _ := net.SplitHostPort(ep.URL[len("http://"):])
	if host != "127.0.0.1" {
		t.Fatalf("endpoint %s is not on 127.0.0.1", ep.URL)
	}
	if again, err := sb.Expose(ctx, port, sandbox.ExposeOptions{}); err != nil || again.URL != ep.URL {
		t.Fatalf("second Expose = %v, %v; want the same listener %s", again, err, ep.URL)
	}
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr}
	req, _ := ep.NewRequest(ctx, http.MethodGet, "/x", nil)
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != "offline" {
		t.Fatalf("GET = %q", body)
	}
	// The agent hands over its connection to the server (the relay runs
	// here, the agent out of the stream's path): a TCP connection whose
	// peer is the sandbox's port.
	m, err := rt.running(ctx, sb.ID())
	if err != nil {
		t.Fatal(err)
	}
	pc, _, raw, err := rt.dialPort(ctx, m, port)
	if err != nil {
		t.Fatal(err)
	}
	tcp, isTCP := pc.(*net.TCPConn)
	if !isTCP || !raw || tcp.RemoteAddr().(*net.TCPAddr).Port != port {
		t.Fatalf("dialPort = %T to %v (raw %v), want the passed TCP connection to port %d", pc, pc.RemoteAddr(), raw, port)
	}
	_, _ = io.WriteString(tcp, "GET /x HTTP/1.0\r\n\r\n")
	_ = tcp.SetReadDeadline(time.Now().Add(30 * time.Second))
	if all, err := io.ReadAll(tcp); err != nil || !bytes.HasSuffix(all, []byte("\r\n\r\noffline")) {
		t.Fatalf("GET on the passed connection = %q, %v", all, err)
	}
	tcp.Close()
	// The sandbox really has no network: the server is not reachable on
	// the host's loopback at its own port.
	if conn, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), time.Second); err == nil {
		conn.Close()
		t.Fatalf("the sandbox's port %d is reachable on the host directly", port)
	}
	_ = p.Kill(ctx)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	tr.CloseIdleConnections()
	_, err = net.DialTimeout("tcp", ep.URL[len("http://"):], 5*time.Second)
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("dial after Client.Close: %v, want connection refused", err)
	}
}

// TestPassedDescriptorChecked: a dial answer's descriptor is used only
// when it is exactly one TCP socket; anything else (a pipe, a unix
// socket, two descriptors, none) is refused and every descriptor closed,
// so a confused or hostile agent cannot hand the host another kind of
// file to relay into.
func TestPassedDescriptorChecked(t *testing.T) {
	var p [2]int
	if err := syscall.Pipe2(p[:], syscall.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(p[1])
	if _, err := tcpFromFDs([]int{p[0]}); err == nil {
		t.Fatal("a pipe was taken for a TCP connection")
	}
	if err := syscall.Close(p[0]); !errors.Is(err, syscall.EBADF) {
		t.Fatalf("the refused pipe was left open (close: %v)", err)
	}
	us, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(us[1])
	if _, err := tcpFromFDs([]int{us[0]}); err == nil {
		t.Fatal("a unix socket was taken for a TCP connection")
	}
	if _, err := tcpFromFDs(nil); err == nil {
		t.Fatal("an answer without a descriptor was accepted")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	dial := func() int {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		f, err := c.(*net.TCPConn).File()
		if err != nil {
			t.Fatal(err)
		}
		fd, err := syscall.Dup(int(f.Fd()))
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		return fd
	}
	a, b := dial(), dial()
	if _, err := tcpFromFDs([]int{a, b}); err == nil {
		t.Fatal("two descriptors were accepted")
	}
	for _, fd := range []int{a, b} {
		if err := syscall.Close(fd); !errors.Is(err, syscall.EBADF) {
			t.Fatalf("a refused descriptor was left open (close: %v)", err)
		}
	}
	tc, err := tcpFromFDs([]int{dial()})
	if err != nil {
		t.Fatalf("one TCP socket refused: %v", err)
	}
	tc.Close()
}

// floodMu is held by the tests that flood an endpoint, each in a process
// of its own (testpar.OwnProcess): one flood at a time.
var floodMu sync.Mutex

// TestExposeManyConnectionsLeaveNoDescriptors: 120 downloads through one
// endpoint, 20 at a time, half of them abandoned by the client midway,
// each complete one byte-exact; afterwards this process holds no more
// sockets than before (the sandbox sockets the agent hands over, and the
// accepted ones, are all closed), and the endpoint still serves.
func TestExposeManyConnectionsLeaveNoDescriptors(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("needs python3 (the test's server is python3 -m http.server)")
	}
	if !testpar.OwnProcess(t, &floodMu) {
		return // counts this process's sockets: alone in a child
	}
	rt := newRuntime(t)
	c := sandbox.NewClient(rt)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	sb, err := c.Create(ctx, sandbox.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Destroy(context.Background())
	blob := make([]byte, 1<<20)
	for i := range blob {
		blob[i] = byte(i*7 + i>>9)
	}
	ep, _, _ := serveFile(ctx, t, sb, "blob", blob)
	get := func(hc *http.Client, abandon bool) error {
		req, _ := ep.NewRequest(ctx, http.MethodGet, "/blob", nil)
		resp, err := hc.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if abandon {
			_, err := io.CopyN(io.Discard, resp.Body, 64<<10)
			return err // Close now drops the connection midway
		}
		got, err := io.ReadAll(resp.Body)
		if err != nil {
			return err
		}
		if !bytes.Equal(got, blob) {
			return fmt.Errorf("got %d bytes, not the %d written", len(got), len(blob))
		}
		return nil
	}
	tr := &http.Transport{MaxIdleConnsPerHost: 20}
	hc := &http.Client{Transport: tr}
	if err := get(hc, false); err != nil {
		t.Fatal(err)
	}
	tr.CloseIdleConnections()
	before := openSockets(t)
	var wg sync.WaitGroup
	errs := make(chan error, 120)
	sem := make(chan struct{}, 20)
	for i := range 120 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			if err := get(hc, i%2 == 1); err != nil {
				errs <- fmt.Errorf("download %d: %w", i, err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	tr.CloseIdleConnections()
	// The relays end once both sides closed; give them a bounded while.
	deadline := time.Now().Add(30 * time.Second)
	after := openSockets(t)
	for after > before && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
		after = openSockets(t)
	}
	if after > before {
		t.Errorf("%d sockets open after the downloads, %d before: the relay leaks descriptors", after, before)
	}
	if err := get(&http.Client{}, false); err != nil {
		t.Fatalf("the endpoint no longer serves: %v", err)
	}
}

// openSockets counts this process's descriptors that are sockets.
func openSockets(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range ents {
		if l, err := os.Readlink("/proc/self/fd/" + e.Name()); err == nil && strings.HasPrefix(l, "socket:") {
			n++
		}
	}
	return n
}

// serveFile writes data to www/name in sb's home, serves that directory
// with python3 -m http.server on a random port of the sandbox's loopback
// (the process is closed at the test's end) and exposes it.
func serveFile(ctx context.Context, t *testing.T, sb *sandbox.Sandbox, name string, data []byte) (sandbox.Endpoint, int, *sandbox.Process) {
	t.Helper()
	dir := sb.Home() + "/www"
	if err := sb.WriteFile(ctx, dir+"/"+name, data); err != nil {
		t.Fatal(err)
	}
	var port int
	var p *sandbox.Process
	for try := 1; ; try++ {
		port = testport.Pick() // the host's network at L1: another process may hold it
		res, err := sb.Exec(ctx, sandbox.Command{Args: []string{"cat", "/proc/net/tcp", "/proc/net/tcp6"}})
		if err != nil {
			t.Fatal(err)
		}
		if try < 5 && procnet.Listening(string(res.Stdout), port) {
			continue
		}
		sp, err := sb.Start(ctx, sandbox.Command{Args: []string{"python3", "-m", "http.server", strconv.Itoa(port), "--bind", "127.0.0.1", "--directory", dir}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = sp.Close() })
		err = sp.WaitForPort(ctx, port)
		if err == nil {
			p = sp
			break
		}
		if try == 5 || !testport.TakenIn(err.Error()) {
			t.Fatal(err)
		}
	}
	ep, err := sb.Expose(ctx, port, sandbox.ExposeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return ep, port, p
}
