package main

import (
	"context"
	"io"
	"net"
	"net/http"
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
	if n := countSessions(srv); n != 3 {
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
	deadline := time.Now().Add(10 * time.Second)
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
	const idle = 400 * time.Millisecond
	srv, client := newTestServer(t, memoryURL(t), mcpConfig{})
	endpoint := httpServer(t, srv, httpOptions{Tokens: []string{testToken}, IdleTimeout: idle, MaxSessions: 2})
	quiet, err := httpConnect(t, endpoint, testToken)
	if err != nil {
		t.Fatal(err)
	}
	busy, err := httpConnect(t, endpoint, testToken)
	if err != nil {
		t.Fatal(err)
	}
	ok[writeOut](t, quiet, "write_file", map[string]any{"path": "a.txt", "content": "quiet"})
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
