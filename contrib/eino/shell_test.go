package eino_test

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/cloudwego/eino/adk"
	"github.com/cloudwego/eino/adk/filesystem"
	"github.com/stretchr/testify/require"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/backend"
	eino "github.com/sandboxkit/sandbox/contrib/eino"
)

// newFixed returns a Backend over one fresh sandbox of c.
func newFixed(t *testing.T, c *sandbox.Client, opts eino.Options) (*eino.Backend, *sandbox.Sandbox) {
	t.Helper()
	sb, err := c.Create(context.Background(), sandbox.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = sb.Destroy(context.Background()) })
	b, err := eino.NewFromSandbox(sb, "", opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.Close() })
	return b, sb
}

// TestExecuteStreaming: the output arrives while the command runs (it
// waits for a file the test writes only after the first chunk came, so
// output held back until the end would time it out), capped with
// Truncated, redacted, and the last response carries the exit code.
func TestExecuteStreaming(t *testing.T) {
	for _, p := range providers() {
		t.Run(p.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			b, _ := newFixed(t, p.client(t), eino.Options{AllowExecute: true, MaxExecuteOutput: 1000,
				SecretEnv: map[string]string{"API_TOKEN": "tok-stream-456"}})

			sr, err := b.ExecuteStreaming(ctx, &filesystem.ExecuteRequest{Command: `echo "first $API_TOKEN"; i=0; while [ ! -e go.flag ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done; [ -e go.flag ] || exit 9; yes | head -c 5000; exit 4`})
			require.NoError(t, err)
			defer sr.Close()
			// The first line arrives while the command waits for go.flag.
			var out strings.Builder
			for !strings.Contains(out.String(), "\n") {
				r, err := sr.Recv()
				require.NoError(t, err)
				require.Nil(t, r.ExitCode)
				out.WriteString(r.Output)
			}
			require.Equal(t, "first [REDACTED]\n", out.String())
			require.NoError(t, b.Write(ctx, &filesystem.WriteRequest{FilePath: "go.flag", Content: "go"}))
			var last *filesystem.ExecuteResponse
			for {
				r, err := sr.Recv()
				if errors.Is(err, io.EOF) {
					break
				}
				require.NoError(t, err)
				out.WriteString(r.Output)
				last = r
			}
			require.NotNil(t, last)
			require.NotNil(t, last.ExitCode)
			require.Equal(t, 4, *last.ExitCode)
			require.True(t, last.Truncated)
			require.Len(t, out.String(), 1000, "capped at MaxExecuteOutput")
			require.NotContains(t, out.String(), "tok-stream-456")

			// Execute, the same command without streaming.
			r, err := b.Execute(ctx, &filesystem.ExecuteRequest{Command: `echo "$API_TOKEN"; exit 2`})
			require.NoError(t, err)
			require.Equal(t, "[REDACTED]\n", r.Output)
			require.Equal(t, 2, *r.ExitCode)

			// A command that times out says so.
			bt, _ := newFixed(t, p.client(t), eino.Options{AllowExecute: true, ExecuteTimeout: 300 * time.Millisecond})
			r, err = bt.Execute(ctx, &filesystem.ExecuteRequest{Command: "echo begun; sleep 10"})
			require.NoError(t, err)
			require.Equal(t, "begun\n[Command timed out]", r.Output)

			// In the background: the call returns at once with a pid.
			start := time.Now()
			r, err = b.Execute(ctx, &filesystem.ExecuteRequest{Command: "sleep 5; echo late > late.txt", RunInBackendGround: true})
			require.NoError(t, err)
			require.Less(t, time.Since(start), 4*time.Second)
			require.Contains(t, r.Output, "started in the background, pid ")
		})
	}
}

// TestExecuteStreamingClosedEarly: closing the reader before the command
// ends stops the command at its next output (it would otherwise go on and
// write its marker).
func TestExecuteStreamingClosedEarly(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b, _ := newFixed(t, providers()[0].client(t), eino.Options{AllowExecute: true})
	sr, err := b.ExecuteStreaming(ctx, &filesystem.ExecuteRequest{Command: "echo started; sleep 1; echo tick; sleep 1; echo late > late.txt"})
	require.NoError(t, err)
	// The first line may come in more than one chunk.
	var got string
	for !strings.Contains(got, "\n") {
		r, err := sr.Recv()
		require.NoError(t, err)
		got += r.Output
	}
	require.Equal(t, "started\n", got)
	sr.Close()
	time.Sleep(3 * time.Second)
	_, err = b.Read(ctx, &filesystem.ReadRequest{FilePath: "late.txt"})
	var be *backend.Error
	require.ErrorAs(t, err, &be)
	require.Equal(t, backend.CodeFileNotFound, be.Code, "the command was stopped")
}

// TestExecuteRefused: without AllowExecute both shells refuse with
// permission_denied, before any stream, and NewMiddleware adds no execute
// tool; an empty command is refused naming it.
func TestExecuteRefused(t *testing.T) {
	ctx := context.Background()
	b, _ := newFixed(t, providers()[0].client(t), eino.Options{})
	var be *backend.Error
	_, err := b.ExecuteStreaming(ctx, &filesystem.ExecuteRequest{Command: "echo hi"})
	require.ErrorAs(t, err, &be)
	require.Equal(t, backend.CodePermissionDenied, be.Code)
	_, err = b.Execute(ctx, &filesystem.ExecuteRequest{Command: "echo hi"})
	require.ErrorAs(t, err, &be)
	require.Equal(t, backend.CodePermissionDenied, be.Code)

	mw, err := eino.NewMiddleware(ctx, b, nil)
	require.NoError(t, err)
	_, rc, err := mw.BeforeAgent(ctx, &adk.ChatModelAgentContext{})
	require.NoError(t, err)
	for _, tl := range rc.Tools {
		info, err := tl.Info(ctx)
		require.NoError(t, err)
		require.NotEqual(t, "execute", info.Name)
	}

	bx, _ := newFixed(t, providers()[0].client(t), eino.Options{AllowExecute: true})
	_, err = bx.ExecuteStreaming(ctx, &filesystem.ExecuteRequest{Command: "  "})
	require.ErrorAs(t, err, &be)
	require.Contains(t, be.Message, "the command is empty")
}

// TestStreamingAgent: with a streaming runner, the execute tool's output
// reaches the model whole, and a failing tool call is still a result.
func TestStreamingAgent(t *testing.T) {
	for _, p := range providers() {
		t.Run(p.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			mgr := newManager(t, p.client(t))
			b, err := eino.New(mgr, eino.Options{AllowExecute: true})
			require.NoError(t, err)
			defer b.Close()
			mw, err := eino.NewMiddleware(ctx, b, nil)
			require.NoError(t, err)
			m := newScripted(
				call{"execute", `{"command":"for i in 1 2 3; do echo line $i; sleep 0.1; done; exit 1"}`},
				call{"execute", `{"command":""}`},
				call{"read_file", `{"file_path":"../x"}`},
			)
			agent, err := adk.NewChatModelAgent(ctx, &adk.ChatModelAgentConfig{Name: "a", Description: "a", Model: m, Handlers: []adk.ChatModelAgentMiddleware{mw}})
			require.NoError(t, err)
			last, errs := runAgent(ctx, agent, true, "conv-s")
			require.Empty(t, errs)
			require.Equal(t, "done", last)
			got, _ := m.result(0)
			require.Equal(t, "line 1\nline 2\nline 3\n\n[Command failed with exit code 1]", got)
			got, _ = m.result(1)
			require.Equal(t, "Error: invalid command: the command is empty", got)
			got, _ = m.result(2)
			require.Contains(t, got, "Error: invalid path '../x'")
		})
	}
}
