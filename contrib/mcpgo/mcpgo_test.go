package mcpgo_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"

	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// bin is the sandbox CLI, built once for the tests from this checkout
// (the module's go.mod names it as a tool, so its dependencies are pinned
// here too).
var bin string

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	if runtime.GOOS != "linux" {
		fmt.Println("skipping: the sandbox CLI's local provider and these tests need Linux")
		return 0
	}
	dir, err := os.MkdirTemp("", "mcpgo-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	bin = filepath.Join(dir, "sandbox")
	gobin := filepath.Join(runtime.GOROOT(), "bin", "go")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, gobin, "build", "-o", bin, "github.com/sandboxkit/sandbox/cmd/sandbox").CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "building the sandbox CLI: %v\n%s", err, out)
		return 1
	}
	return m.Run()
}

const (
	secret = "sk-live-0123456789abcdef"
	token  = "test-token-0123456789abcdef"
)

// providerURLs are the providers the server runs on: memory, and local
// with its state under the test's temporary directory.
func providerURLs(t *testing.T) map[string]string {
	return map[string]string{"memory": "memory://", "local": "local://" + t.TempDir()}
}

// serverEnv is the server's environment: ours, plus the secret the
// server gives commands and redacts.
func serverEnv() []string {
	return append(os.Environ(), "API_KEY="+secret)
}

// initialize does the MCP handshake as an mcp-go client.
func initialize(t *testing.T, ctx context.Context, c *client.Client) {
	t.Helper()
	req := mcp.InitializeRequest{}
	req.Params.ClientInfo = mcp.Implementation{Name: "mcp-go-test", Version: "1.0.0"}
	req.Params.ProtocolVersion = mcp.LATEST_LEGACY_PROTOCOL_VERSION
	res, err := c.Initialize(ctx, req)
	require.NoError(t, err)
	assert.Equal(t, "sandbox", res.ServerInfo.Name)
}

// callTool calls a tool and returns its result, which must arrive (a
// failure of the tool is a result with IsError, not a protocol error).
func callTool(t *testing.T, ctx context.Context, c *client.Client, name string, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	req := mcp.CallToolRequest{}
	req.Params.Name = name
	req.Params.Arguments = args
	res, err := c.CallTool(ctx, req)
	require.NoError(t, err, "%s %v", name, args)
	require.NotNil(t, res)
	return res
}

// text is the text content of a result.
func text(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := mcp.AsTextContent(c); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// structured decodes a result's structured content.
func structured(t *testing.T, res *mcp.CallToolResult) map[string]any {
	t.Helper()
	b, err := json.Marshal(res.StructuredContent)
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(b, &m), "%s", b)
	return m
}

// exercise drives the server's tools through c: the tool list with
// schemas, write, read, edit, grep and execute, and failures that must
// come back as tool error results.
func exercise(t *testing.T, ctx context.Context, c *client.Client) {
	t.Helper()
	tools, err := c.ListTools(ctx, mcp.ListToolsRequest{})
	require.NoError(t, err)
	byName := map[string]mcp.Tool{}
	for _, tool := range tools.Tools {
		byName[tool.Name] = tool
		assert.NotEmpty(t, tool.Description, tool.Name)
		assert.Equal(t, "object", tool.InputSchema.Type, tool.Name)
	}
	for _, name := range []string{"ls", "read_file", "write_file", "edit_file", "glob", "grep", "execute", "run_start", "run_status", "run_logs"} {
		assert.Contains(t, byName, name)
	}
	assert.Contains(t, byName["read_file"].InputSchema.Properties, "path")
	assert.Contains(t, byName["read_file"].InputSchema.Required, "path")
	assert.Contains(t, byName["execute"].InputSchema.Properties, "command")

	w := callTool(t, ctx, c, "write_file", map[string]any{"path": "src/app.py", "content": "print('hello')\nprint('bye')\n"})
	require.False(t, w.IsError, text(w))
	assert.EqualValues(t, 28, structured(t, w)["bytes"])

	r := callTool(t, ctx, c, "read_file", map[string]any{"path": "src/app.py"})
	require.False(t, r.IsError, text(r))
	assert.Equal(t, "     1\tprint('hello')\n     2\tprint('bye')", structured(t, r)["content"])

	e := callTool(t, ctx, c, "edit_file", map[string]any{"path": "src/app.py", "old_string": "hello", "new_string": "world"})
	require.False(t, e.IsError, text(e))
	assert.EqualValues(t, 1, structured(t, e)["occurrences"])

	g := callTool(t, ctx, c, "grep", map[string]any{"pattern": "world"})
	require.False(t, g.IsError, text(g))
	assert.Contains(t, text(g), "src/app.py")

	x := callTool(t, ctx, c, "execute", map[string]any{"command": "cat src/app.py; echo key=$API_KEY; exit 3"})
	require.False(t, x.IsError, text(x))
	xs := structured(t, x)
	assert.EqualValues(t, 3, xs["exit_code"], "a non-zero exit is a result, not an error")
	assert.Equal(t, "print('world')\nprint('bye')\nkey=[REDACTED]\n", xs["output"])
	assert.NotContains(t, text(x), secret)

	// Failures arrive as MCP tool error results, with a code the model
	// can read, and the session goes on.
	esc := callTool(t, ctx, c, "read_file", map[string]any{"path": "../../etc/passwd"})
	assert.True(t, esc.IsError)
	assert.Contains(t, text(esc), "invalid_path")
	miss := callTool(t, ctx, c, "read_file", map[string]any{"path": "missing.txt"})
	assert.True(t, miss.IsError)
	assert.Contains(t, text(miss), "file_not_found")
	amb := callTool(t, ctx, c, "edit_file", map[string]any{"path": "src/app.py", "old_string": "print", "new_string": "p"})
	assert.True(t, amb.IsError)
	assert.Contains(t, text(amb), "ambiguous_match")
	bad := callTool(t, ctx, c, "read_file", map[string]any{"path": 5})
	assert.True(t, bad.IsError, "an argument of the wrong type is a tool error: %s", text(bad))

	r2 := callTool(t, ctx, c, "read_file", map[string]any{"path": "src/app.py"})
	require.False(t, r2.IsError, text(r2))
	assert.Contains(t, structured(t, r2)["content"], "print('world')")
}

// TestStdio: an mcp-go client spawns `sandbox mcp` and talks to it over
// stdio, on memory and local.
func TestStdio(t *testing.T) {
	for name, url := range providerURLs(t) {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			c, err := client.NewStdioMCPClient(bin, serverEnv(), "--url", url, "mcp", "--allow-execute", "--secret-env", "API_KEY")
			require.NoError(t, err)
			defer c.Close()
			initialize(t, ctx, c)
			exercise(t, ctx, c)
		})
	}
}

// startHTTP runs `sandbox mcp --http` on a free loopback port and returns
// its URL; the server is interrupted, and must exit, when the test ends.
func startHTTP(t *testing.T, url string) string {
	t.Helper()
	cmd := exec.Command(bin, "--url", url, "mcp", "--http", "127.0.0.1:0", "--allow-execute", "--secret-env", "API_KEY")
	cmd.Env = append(serverEnv(), "SANDBOX_MCP_TOKEN="+token)
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	done := make(chan error, 1)
	lines := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			default:
			}
		}
		close(lines)
		done <- cmd.Wait()
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case err := <-done:
			assert.NoError(t, err, "the server exits cleanly on interrupt")
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-done
			t.Error("the server did not exit within 30s of an interrupt")
		}
	})
	const prefix = "sandbox mcp: serving streamable HTTP on "
	timeout := time.After(time.Minute)
	for {
		select {
		case line, ok := <-lines:
			if !ok {
				t.Fatal("the server ended before serving")
			}
			if strings.HasPrefix(line, prefix) {
				return strings.TrimPrefix(line, prefix)
			}
		case <-timeout:
			t.Fatal("the server did not announce its address within a minute")
		}
	}
}

// TestStreamableHTTP: an mcp-go client talks to `sandbox mcp --http`
// over streamable HTTP with the bearer token; without it, it is refused.
func TestStreamableHTTP(t *testing.T) {
	for name, url := range providerURLs(t) {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			endpoint := startHTTP(t, url)

			anon, err := client.NewStreamableHttpClient(endpoint)
			require.NoError(t, err)
			require.NoError(t, anon.Start(ctx))
			req := mcp.InitializeRequest{}
			req.Params.ClientInfo = mcp.Implementation{Name: "anonymous", Version: "1.0.0"}
			req.Params.ProtocolVersion = mcp.LATEST_LEGACY_PROTOCOL_VERSION
			_, err = anon.Initialize(ctx, req)
			require.Error(t, err, "a client without the token is refused")
			anon.Close()

			c, err := client.NewStreamableHttpClient(endpoint, transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + token}))
			require.NoError(t, err)
			require.NoError(t, c.Start(ctx))
			defer c.Close()
			initialize(t, ctx, c)
			exercise(t, ctx, c)
		})
	}
}
