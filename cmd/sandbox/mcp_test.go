package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sandboxkit/sandbox"
)

const testSecret = "tok-5ecret-XYZ-123"

// newTestServer returns an MCP server over url, closed at cleanup.
func newTestServer(t *testing.T, url string, cfg mcpConfig) (*mcpServer, *sandbox.Client) {
	t.Helper()
	ctx := context.Background()
	c, err := sandbox.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := newMCPServer(c, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := srv.Close(ctx); err != nil {
			t.Errorf("server close: %v", err)
		}
		c.Close()
	})
	return srv, c
}

// connect connects a go-sdk client to srv over an in-memory transport.
func connect(t *testing.T, srv *mcpServer, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	ctx := context.Background()
	ct, st := mcp.NewInMemoryTransports()
	if _, err := srv.server.Connect(ctx, st, nil); err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "v0"}, opts).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// call calls a tool and returns its result; a protocol error fails the test.
func call(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: protocol error %v", name, err)
	}
	return res
}

func text(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// ok calls a tool that must succeed and decodes its structured output.
func ok[T any](t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) T {
	t.Helper()
	res := call(t, cs, name, args)
	var out T
	if res.IsError {
		t.Fatalf("%s(%v): isError: %s", name, args, text(res))
	}
	b, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("%s: structured content %s: %v", name, b, err)
	}
	return out
}

// toolError calls a tool that must fail with an isError result whose text
// holds want.
func wantToolError(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any, want string) {
	t.Helper()
	res := call(t, cs, name, args)
	if !res.IsError || !strings.Contains(text(res), want) {
		t.Errorf("%s(%v): isError=%v %q, want an isError result containing %q", name, args, res.IsError, text(res), want)
	}
}

func toolNames(t *testing.T, cs *mcp.ClientSession) []string {
	t.Helper()
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range res.Tools {
		if tool.InputSchema == nil || tool.OutputSchema == nil || tool.Description == "" {
			t.Errorf("tool %s lacks a schema or description", tool.Name)
		}
		names = append(names, tool.Name)
	}
	slices.Sort(names)
	return names
}

func memoryURL(t *testing.T) string {
	return "memory://" + strings.ReplaceAll(t.Name(), "/", "-") + "-" + randomHex(4)
}

func localURL(t *testing.T) string {
	if runtime.GOOS != "linux" {
		t.Skip("the local provider needs Linux")
	}
	u := "local://" + t.TempDir()
	t.Cleanup(func() { destroyAll(t, u) })
	return u
}

var fileTools = []string{"edit_file", "glob", "grep", "ls", "metrics", "read_file", "write_file"}

// exerciseFileTools calls each file tool, and the escapes every one must
// refuse with an isError result.
func exerciseFileTools(t *testing.T, cs *mcp.ClientSession) {
	w := ok[writeOut](t, cs, "write_file", map[string]any{"path": "src/app.py", "content": "print('a')\nprint('b')\nprint('c')\n"})
	if w.Path != "src/app.py" || w.Bytes != 33 {
		t.Errorf("write_file = %+v", w)
	}
	r := ok[readOut](t, cs, "read_file", map[string]any{"path": "src/app.py", "offset": 1, "limit": 1})
	if r.TotalLines != 3 || !strings.Contains(r.Content, "print('b')") || strings.Contains(r.Content, "print('a')") || strings.Contains(r.Content, "print('c')") {
		t.Errorf("read_file offset 1 limit 1 = %+v", r)
	}
	e := ok[editOut](t, cs, "edit_file", map[string]any{"path": "src/app.py", "old_string": "'b'", "new_string": "'B'"})
	if e.Occurrences != 1 {
		t.Errorf("edit_file = %+v", e)
	}
	wantToolError(t, cs, "edit_file", map[string]any{"path": "src/app.py", "old_string": "print", "new_string": "x"}, "")
	l := ok[filesOut](t, cs, "ls", map[string]any{"path": "src"})
	if len(l.Files) != 1 || l.Files[0].Path != "src/app.py" || l.Files[0].IsDir {
		t.Errorf("ls src = %+v", l)
	}
	g := ok[filesOut](t, cs, "glob", map[string]any{"pattern": "*.py"})
	if len(g.Files) != 1 || g.Files[0].Path != "src/app.py" {
		t.Errorf("glob *.py = %+v", g)
	}
	gr := ok[grepOut](t, cs, "grep", map[string]any{"pattern": "'B'"})
	if len(gr.Matches) != 1 || gr.Matches[0].Line != 2 || gr.Matches[0].Path != "src/app.py" {
		t.Errorf("grep = %+v", gr)
	}
	// A regular expression, ignoring case, with context lines; a bad
	// expression is an isError result naming it.
	gr = ok[grepOut](t, cs, "grep", map[string]any{"pattern": `^PRINT\('b'\)$`, "regex": true, "ignore_case": true, "before": 1, "after": 1})
	if len(gr.Matches) != 3 || gr.Matches[1].Line != 2 || gr.Matches[1].Context || !gr.Matches[0].Context || gr.Matches[0].Line != 1 ||
		!gr.Matches[2].Context || gr.Matches[2].Text != "print('c')" {
		t.Errorf("grep with regex, ignore_case, before, after = %+v", gr)
	}
	wantToolError(t, cs, "grep", map[string]any{"pattern": "print(", "regex": true}, "print(")
	wantToolError(t, cs, "grep", map[string]any{"pattern": "x", "before": -1}, "before")
	wantToolError(t, cs, "read_file", map[string]any{"path": "missing.txt"}, "file_not_found")
	// Escapes come back as isError results, not protocol errors.
	for _, p := range []string{"../../../etc/passwd", "src/../../outside", "..", "/../../etc/hostname"} {
		wantToolError(t, cs, "read_file", map[string]any{"path": p}, "invalid_path")
		wantToolError(t, cs, "write_file", map[string]any{"path": p, "content": "x"}, "invalid_path")
	}
	wantToolError(t, cs, "ls", map[string]any{"path": "../.."}, "invalid_path")
	wantToolError(t, cs, "read_file", map[string]any{"path": ".fsbackend/binary"}, "invalid_path")
}

func TestMCPFileToolsInMemory(t *testing.T) {
	t.Parallel()
	srv, _ := newTestServer(t, memoryURL(t), mcpConfig{})
	cs := connect(t, srv, nil)
	if got := toolNames(t, cs); !slices.Equal(got, fileTools) {
		t.Errorf("tools without --allow-execute: %v, want %v", got, fileTools)
	}
	exerciseFileTools(t, cs)
	// execute is not offered, and calling it anyway fails.
	ctx := context.Background()
	if res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "execute", Arguments: map[string]any{"command": "id"}}); err == nil && !res.IsError {
		t.Errorf("execute without --allow-execute ran: %q", text(res))
	}
}

func TestMCPExecuteLocal(t *testing.T) {
	t.Parallel()
	url := localURL(t)
	srv, _ := newTestServer(t, url, mcpConfig{
		AllowExecute: true, Secrets: map[string]string{"CLI_TEST_TOKEN": testSecret}, ProgressInterval: 100 * time.Millisecond,
	})
	var progress atomic.Int32
	cs := connect(t, srv, &mcp.ClientOptions{ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
		if req.Params.ProgressToken == "tok-1" {
			progress.Add(1)
		}
	}})
	want := append([]string{"execute", "run_logs", "run_start", "run_status"}, fileTools...)
	slices.Sort(want)
	if got := toolNames(t, cs); !slices.Equal(got, want) {
		t.Errorf("tools with --allow-execute: %v, want %v", got, want)
	}
	exerciseFileTools(t, cs)

	x := ok[executeOut](t, cs, "execute", map[string]any{"command": "cat src/app.py | wc -l; python3 -c 'print(6*7)'; exit 3"})
	if x.ExitCode != 3 || !strings.Contains(x.Output, "3\n42") {
		t.Errorf("execute = %+v", x)
	}
	x = ok[executeOut](t, cs, "execute", map[string]any{"command": "sleep 30", "timeout_seconds": 1})
	if !x.TimedOut {
		t.Errorf("execute with timeout_seconds 1 = %+v", x)
	}
	x = ok[executeOut](t, cs, "execute", map[string]any{"command": "kill -KILL $$"})
	if x.Signal != "SIGKILL" || x.ExitCode != -1 || x.TimedOut {
		t.Errorf("execute of a command SIGKILL ended = %+v, want signal SIGKILL, exit_code -1", x)
	}

	// A secret given by env name reaches commands and no result shows it.
	x = ok[executeOut](t, cs, "execute", map[string]any{"command": `echo "tok=$CLI_TEST_TOKEN"; echo "$CLI_TEST_TOKEN" > leak.txt`})
	if strings.Contains(x.Output, testSecret) || !strings.Contains(x.Output, "tok=[REDACTED]") {
		t.Errorf("execute output %q shows the secret or lacks the redaction", x.Output)
	}
	for _, res := range []*mcp.CallToolResult{
		call(t, cs, "read_file", map[string]any{"path": "leak.txt"}),
		call(t, cs, "grep", map[string]any{"pattern": "5ecret"}),
		call(t, cs, "read_file", map[string]any{"path": testSecret + ".txt"}),
		call(t, cs, "ls", map[string]any{}),
	} {
		b, _ := json.Marshal(res)
		if strings.Contains(string(b), testSecret) {
			t.Errorf("a result shows the secret: %s", b)
		}
	}
	if r := ok[readOut](t, cs, "read_file", map[string]any{"path": "leak.txt"}); !strings.Contains(r.Content, "[REDACTED]") {
		t.Errorf("read_file of the secret's file = %q", r.Content)
	}

	// A symbolic link leading out of the workspace is refused by the file tools.
	ok[executeOut](t, cs, "execute", map[string]any{"command": "ln -s /etc etc-link && ln -s /etc/hostname host-link"})
	wantToolError(t, cs, "read_file", map[string]any{"path": "etc-link/hostname"}, "invalid_path")
	wantToolError(t, cs, "read_file", map[string]any{"path": "host-link"}, "invalid_path")
	wantToolError(t, cs, "write_file", map[string]any{"path": "etc-link/evil", "content": "x"}, "invalid_path")

	// A long execute reports progress when the client asks for it.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	params := &mcp.CallToolParams{Name: "execute", Arguments: map[string]any{"command": "sleep 2; echo done"}}
	params.SetProgressToken("tok-1")
	res, err := cs.CallTool(ctx, params)
	if err != nil || res.IsError || !strings.Contains(text(res), "done") {
		t.Fatalf("execute with progress: %v %q", err, text(res))
	}
	if progress.Load() == 0 {
		t.Errorf("no progress notification during a 2 s execute (interval 100ms)")
	}
	t.Logf("%d progress notifications during sleep 2", progress.Load())

	// Runs: start (idempotent), status, logs (redacted).
	st := ok[runStatusOut](t, cs, "run_start", map[string]any{"id": "r1", "command": `echo "start $CLI_TEST_TOKEN"; echo second`})
	if st.ID != "r1" {
		t.Errorf("run_start = %+v", st)
	}
	deadline := time.Now().Add(2 * time.Minute)
	for st.State != "exited" && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
		st = ok[runStatusOut](t, cs, "run_status", map[string]any{"id": "r1"})
	}
	if st.State != "exited" || st.ExitCode == nil || *st.ExitCode != 0 {
		t.Errorf("run_status = %+v", st)
	}
	lg := ok[runLogsOut](t, cs, "run_logs", map[string]any{"id": "r1"})
	if lg.Output != "start [REDACTED]\nsecond\n" || !lg.Done || lg.Next == 0 {
		t.Errorf("run_logs = %+v", lg)
	}
	lg = ok[runLogsOut](t, cs, "run_logs", map[string]any{"id": "r1", "offset": lg.Next})
	if lg.Output != "" || !lg.Done {
		t.Errorf("run_logs past the end = %+v", lg)
	}
	wantToolError(t, cs, "run_status", map[string]any{"id": "nope"}, "NotFound")
	wantToolError(t, cs, "run_start", map[string]any{"id": "r1", "command": "true"}, "AlreadyExists")
}

// TestMCPSessionsGetTheirOwnSandbox runs two MCP sessions at once: each gets
// its own sandbox, and both are destroyed when the sessions end.
func TestMCPSessionsGetTheirOwnSandbox(t *testing.T) {
	t.Parallel()
	srv, client := newTestServer(t, memoryURL(t), mcpConfig{})
	count := func() int {
		n := 0
		for _, err := range client.List(context.Background(), sandbox.ListOptions{Labels: map[string]string{mcpLabel: "1"}}) {
			if err != nil {
				t.Fatal(err)
			}
			n++
		}
		return n
	}
	a, b := connect(t, srv, nil), connect(t, srv, nil)
	if n := count(); n != 0 {
		t.Errorf("%d sandboxes before any tool call, want 0 (lazy create)", n)
	}
	var wg sync.WaitGroup
	for i, cs := range []*mcp.ClientSession{a, b} {
		wg.Go(func() {
			call(t, cs, "write_file", map[string]any{"path": "who.txt", "content": fmt.Sprintf("session %d", i)})
		})
	}
	wg.Wait()
	for i, cs := range []*mcp.ClientSession{a, b} {
		r := ok[readOut](t, cs, "read_file", map[string]any{"path": "who.txt"})
		if !strings.Contains(r.Content, fmt.Sprintf("session %d", i)) {
			t.Errorf("session %d reads %q: the sessions share a sandbox", i, r.Content)
		}
	}
	if n := count(); n != 2 {
		t.Errorf("%d sandboxes for two sessions, want 2", n)
	}
	a.Close()
	b.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := srv.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if n := count(); n != 0 {
		t.Errorf("%d sandboxes left after the sessions ended, want 0", n)
	}
}

func TestMCPStreamableHTTP(t *testing.T) {
	t.Parallel()
	srv, client := newTestServer(t, memoryURL(t), mcpConfig{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.serveListener(ctx, ln, httpOptions{Tokens: []string{testToken}}) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	}()
	var sessions []*mcp.ClientSession
	for range 2 {
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "http-test", Version: "v0"}, nil).
			Connect(ctx, &mcp.StreamableClientTransport{Endpoint: "http://" + ln.Addr().String() + "/mcp", HTTPClient: bearerClient(testToken)}, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer cs.Close()
		sessions = append(sessions, cs)
	}
	if got := toolNames(t, sessions[0]); !slices.Equal(got, fileTools) {
		t.Errorf("tools over HTTP: %v", got)
	}
	exerciseFileTools(t, sessions[0])
	wantToolError(t, sessions[1], "read_file", map[string]any{"path": "src/app.py"}, "file_not_found")
	n := 0
	for _, err := range client.List(ctx, sandbox.ListOptions{}) {
		if err != nil {
			t.Fatal(err)
		}
		n++
	}
	if n != 2 {
		t.Errorf("%d sandboxes for two HTTP sessions, want 2", n)
	}
}

// TestMCPWorkspace checks that --workspace places the file tools' root, and
// that a session that made no tool call is ended by Close.
func TestMCPWorkspace(t *testing.T) {
	t.Parallel()
	srv, client := newTestServer(t, memoryURL(t), mcpConfig{Workspace: "proj/ws"})
	cs := connect(t, srv, nil)
	idle := connect(t, srv, nil)
	ok[writeOut](t, cs, "write_file", map[string]any{"path": "/a.txt", "content": "in the workspace"})
	var ids []string
	for info, err := range client.List(context.Background(), sandbox.ListOptions{}) {
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, info.ID)
	}
	if len(ids) != 1 {
		t.Fatalf("sandboxes %v, want one (the idle session creates none)", ids)
	}
	sb, err := client.Attach(context.Background(), ids[0])
	if err != nil {
		t.Fatal(err)
	}
	if b, err := sb.ReadFile(context.Background(), "proj/ws/a.txt"); err != nil || string(b) != "in the workspace" {
		t.Errorf("~/proj/ws/a.txt: %q %v", b, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := srv.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := idle.ListTools(ctx, nil); err == nil {
		t.Errorf("a session without tool calls still answers after Close")
	}
}

func TestMCPHTTPRefusesNonLoopback(t *testing.T) {
	t.Parallel()
	srv, _ := newTestServer(t, memoryURL(t), mcpConfig{})
	err := srv.serveHTTP(context.Background(), "0.0.0.0:0", httpOptions{}, &strings.Builder{})
	if _, ok := errors.AsType[*usageError](err); !ok {
		t.Errorf("serveHTTP on 0.0.0.0: %v, want a usage error", err)
	}
}

// The built binary, for the tests that run the server as a separate
// process, as an MCP client does.
var (
	buildOnce sync.Once
	binDir    string
	binPath   string
	buildErr  error
)

func builtBinary(t *testing.T) string {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("building the binary needs the go tool on PATH")
	}
	buildOnce.Do(func() {
		binDir, buildErr = os.MkdirTemp("", "sandbox-cli-test-")
		if buildErr != nil {
			return
		}
		binPath = filepath.Join(binDir, "sandbox")
		args := []string{"build", "-o", binPath}
		if raceEnabled {
			args = append(args, "-race") // reuses the test's build cache
		}
		cmd := exec.Command(goTool, append(args, ".")...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

func stdioSession(t *testing.T, args ...string) *mcp.ClientSession {
	t.Helper()
	cmd := exec.Command(builtBinary(t), args...)
	cmd.Stderr = os.Stderr
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "stdio-test", Version: "v0"}, nil).Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

func TestMCPStdioBinary(t *testing.T) {
	t.Parallel()
	url := localURL(t)
	cs := stdioSession(t, "--url", url, "mcp", "--allow-execute")
	want := "edit_file execute glob grep ls metrics read_file run_logs run_start run_status write_file"
	if got := toolNames(t, cs); strings.Join(got, " ") != want {
		t.Errorf("tools over stdio: %v, want %s", got, want)
	}
	exerciseFileTools(t, cs)
	x := ok[executeOut](t, cs, "execute", map[string]any{"command": "python3 -c 'print(1)'"})
	if x.Output != "1\n" || x.ExitCode != 0 {
		t.Errorf("execute python3 = %+v", x)
	}
	if err := cs.Close(); err != nil {
		t.Logf("close: %v", err)
	}
	// The session's sandbox is destroyed when the session ends.
	c, err := sandbox.Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for info, err := range c.List(context.Background(), sandbox.ListOptions{}) {
		if err != nil {
			t.Fatal(err)
		}
		t.Errorf("sandbox %s left after the stdio session ended", info.ID)
	}

	// With --reuse-label, a second server process finds the first one's sandbox.
	for i, want := range []string{"", "kept"} {
		cs := stdioSession(t, "--url", url, "mcp", "--reuse-label", "reuse-test")
		if i == 0 {
			ok[writeOut](t, cs, "write_file", map[string]any{"path": "state.txt", "content": "kept"})
		} else if r := ok[readOut](t, cs, "read_file", map[string]any{"path": "state.txt"}); !strings.Contains(r.Content, want) {
			t.Errorf("second server reads %q, want %q", r.Content, want)
		}
		cs.Close()
	}
}
