package main

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sandboxkit/sandbox"
)

// testToken is the bearer token the HTTP tests' servers accept.
const testToken = "test-token-0123456789abcdef"

// bearerTransport adds "Authorization: Bearer <token>" to every request.
type bearerTransport struct {
	token string
	base  http.RoundTripper
}

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.base.RoundTrip(r)
}

// bearerClient returns an HTTP client that sends token, on a transport of
// its own (closed with the test's idle connections).
func bearerClient(token string) *http.Client {
	return &http.Client{Transport: bearerTransport{token: token, base: http.DefaultTransport.(*http.Transport).Clone()}}
}

// httpServer serves srv over streamable HTTP on a loopback port with o
// until the test ends, and returns the endpoint's URL.
func httpServer(t *testing.T, srv *mcpServer, o httpOptions) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.serveListener(ctx, ln, o) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return "http://" + ln.Addr().String() + "/mcp"
}

// httpConnect opens an MCP session over HTTP sending token.
func httpConnect(t *testing.T, endpoint, token string) (*mcp.ClientSession, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	hc := bearerClient(token)
	t.Cleanup(hc.CloseIdleConnections)
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "http-test", Version: "v0"}, nil).
		Connect(ctx, &mcp.StreamableClientTransport{Endpoint: endpoint, HTTPClient: hc}, nil)
	if err == nil {
		t.Cleanup(func() { cs.Close() })
	}
	return cs, err
}

const initializeBody = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}`

// rawPost sends one JSON-RPC POST with the Authorization header auth
// (none when empty) and, when set, a session id; it returns the status,
// the WWW-Authenticate header and the body.
func rawPost(t *testing.T, endpoint, auth, session, body string) (int, string, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, endpoint, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	if session != "" {
		req.Header.Set(sessionIDHeader, session)
		req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
	}
	hc := &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone(), Timeout: time.Minute}
	defer hc.CloseIdleConnections()
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, resp.Header.Get("WWW-Authenticate"), string(b)
}

func countSandboxes(t *testing.T, c *sandbox.Client) int {
	t.Helper()
	n := 0
	for _, err := range c.List(context.Background(), sandbox.ListOptions{}) {
		if err != nil {
			t.Fatal(err)
		}
		n++
	}
	return n
}

func countSessions(srv *mcpServer) int {
	n := 0
	for range srv.server.Sessions() {
		n++
	}
	return n
}

// TestMCPHTTPAuth checks that a request without the token, or with a wrong
// one, is refused with 401 before a session opens or a tool runs, that the
// right token works, and that a session is bound to the token that opened
// it.
func TestMCPHTTPAuth(t *testing.T) {
	t.Parallel()
	const other = "second-token-ABCDEFGHIJKLMNOP"
	srv, client := newTestServer(t, memoryURL(t), mcpConfig{})
	endpoint := httpServer(t, srv, httpOptions{Tokens: []string{testToken, other}})

	for _, auth := range []string{"", "Bearer wrong-token-0123456789abcdef", "Bearer " + testToken + "x", "Bearer " + testToken[:len(testToken)-1],
		"Basic " + testToken, testToken, "Bearer", "Bearer " + strings.ToUpper(testToken)} {
		code, www, body := rawPost(t, endpoint, auth, "", initializeBody)
		if code != http.StatusUnauthorized || !strings.HasPrefix(www, "Bearer") {
			t.Errorf("initialize with Authorization %q: %d, WWW-Authenticate %q, %q; want 401 with a Bearer challenge", auth, code, www, body)
		}
		if strings.Contains(body, testToken) {
			t.Errorf("the refusal shows the token: %q", body)
		}
	}
	if _, err := httpConnect(t, endpoint, "wrong-token-0123456789abcdef"); err == nil {
		t.Errorf("a go-sdk client with a wrong token connected")
	}
	if n := countSessions(srv); n != 0 {
		t.Errorf("%d sessions after unauthenticated requests, want 0", n)
	}

	cs, err := httpConnect(t, endpoint, testToken)
	if err != nil {
		t.Fatalf("connect with the token: %v", err)
	}
	ok[writeOut](t, cs, "write_file", map[string]any{"path": "a.txt", "content": "mine"})
	if n := countSandboxes(t, client); n != 1 {
		t.Errorf("%d sandboxes, want 1", n)
	}
	// A tool call for the live session, without the token or with another
	// one, does not run.
	call := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"write_file","arguments":{"path":"pwned.txt","content":"x"}}}`
	for _, auth := range []string{"", "Bearer nope-nope-nope-nope-nope", "Bearer " + other} {
		code, _, body := rawPost(t, endpoint, auth, cs.ID(), call)
		if code != http.StatusUnauthorized && code != http.StatusForbidden {
			t.Errorf("tools/call on the session with Authorization %q: %d %q, want 401 or 403", auth, code, body)
		}
	}
	wantToolError(t, cs, "read_file", map[string]any{"path": "pwned.txt"}, "file_not_found")
	// The lower-case scheme is accepted (RFC 7235: case-insensitive).
	if code, _, body := rawPost(t, endpoint, "bearer "+other, "", initializeBody); code != http.StatusOK {
		t.Errorf("initialize with the second token: %d %q", code, body)
	}
}

// TestMCPHTTPSessionCap checks that a token holds at most MaxSessions
// sessions, even when many open at once, that the refusal is a clear 429
// that opens nothing, that another token has its own cap, and that ending
// a session frees its place.
func TestMCPHTTPSessionCap(t *testing.T) {
	t.Parallel()
	const other = "second-token-ABCDEFGHIJKLMNOP"
	srv, _ := newTestServer(t, memoryURL(t), mcpConfig{})
	endpoint := httpServer(t, srv, httpOptions{Tokens: []string{testToken, other}, MaxSessions: 3})

	// 12 clients at once: exactly 3 get in.
	var (
		mu      sync.Mutex
		in      []*mcp.ClientSession
		refused int
		wg      sync.WaitGroup
	)
	for range 12 {
		wg.Go(func() {
			cs, err := httpConnect(t, endpoint, testToken)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				refused++
				return
			}
			in = append(in, cs)
		})
	}
	wg.Wait()
	if len(in) != 3 || refused != 9 {
		t.Fatalf("12 concurrent sessions with a cap of 3: %d opened, %d refused", len(in), refused)
	}
	code, _, body := rawPost(t, endpoint, "Bearer "+testToken, "", initializeBody)
	if code != http.StatusTooManyRequests || !strings.Contains(body, "too many sessions") {
		t.Errorf("a session past the cap: %d %q, want 429 saying too many sessions", code, body)
	}
	// A client probes with server/discover before it initializes; the go-sdk
	// serves such a request in a session of its own that it closes when the
	// request ends, after the response has gone out, so a refused client's
	// probe can still be listed for a moment. It must not stay.
	deadline := time.Now().Add(10 * time.Second)
	n := countSessions(srv)
	for n > 3 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
		n = countSessions(srv)
	}
	if n != 3 {
		t.Errorf("%d server sessions, want 3 (refusals open none)", n)
	}
	// The other token has its own cap.
	if _, err := httpConnect(t, endpoint, other); err != nil {
		t.Errorf("the second token cannot open a session: %v", err)
	}
	// Sessions at the cap still work.
	for _, cs := range in {
		ok[filesOut](t, cs, "ls", map[string]any{})
	}
	// Ending one frees its place.
	in[0].Close()
	deadline = time.Now().Add(10 * time.Second)
	for {
		cs, err := httpConnect(t, endpoint, testToken)
		if err == nil {
			ok[filesOut](t, cs, "ls", map[string]any{})
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no session can open after one of the 3 ended: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestMCPHTTPIdleReleasesSandbox checks that a session that sends nothing
// for IdleTimeout ends and its sandbox is destroyed, while a session that
// keeps sending stays.
func TestMCPHTTPIdleReleasesSandbox(t *testing.T) {
	t.Parallel()
	// Wide enough that the busy session's requests, one every idle/8, keep
	// it alive on a loaded machine (at 400 ms, under a load average of 70
	// with the package's tests in parallel, a gap between two of them
	// passed for idleness and ended it too).
	const idle = 2 * time.Second
	srv, client := newTestServer(t, memoryURL(t), mcpConfig{})
	endpoint := httpServer(t, srv, httpOptions{Tokens: []string{testToken}, IdleTimeout: idle, MaxSessions: 2})
	quiet, err := httpConnect(t, endpoint, testToken)
	if err != nil {
		t.Fatal(err)
	}
	ok[writeOut](t, quiet, "write_file", map[string]any{"path": "a.txt", "content": "quiet"})
	// The busy session makes its first request as soon as it opens: on a
	// starved host the quiet one's first call alone can take longer than
	// the idle limit.
	busy, err := httpConnect(t, endpoint, testToken)
	if err != nil {
		t.Fatal(err)
	}
	ok[writeOut](t, busy, "write_file", map[string]any{"path": "a.txt", "content": "busy"})
	if n := countSandboxes(t, client); n != 2 {
		t.Fatalf("%d sandboxes, want 2", n)
	}
	start := time.Now()
	for countSandboxes(t, client) != 1 {
		if time.Since(start) > 5*idle+5*time.Second {
			t.Fatalf("the idle session's sandbox is still there %v after its last request (idle limit %v)", time.Since(start), idle)
		}
		ok[readOut](t, busy, "read_file", map[string]any{"path": "a.txt"})
		time.Sleep(idle / 8)
	}
	t.Logf("idle session's sandbox destroyed %v after its last request (limit %v)", time.Since(start).Round(time.Millisecond), idle)
	if r := ok[readOut](t, busy, "read_file", map[string]any{"path": "a.txt"}); !strings.Contains(r.Content, "busy") {
		t.Errorf("the busy session lost its sandbox: %q", r.Content)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := quiet.CallTool(ctx, &mcp.CallToolParams{Name: "ls", Arguments: map[string]any{}}); err == nil {
		t.Errorf("the idle session still answers after its end")
	}
	// Its place is free again: a new session opens beside the busy one.
	if _, err := httpConnect(t, endpoint, testToken); err != nil {
		t.Errorf("no new session after the idle one ended (cap 2): %v", err)
	}
}

// syncBuffer is a bytes.Buffer safe for a writer and a reader at once.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// startMCPCommand runs "sandbox mcp ARGS" in process with env until the
// test ends, and returns its stderr once the endpoint is announced.
func startMCPCommand(t *testing.T, env map[string]string, args ...string) (endpoint string, stderr *syncBuffer) {
	t.Helper()
	stderr = &syncBuffer{}
	a := newApp(strings.NewReader(""), io.Discard, stderr)
	a.getenv = func(k string) string { return env[k] }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() { done <- a.run(ctx, append([]string{"--url", memoryURL(t), "mcp"}, args...)) }()
	t.Cleanup(func() {
		cancel()
		if code := <-done; code != 0 {
			t.Errorf("sandbox mcp exited %d: %s", code, stderr)
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		for _, line := range strings.Split(stderr.String(), "\n") {
			if _, rest, ok := strings.Cut(line, "serving streamable HTTP on "); ok {
				return strings.TrimSpace(rest), stderr
			}
		}
		select {
		case code := <-done:
			done <- code
			t.Fatalf("sandbox mcp exited %d: %s", code, stderr)
		case <-time.After(10 * time.Millisecond):
		}
	}
	t.Fatalf("sandbox mcp announced no endpoint: %s", stderr)
	return "", nil
}

// TestMCPHTTPGeneratedToken runs "sandbox mcp --http": the token it prints
// on stderr opens a session, and a request without it is refused.
func TestMCPHTTPGeneratedToken(t *testing.T) {
	t.Parallel()
	endpoint, stderr := startMCPCommand(t, nil, "--http", "127.0.0.1:0")
	var token string
	for _, line := range strings.Split(stderr.String(), "\n") {
		if _, rest, ok := strings.Cut(line, `"Authorization: Bearer `); ok {
			token = strings.TrimSuffix(strings.TrimSpace(rest), `"`)
		}
	}
	if len(token) < 40 || checkToken(token) != nil {
		t.Fatalf("no usable token on stderr: %q", stderr)
	}
	if code, _, _ := rawPost(t, endpoint, "", "", initializeBody); code != http.StatusUnauthorized {
		t.Errorf("initialize without the token: %d, want 401", code)
	}
	cs, err := httpConnect(t, endpoint, token)
	if err != nil {
		t.Fatalf("connect with the printed token: %v", err)
	}
	ok[filesOut](t, cs, "ls", map[string]any{})

	// Two servers generate two different tokens.
	_, stderr2 := startMCPCommand(t, nil, "--http", "127.0.0.1:0")
	if strings.Contains(stderr2.String(), token) {
		t.Errorf("a second server printed the same token")
	}
}

// TestMCPHTTPGivenToken checks the token given through SANDBOX_MCP_TOKEN
// or --token-file: it is not printed, it works, and a file other users can
// read, two sources at once, a short token or an empty file are refused at
// start without showing the token.
func TestMCPHTTPGivenToken(t *testing.T) {
	t.Parallel()
	endpoint, stderr := startMCPCommand(t, map[string]string{tokenEnv: testToken}, "--http", "127.0.0.1:0", "--max-sessions", "1")
	if strings.Contains(stderr.String(), testToken) {
		t.Errorf("the given token is printed: %s", stderr)
	}
	if _, err := httpConnect(t, endpoint, testToken); err != nil {
		t.Fatalf("connect with $%s: %v", tokenEnv, err)
	}
	if _, err := httpConnect(t, endpoint, testToken); err == nil {
		t.Errorf("a second session opened with --max-sessions 1")
	}

	dir := t.TempDir()
	file := filepath.Join(dir, "tokens")
	const second = "file-token-2-abcdefghijklmnop"
	if err := os.WriteFile(file, []byte("# clients\n"+testToken+"\n\n  "+second+"  \n"), 0o600); err != nil {
		t.Fatal(err)
	}
	endpoint, stderr = startMCPCommand(t, nil, "--http", "127.0.0.1:0", "--token-file", file)
	for _, tok := range []string{testToken, second} {
		if strings.Contains(stderr.String(), tok) {
			t.Errorf("a token of the file is printed: %s", stderr)
		}
		if _, err := httpConnect(t, endpoint, tok); err != nil {
			t.Errorf("connect with a token of the file: %v", err)
		}
	}

	bad := func(name, content string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, c := range []struct {
		name string
		env  map[string]string
		args []string
		want string
	}{
		{"world-readable file", nil, []string{"--http", "127.0.0.1:0", "--token-file", bad("open", testToken, 0o644)}, "chmod 600"},
		{"empty file", nil, []string{"--http", "127.0.0.1:0", "--token-file", bad("empty", "# nothing\n", 0o600)}, "no token"},
		{"missing file", nil, []string{"--http", "127.0.0.1:0", "--token-file", filepath.Join(dir, "missing")}, "--token-file"},
		{"short token", map[string]string{tokenEnv: "short-secret"}, []string{"--http", "127.0.0.1:0"}, "at least 16"},
		{"token with a space", nil, []string{"--http", "127.0.0.1:0", "--token-file", bad("space", "abcdefgh ijklmnopqrst", 0o600)}, "position 9"},
		{"both sources", map[string]string{tokenEnv: testToken}, []string{"--http", "127.0.0.1:0", "--token-file", file}, "both set"},
		{"non-loopback, generated token", nil, []string{"--http", "0.0.0.0:0"}, "--token-file or $SANDBOX_MCP_TOKEN"},
		{"non-loopback name, generated token", nil, []string{"--http", "example.com:8931"}, "loopback"},
		{"token file without --http", nil, []string{"--token-file", file}, "only with --http"},
		{"zero sessions", nil, []string{"--http", "127.0.0.1:0", "--max-sessions", "0"}, "--max-sessions"},
		{"zero idle", nil, []string{"--http", "127.0.0.1:0", "--idle-timeout", "0s"}, "--idle-timeout"},
		{"zero execute timeout", nil, []string{"--execute-timeout", "0s"}, "--execute-timeout"},
	} {
		var out, errb bytes.Buffer
		a := newApp(strings.NewReader(""), &out, &errb)
		a.getenv = func(k string) string { return c.env[k] }
		r := invokeApp(t, a, memoryURL(t), append([]string{"mcp"}, c.args...)...)
		if r.code != 125 || !strings.Contains(r.stderr, c.want) || strings.Contains(r.stderr, testToken) || strings.Contains(r.stderr, "short-secret") {
			t.Errorf("%s: exit %d, stderr %q; want 125 naming %q, without the token", c.name, r.code, r.stderr, c.want)
		}
	}
	if err := checkListenAddr("0.0.0.0:8931", true); err != nil {
		t.Errorf("a non-loopback address with a given token: %v", err)
	}
	for _, addr := range []string{"127.0.0.1:1", "[::1]:1", "localhost:1"} {
		if err := checkListenAddr(addr, false); err != nil {
			t.Errorf("%s with a generated token: %v", addr, err)
		}
	}
}

// TestMCPHTTPKeepsOtherChecks checks that with the right token, a foreign
// Host header (DNS rebinding), a cross-origin browser request and a body
// over the limit are still refused, and open no session.
func TestMCPHTTPKeepsOtherChecks(t *testing.T) {
	t.Parallel()
	srv, _ := newTestServer(t, memoryURL(t), mcpConfig{})
	endpoint := httpServer(t, srv, httpOptions{Tokens: []string{testToken}})
	send := func(body string, edit func(*http.Request)) int {
		req, err := http.NewRequest(http.MethodPost, endpoint, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Authorization", "Bearer "+testToken)
		edit(req)
		hc := &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone(), Timeout: time.Minute}
		defer hc.CloseIdleConnections()
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := send(initializeBody, func(r *http.Request) { r.Host = "evil.example:80" }); code != http.StatusForbidden {
		t.Errorf("a foreign Host header: %d, want 403", code)
	}
	if code := send(initializeBody, func(r *http.Request) {
		r.Header.Set("Sec-Fetch-Site", "cross-site")
		r.Header.Set("Origin", "https://evil.example")
	}); code != http.StatusForbidden {
		t.Errorf("a cross-origin browser request: %d, want 403", code)
	}
	big := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"pad":"` + strings.Repeat("x", 5<<20) + `"}}`
	if code := send(big, func(*http.Request) {}); code != http.StatusRequestEntityTooLarge && code != http.StatusBadRequest {
		t.Errorf("a 5 MiB body: %d, want 413 or 400", code)
	}
	if n := countSessions(srv); n != 0 {
		t.Errorf("%d sessions after refused requests, want 0", n)
	}
	if code := send(initializeBody, func(*http.Request) {}); code != http.StatusOK {
		t.Errorf("a plain initialize with the token: %d, want 200", code)
	}
}
