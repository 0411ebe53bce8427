package anthropic_test

import (
	"context"
	"strings"
	"testing"
	"time"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/tools/agenttoolset"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandboxkit/sandbox"
	sbanthropic "github.com/sandboxkit/sandbox/contrib/anthropic"
	"github.com/sandboxkit/sandbox/provider/memory"
	"github.com/sandboxkit/sandbox/session"
)

func use(id, name string, input map[string]any) call { return call{ID: id, Name: name, Input: input} }

// TestAgentToolsetEndToEnd drives the agent_toolset_20260401 tools (names
// and inputs as the SDK's agenttoolset) through the SDK's tool runner.
func TestAgentToolsetEndToEnd(t *testing.T) {
	for name, mk := range providers(t) {
		t.Run(name, func(t *testing.T) {
			tools, err := sbanthropic.New(mk(t), sbanthropic.Options{})
			require.NoError(t, err)
			defer tools.Close()
			set := tools.AgentToolset()
			var names []string
			for _, tool := range set {
				names = append(names, tool.Name())
			}
			// The same names, in the same order, as the SDK's own set.
			var want []string
			for _, tool := range agenttoolset.BetaAgentToolset20260401(&agenttoolset.AgentToolContext{Workdir: t.TempDir()}) {
				want = append(want, tool.Name())
			}
			require.Equal(t, want, names)

			f, srv := newFakeAPI(t,
				[]call{use("write", "write", map[string]any{"file_path": "src/main.go", "content": "package main\n\nfunc main() {}\n// TODO one\n// TODO two\n"})},
				[]call{
					use("read", "read", map[string]any{"file_path": "src/main.go", "view_range": []int{1, 3}}),
					use("glob", "glob", map[string]any{"pattern": "*.go"}),
					use("grep", "grep", map[string]any{"pattern": "TODO (one|two)"}),
					use("edit-two", "edit", map[string]any{"file_path": "src/main.go", "old_string": "TODO", "new_string": "DONE"}),
					use("edit-zero", "edit", map[string]any{"file_path": "src/main.go", "old_string": "FIXME", "new_string": "x"}),
					use("escape", "read", map[string]any{"file_path": "../../../../etc/hostname"}),
					use("slow", "bash", map[string]any{"command": "sleep 5; echo never", "timeout_ms": 300}),
				},
				[]call{use("edit-all", "edit", map[string]any{"file_path": "src/main.go", "old_string": "TODO", "new_string": "DONE", "replace_all": true})},
				[]call{use("bash", "bash", map[string]any{"command": "cat src/main.go | grep -c DONE"})},
			)
			runLoop(t, newClient(t, srv.URL, f.key), set, nil)
			require.Empty(t, f.problems)

			ok := func(id string) string {
				t.Helper()
				r := f.result(t, id)
				assert.False(t, r.IsError, "%s: %s", id, r.Text)
				return r.Text
			}
			bad := func(id string) string {
				t.Helper()
				r := f.result(t, id)
				assert.True(t, r.IsError, "%s should be an error result: %s", id, r.Text)
				return r.Text
			}
			assert.Equal(t, "Wrote 53 bytes to src/main.go", ok("write"))
			assert.Equal(t, "package main\n\nfunc main() {}", ok("read"))
			assert.Equal(t, "src/main.go", ok("glob"))
			assert.Equal(t, "src/main.go:4:// TODO one\nsrc/main.go:5:// TODO two", ok("grep"))
			assert.Contains(t, bad("edit-two"), "src/main.go")
			assert.Contains(t, bad("edit-zero"), "src/main.go")
			bad("escape")
			slow := bad("slow")
			assert.NotContains(t, slow, "never")
			assert.Contains(t, slow, "timed out")
			assert.Equal(t, "Replaced 2 occurrence(s) in src/main.go", ok("edit-all"))
			assert.Equal(t, "2\n", ok("bash"))
		})
	}
}

// TestForSessionOneSandboxPerConversation: two conversations get two
// sandboxes; a conversation whose sandbox is destroyed gets an error result
// and then a fresh sandbox, never a Go error that ends the loop.
func TestForSessionOneSandboxPerConversation(t *testing.T) {
	client := sandbox.NewClient(memory.New())
	defer client.Close()
	m := session.NewManager(client, session.Options{ReapInterval: -1})
	defer m.Close(context.Background())

	a, err := sbanthropic.ForSession(m, "conv-a", sbanthropic.Options{})
	require.NoError(t, err)
	defer a.Close()
	b, err := sbanthropic.ForSession(m, "conv-b", sbanthropic.Options{})
	require.NoError(t, err)
	defer b.Close()

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	exec := func(tool sdk.BetaTool, input string) (string, error) {
		blocks, err := tool.Execute(ctx, []byte(input))
		if err != nil {
			return "", err
		}
		return blocks[0].OfText.Text, nil
	}
	_, err = exec(a.TextEditor(), `{"command":"create","path":"/a.txt","file_text":"from a"}`)
	require.NoError(t, err)
	_, err = exec(b.TextEditor(), `{"command":"view","path":"a.txt"}`)
	require.Error(t, err, "conversation b must not see a's files")

	sa, ok := m.Lookup("conv-a")
	require.True(t, ok)
	// The workspace's own absolute path is taken as the workspace.
	out, err := exec(a.TextEditor(), `{"command":"view","path":"`+sa.Workspace()+`/a.txt"}`)
	require.NoError(t, err)
	assert.Equal(t, "     1\tfrom a", out)

	require.NoError(t, sa.Sandbox().Destroy(ctx))
	_, err = exec(a.Bash(), `{"command":"echo hi"}`)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "gone")
	out, err = exec(a.Bash(), `{"command":"echo hi; ls"}`)
	require.NoError(t, err, "the next call gets a fresh sandbox")
	assert.Equal(t, "hi\n", out)
}

// TestWorkerToolsFunc: the environment worker's ToolsFunc gives each
// session its own sandbox, and closing a session's tools (as the worker
// does with agenttoolset.CloseAll) destroys it.
func TestWorkerToolsFunc(t *testing.T) {
	client := sandbox.NewClient(memory.New())
	defer client.Close()
	m := session.NewManager(client, session.Options{ReapInterval: -1})
	defer m.Close(context.Background())
	toolsFunc := sbanthropic.WorkerToolsFunc(m, sbanthropic.Options{})

	ctx := context.Background()
	one := toolsFunc(&agenttoolset.AgentToolContext{Workdir: t.TempDir()})
	two := toolsFunc(&agenttoolset.AgentToolContext{Workdir: t.TempDir()})
	_, err := one[2].Execute(ctx, []byte(`{"file_path":"x.txt","content":"one"}`))
	require.NoError(t, err)
	_, err = two[1].Execute(ctx, []byte(`{"file_path":"x.txt"}`))
	require.Error(t, err, "sessions do not share a sandbox")
	assert.Equal(t, 2, m.Len())

	live := func() int {
		n := 0
		for _, err := range client.List(ctx, sandbox.ListOptions{}) {
			require.NoError(t, err)
			n++
		}
		return n
	}
	agenttoolset.CloseAll(one)
	assert.Equal(t, 1, m.Len(), "closing the session's tools releases its sandbox")
	assert.Equal(t, 1, live(), "the sandbox is destroyed")
	agenttoolset.CloseAll(two)
	assert.Equal(t, 0, live())
	_, err = one[0].Execute(ctx, []byte(`{"command":"true"}`))
	require.Error(t, err, "closed tools refuse calls")

	broken := sbanthropic.WorkerToolsFunc(nil, sbanthropic.Options{})(&agenttoolset.AgentToolContext{})
	_, err = broken[0].Execute(ctx, []byte(`{"command":"true"}`))
	require.Error(t, err)
	assert.True(t, strings.Contains(err.Error(), "manager is nil"))
}

func TestBadInput(t *testing.T) {
	_, err := sbanthropic.New(nil, sbanthropic.Options{})
	require.ErrorIs(t, err, sandbox.ErrInvalidArgument)
	_, err = sbanthropic.ForSession(nil, "k", sbanthropic.Options{})
	require.ErrorIs(t, err, sandbox.ErrInvalidArgument)
	m := session.NewManager(sandbox.NewClient(memory.New()), session.Options{ReapInterval: -1})
	defer m.Close(context.Background())
	_, err = sbanthropic.ForSession(m, "", sbanthropic.Options{})
	require.ErrorContains(t, err, "key is empty")
	_, err = sbanthropic.ForSession(m, "k", sbanthropic.Options{MaxOutput: -1})
	require.ErrorContains(t, err, "MaxOutput")
	_, err = sbanthropic.ForSession(m, "k", sbanthropic.Options{BaseDir: "/w"})
	require.ErrorContains(t, err, "BaseDir")
}
