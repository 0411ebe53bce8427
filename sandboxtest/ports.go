package sandboxtest

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha1"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/internal/procnet"
	"github.com/sandboxkit/sandbox/internal/testport"
)

// The Ports group: a server started in a sandbox, reached from the host
// through Sandbox.Expose. It runs on every provider that declares
// Capabilities.Ports and background processes, with python3 in the
// sandbox (the servers are Python's standard library).

func init() {
	portTests = append(portTests,
		test{name: "HTTPServerFileByteExact", needs: needsPorts, fn: testPortFileByteExact},
		test{name: "StreamingResponse", needs: needsPorts, fn: testPortStreaming},
		test{name: "WebSocketEcho", needs: needsPorts, fn: testPortWebSocket},
		test{name: "UnknownPort", needs: needsPorts, fn: testPortUnknown},
		test{name: "FailsAfterDestroy", needs: needsPorts, fn: testPortAfterDestroy},
		test{name: "WaitForPortServerDied", needs: needsProcesses, fn: testWaitForPortServerDied},
		test{name: "WaitForPortServerDiedOnTakenPort", needs: needsPorts, fn: testWaitForPortTakenPort},
		test{name: "WaitForPortBoundedWithoutDeadline", needs: needsProcesses, fn: testWaitForPortBounded},
	)
}

// portTests is the Ports group.
var portTests []test

func needsPorts(c sandbox.Capabilities) string {
	if !c.Ports {
		return "provider has no port exposure (Capabilities.Ports=false: not a driver.PortExposer)"
	}
	return needsProcesses(c)
}

// portServer is a Python standard-library server for the group: GET
// /stream sends "first\n", then waits until the file named by its second
// argument exists and sends "second\n"; GET /ws is a WebSocket echo
// server (one text or binary message at a time, unfragmented).
const portServer = `import base64, hashlib, http.server, os, struct, sys, time
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *a): pass
    def do_GET(self):
        if self.path == "/stream":
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            def chunk(b):
                self.wfile.write(b"%x\r\n%s\r\n" % (len(b), b)); self.wfile.flush()
            chunk(b"first\n")
            while not os.path.exists(sys.argv[2]): time.sleep(0.02)
            chunk(b"second\n"); chunk(b"")
            return
        if self.path == "/ws":
            key = self.headers["Sec-WebSocket-Key"]
            acc = base64.b64encode(hashlib.sha1((key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").encode()).digest()).decode()
            self.send_response(101)
            self.send_header("Upgrade", "websocket"); self.send_header("Connection", "Upgrade")
            self.send_header("Sec-WebSocket-Accept", acc); self.end_headers(); self.wfile.flush()
            r = self.rfile
            while True:
                h = r.read(2)
                if len(h) < 2: return
                op, n = h[0] & 15, h[1] & 127
                if n == 126: n = struct.unpack(">H", r.read(2))[0]
                elif n == 127: n = struct.unpack(">Q", r.read(8))[0]
                mask = r.read(4) if h[1] & 128 else b"\0\0\0\0"
                data = bytes(b ^ mask[i % 4] for i, b in enumerate(r.read(n)))
                if op == 8:
                    self.wfile.write(b"\x88\x00"); self.wfile.flush(); return
                hdr = bytes([128 | op])
                if len(data) < 126: hdr += bytes([len(data)])
                elif len(data) < 65536: hdr += bytes([126]) + struct.pack(">H", len(data))
                else: hdr += bytes([127]) + struct.pack(">Q", len(data))
                self.wfile.write(hdr + data); self.wfile.flush()
        self.send_response(404); self.send_header("Content-Length", "0"); self.end_headers()
http.server.ThreadingHTTPServer(("0.0.0.0", int(sys.argv[1])), H).serve_forever()
`

// portClient returns the HTTP client for endpoints: the harness's, or a
// fresh one whose idle connections are closed at cleanup.
func (s *suite) portClient(t *testing.T) *http.Client {
	if s.h.HTTPClient != nil {
		c := s.h.HTTPClient(t)
		t.Cleanup(c.CloseIdleConnections)
		return c
	}
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

// testPort picks a port for a server in the sandbox (testport.Pick).
func testPort() int { return testport.Pick() }

// serverStarts bounds how many ports startServerOpts tries: another
// process on a shared network may hold the one it picked first.
const serverStarts = 5

// portTaken reports whether something in sb's network listens on port
// already: on a network shared with the host, the wait for a new server
// would take another program's listener for it.
func portTaken(ctx context.Context, t *testing.T, sb *sandbox.Sandbox, port int) bool {
	t.Helper()
	res, err := sb.Exec(ctx, sandbox.Command{Args: []string{"cat", "/proc/net/tcp", "/proc/net/tcp6"}})
	if err != nil {
		t.Fatalf("reading the sandbox's sockets: %v", err)
	}
	taken := procnet.Listening(string(res.Stdout), port)
	if taken {
		t.Logf("port %d: something listens on it already, picking another", port)
	}
	return taken
}

// startServer starts line (with PORT replaced by a fresh port) in sb,
// waits until it listens and exposes it. It skips when python3 is
// missing.
func startServer(ctx context.Context, t *testing.T, s *suite, sb *sandbox.Sandbox, line string) (sandbox.Endpoint, *sandbox.Process) {
	t.Helper()
	return startServerOpts(ctx, t, s, sb, line, sandbox.ExposeOptions{})
}

// startServerOpts is startServer exposing the port with opts.
func startServerOpts(ctx context.Context, t *testing.T, s *suite, sb *sandbox.Sandbox, line string, opts sandbox.ExposeOptions) (sandbox.Endpoint, *sandbox.Process) {
	t.Helper()
	if r := sh(ctx, t, sb, "command -v python3"); r.ExitCode != 0 {
		t.Skip("python3 is not installed in the sandbox (the Ports group's servers need it)")
	}
	port, p := startListening(ctx, t, sb, func(port int) sandbox.Command {
		return sandbox.Command{Shell: strings.ReplaceAll(line, "PORT", fmt.Sprint(port))}
	})
	ep, err := sb.Expose(ctx, port, opts)
	if err != nil {
		t.Fatalf("Expose(%d): %v", port, err)
	}
	if ep.Port != port || !strings.HasPrefix(ep.URL, "http") {
		t.Fatalf("Expose(%d) = %v", port, ep)
	}
	return ep, p
}

// startListening starts the server cmd makes for a port on one that
// nothing in sb's network listens on yet, and waits until it listens. On
// a network shared with other programs the port may be taken between the
// look and the server's bind: the server then reports it taken, and
// another port is tried (serverStarts in all). The process is killed when
// t ends.
func startListening(ctx context.Context, t *testing.T, sb *sandbox.Sandbox, cmd func(port int) sandbox.Command) (int, *sandbox.Process) {
	t.Helper()
	for try := 1; ; try++ {
		port := testPort()
		if try < serverStarts && portTaken(ctx, t, sb, port) {
			continue
		}
		out := &lockedBuffer{} // written by the process's output pumps while read below
		c := cmd(port)
		c.Stdout, c.Stderr = out, out
		p, err := sb.Start(ctx, c)
		if err != nil {
			t.Fatalf("Start server: %v", err)
		}
		t.Cleanup(func() {
			kctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_ = p.Kill(kctx)
			_ = p.Close()
		})
		wctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		err = p.WaitForPort(wctx, port)
		cancel()
		if err == nil {
			return port, p
		}
		if try < serverStarts && testport.TakenIn(out.String()) {
			t.Logf("port %d taken on the sandbox's network, trying another: %v", port, err)
			continue
		}
		t.Fatalf("WaitForPort(%d): %v (server output %q)", port, err, out.String())
	}
}

func get(ctx context.Context, t *testing.T, hc *http.Client, ep sandbox.Endpoint, path string) (*http.Response, error) {
	t.Helper()
	req, err := ep.NewRequest(ctx, http.MethodGet, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	return hc.Do(req)
}

func testPortFileByteExact(ctx context.Context, t *testing.T, s *suite) {
	sb := s.create(ctx, t, nil)
	dir := sb.Home() + "/www"
	want := make([]byte, 3<<20+17)
	_, _ = rand.Read(want)
	check(t, sb.WriteFile(ctx, dir+"/blob.bin", want))
	ep, _ := startServer(ctx, t, s, sb, "exec python3 -m http.server PORT --bind 0.0.0.0 --directory "+dir)
	resp, err := get(ctx, t, s.portClient(t), ep, "/blob.bin")
	if err != nil {
		t.Fatalf("GET through %v: %v", ep, err)
	}
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET: status %d, read error %v", resp.StatusCode, err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("GET returned %d bytes that differ from the %d written", len(got), len(want))
	}
}

func testPortStreaming(ctx context.Context, t *testing.T, s *suite) {
	sb := s.create(ctx, t, nil)
	home := sb.Home()
	check(t, sb.WriteFile(ctx, home+"/srv.py", []byte(portServer)))
	ep, _ := startServer(ctx, t, s, sb, "exec python3 "+home+"/srv.py PORT "+home+"/go")
	resp, err := get(ctx, t, s.portClient(t), ep, "/stream")
	if err != nil {
		t.Fatalf("GET /stream: %v", err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	// The server sends the second line only once the file exists: reading
	// the first before creating it proves nothing buffered the response.
	line, err := br.ReadString('\n')
	if err != nil || line != "first\n" {
		t.Fatalf("first line %q, %v", line, err)
	}
	check(t, sb.WriteFile(ctx, home+"/go", nil))
	rest, err := io.ReadAll(br)
	if err != nil || string(rest) != "second\n" {
		t.Fatalf("rest %q, %v", rest, err)
	}
}

func testPortWebSocket(ctx context.Context, t *testing.T, s *suite) {
	sb := s.create(ctx, t, nil)
	home := sb.Home()
	check(t, sb.WriteFile(ctx, home+"/srv.py", []byte(portServer)))
	ep, _ := startServer(ctx, t, s, sb, "exec python3 "+home+"/srv.py PORT "+home+"/go")
	req, err := ep.NewRequest(ctx, http.MethodGet, "/ws", nil)
	if err != nil {
		t.Fatal(err)
	}
	key := base64.StdEncoding.EncodeToString([]byte("sandboxtest-key!"))
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "websocket")
	req.Header.Set("Sec-WebSocket-Version", "13")
	req.Header.Set("Sec-WebSocket-Key", key)
	resp, err := s.portClient(t).Do(req)
	if err != nil {
		t.Fatalf("WebSocket handshake: %v", err)
	}
	defer resp.Body.Close()
	sum := sha1.Sum([]byte(key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"))
	if resp.StatusCode != http.StatusSwitchingProtocols || resp.Header.Get("Sec-WebSocket-Accept") != base64.StdEncoding.EncodeToString(sum[:]) {
		t.Fatalf("handshake: status %d, accept %q", resp.StatusCode, resp.Header.Get("Sec-WebSocket-Accept"))
	}
	conn, ok := resp.Body.(io.ReadWriteCloser)
	if !ok {
		t.Fatalf("101 response body %T is not writable", resp.Body)
	}
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	for _, msg := range [][]byte{[]byte("hello, sandbox"), bytes.Repeat([]byte("0123456789abcdef"), 5000)} {
		if _, err := conn.Write(wsFrame(msg)); err != nil {
			t.Fatalf("write frame: %v", err)
		}
		got, err := readWSFrame(conn)
		if err != nil || !bytes.Equal(got, msg) {
			t.Fatalf("echo of %d bytes: got %d bytes, %v", len(msg), len(got), err)
		}
	}
}

// wsFrame is a masked binary frame carrying p (RFC 6455, client side).
func wsFrame(p []byte) []byte {
	b := []byte{0x82}
	switch {
	case len(p) < 126:
		b = append(b, 0x80|byte(len(p)))
	case len(p) < 1<<16:
		b = append(b, 0x80|126)
		b = binary.BigEndian.AppendUint16(b, uint16(len(p)))
	default:
		b = append(b, 0x80|127)
		b = binary.BigEndian.AppendUint64(b, uint64(len(p)))
	}
	mask := [4]byte{1, 2, 3, 4}
	b = append(b, mask[:]...)
	for i, c := range p {
		b = append(b, c^mask[i%4])
	}
	return b
}

// readWSFrame reads one unmasked, unfragmented frame's payload.
func readWSFrame(r io.Reader) ([]byte, error) {
	var h [2]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return nil, err
	}
	n := uint64(h[1] & 127)
	switch n {
	case 126:
		var b [2]byte
		if _, err := io.ReadFull(r, b[:]); err != nil {
			return nil, err
		}
		n = uint64(binary.BigEndian.Uint16(b[:]))
	case 127:
		var b [8]byte
		if _, err := io.ReadFull(r, b[:]); err != nil {
			return nil, err
		}
		n = binary.BigEndian.Uint64(b[:])
	}
	if n > 1<<24 {
		return nil, fmt.Errorf("frame of %d bytes", n)
	}
	p := make([]byte, n)
	_, err := io.ReadFull(r, p)
	return p, err
}

// testPortUnknown exposes a port nothing listens on: Expose fails naming
// the port, or a request through the endpoint fails or gets an error
// status (cloud edges answer 502).
// testPortUnknown: a port nothing listens on is a portable error naming
// the port, FailedPrecondition, whether Expose finds out (local checks the
// port) or the edge does on the first request (through the endpoint's
// Transport, which reads the edge's answer: a remote edge's 502 names
// nothing on Daytona).
func testPortUnknown(ctx context.Context, t *testing.T, s *suite) {
	sb := s.create(ctx, t, nil)
	port := testPort()
	want := fmt.Sprintf("port %d", port)
	ep, err := sb.Expose(ctx, port, sandbox.ExposeOptions{})
	if err != nil {
		if sandbox.CodeOf(err) != sandbox.FailedPrecondition || !strings.Contains(err.Error(), want) {
			t.Fatalf("Expose(%d) = %v (code %v), want FailedPrecondition naming %q", port, err, sandbox.CodeOf(err), want)
		}
		return
	}
	resp, err := get(ctx, t, ep.Client(s.portClient(t)), ep, "/")
	if err == nil {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		resp.Body.Close()
		t.Fatalf("GET on unknown port %d through the endpoint's client: status %d, body %q; want an error", port, resp.StatusCode, body)
	}
	if sandbox.CodeOf(err) != sandbox.FailedPrecondition || !strings.Contains(err.Error(), want) {
		t.Fatalf("GET on unknown port %d: %v (code %v), want FailedPrecondition naming %q", port, err, sandbox.CodeOf(err), want)
	}
}

func testPortAfterDestroy(ctx context.Context, t *testing.T, s *suite) {
	sb := s.create(ctx, t, nil)
	dir := sb.Home() + "/www"
	check(t, sb.WriteFile(ctx, dir+"/a.txt", []byte("alive")))
	ep, _ := startServer(ctx, t, s, sb, "exec python3 -m http.server PORT --bind 0.0.0.0 --directory "+dir)
	hc := s.portClient(t)
	resp, err := get(ctx, t, hc, ep, "/a.txt")
	if err != nil {
		t.Fatalf("GET before Destroy: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != "alive" {
		t.Fatalf("GET before Destroy: %q", body)
	}
	check(t, sb.Destroy(ctx))
	hc.CloseIdleConnections()
	resp, err = get(ctx, t, hc, ep, "/a.txt")
	if err == nil {
		defer resp.Body.Close()
		if resp.StatusCode < 400 {
			t.Fatalf("GET after Destroy: status %d, want a failure", resp.StatusCode)
		}
	}
}

// testWaitForPortServerDied waits for a port whose server exits at once:
// the wait ends within a few poll intervals (not at ctx's end), with
// FailedPrecondition naming the exit code and the server's last stderr.
func testWaitForPortServerDied(ctx context.Context, t *testing.T, s *suite) {
	sb := s.create(ctx, t, nil)
	p, err := sb.Start(ctx, sandbox.Command{Shell: "echo 'bind: address already in use' >&2; exit 7"})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	defer p.Close()
	start := time.Now()
	err = p.WaitForPort(ctx, testPort())
	took := time.Since(start)
	if err == nil {
		t.Fatal("WaitForPort for a server that exited returned nil")
	}
	if sandbox.CodeOf(err) != sandbox.FailedPrecondition {
		t.Errorf("WaitForPort = %v (code %v), want FailedPrecondition", err, sandbox.CodeOf(err))
	}
	for _, want := range []string{"exited with code 7", "address already in use"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("WaitForPort error %q does not say %q", err, want)
		}
	}
	if took > 10*time.Second {
		t.Errorf("WaitForPort took %v to notice the server had exited", took)
	}
}

// testWaitForPortTakenPort starts a server on a port another process of
// the sandbox already listens on: it fails to bind and exits. A wait for
// that server fails with FailedPrecondition and its exit, although the
// port listens (as it does on a network shared with other programs):
// the listener is not the server's.
func testWaitForPortTakenPort(ctx context.Context, t *testing.T, s *suite) {
	sb := s.create(ctx, t, nil)
	if r := sh(ctx, t, sb, "command -v python3"); r.ExitCode != 0 {
		t.Skip("python3 is not installed in the sandbox (the holder of the port is a Python listener)")
	}
	const holder = "import socket, time\ns = socket.socket()\ns.bind(('127.0.0.1', PORT))\ns.listen()\ntime.sleep(600)\n"
	const server = "import socket, sys\ns = socket.socket()\ntry:\n    s.bind(('127.0.0.1', PORT))\nexcept OSError as e:\n    sys.exit('bind: %s' % e)\n"
	port, _ := startListening(ctx, t, sb, func(port int) sandbox.Command {
		return sandbox.Command{Args: []string{"python3", "-c", strings.ReplaceAll(holder, "PORT", fmt.Sprint(port))}}
	})
	p, err := sb.Start(ctx, sandbox.Command{Args: []string{"python3", "-c", strings.ReplaceAll(server, "PORT", fmt.Sprint(port))}})
	if err != nil {
		t.Fatalf("Start the server: %v", err)
	}
	defer p.Close()
	r, err := p.Wait(ctx)
	if err != nil {
		t.Fatalf("Wait for the server: %v", err)
	}
	if r.ExitCode == 0 {
		t.Fatalf("the server bound port %d, which its holder listens on (stderr %q)", port, r.Stderr)
	}
	err = p.WaitForPort(ctx, port)
	if err == nil {
		t.Fatalf("WaitForPort(%d) for a server that exited with code %d (stderr %q) returned nil: the port's holder was taken for it", port, r.ExitCode, r.Stderr)
	}
	if sandbox.CodeOf(err) != sandbox.FailedPrecondition || !strings.Contains(err.Error(), fmt.Sprintf("exited with code %d", r.ExitCode)) {
		t.Errorf("WaitForPort = %v (code %v), want FailedPrecondition saying the server exited with code %d", err, sandbox.CodeOf(err), r.ExitCode)
	}
}

// testWaitForPortBounded waits, with a context without deadline, for a
// port nothing listens on: the wait ends at its bound (here overridden to
// 1s) with DeadlineExceeded naming the port.
func testWaitForPortBounded(ctx context.Context, t *testing.T, s *suite) {
	sb := s.create(ctx, t, nil)
	port := testPort()
	done := make(chan error, 1)
	start := time.Now()
	go func() {
		done <- sb.WaitForPortWith(context.WithoutCancel(ctx), port, sandbox.WaitForPortOptions{Timeout: time.Second})
	}()
	var err error
	select {
	case err = <-done:
	case <-ctx.Done():
		t.Fatal("WaitForPortWith with a 1s bound did not return before the test's deadline")
	}
	if took := time.Since(start); took < time.Second || took > 40*time.Second {
		t.Errorf("WaitForPortWith returned after %v, want about its 1s bound", took)
	}
	if sandbox.CodeOf(err) != sandbox.DeadlineExceeded || !strings.Contains(err.Error(), fmt.Sprintf("port %d", port)) {
		t.Fatalf("WaitForPortWith = %v, want DeadlineExceeded naming port %d", err, port)
	}
}

// lockedBuffer is a bytes.Buffer safe for a writer and a reader at once.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
