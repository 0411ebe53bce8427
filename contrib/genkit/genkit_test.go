package sandboxgenkit_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/firebase/genkit/go/ai"
	"github.com/firebase/genkit/go/genkit"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/sandboxkit/sandbox"
	sandboxgenkit "github.com/sandboxkit/sandbox/contrib/genkit"
	"github.com/sandboxkit/sandbox/provider/local"
	"github.com/sandboxkit/sandbox/provider/memory"
	"github.com/sandboxkit/sandbox/session"
)

// The Toolset is Genkit middleware: ai.WithUse takes it.
var _ ai.Middleware = (*sandboxgenkit.Toolset)(nil)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// genkit.Init watches SIGINT and SIGTERM (signal.NotifyContext).
		goleak.IgnoreTopFunction("os/signal.signal_recv"),
		goleak.IgnoreTopFunction("os/signal.loop"),
	)
}

// call is one tool request a scripted turn makes.
type call struct {
	name  string
	input any
}

// scripted is a fake model: each turn asks for the tools of one entry of
// turns, and it records the tool responses Genkit sends back, by turn.
// After the last turn it answers with text.
type scripted struct {
	turns [][]call

	mu    sync.Mutex
	seen  [][]*ai.ToolResponse
	tools []*ai.ToolDefinition
}

// define registers the fake model on g as a model plugin would.
func (s *scripted) define(g *genkit.Genkit, name string) ai.Model {
	return genkit.DefineModel(g, name, &ai.ModelOptions{Supports: &ai.ModelSupports{Tools: true, Multiturn: true}},
		func(ctx context.Context, req *ai.ModelRequest, _ ai.ModelStreamCallback) (*ai.ModelResponse, error) {
			s.mu.Lock()
			defer s.mu.Unlock()
			s.tools = req.Tools
			turn := 0
			for _, m := range req.Messages {
				if m.Role == ai.RoleTool {
					turn++
				}
			}
			if turn > 0 && len(s.seen) < turn {
				var rs []*ai.ToolResponse
				for _, p := range req.Messages[len(req.Messages)-1].Content {
					if p.IsToolResponse() {
						rs = append(rs, p.ToolResponse)
					}
				}
				s.seen = append(s.seen, rs)
			}
			if err := ctx.Err(); err != nil {
				return nil, err // as a model API call would
			}
			if turn >= len(s.turns) {
				return &ai.ModelResponse{Request: req, Message: ai.NewModelTextMessage("done"), FinishReason: ai.FinishReasonStop}, nil
			}
			msg := &ai.Message{Role: ai.RoleModel}
			for i, c := range s.turns[turn] {
				msg.Content = append(msg.Content, ai.NewToolRequestPart(&ai.ToolRequest{Name: c.name, Input: c.input, Ref: fmt.Sprintf("t%d-%d", turn, i)}))
			}
			return &ai.ModelResponse{Request: req, Message: msg, FinishReason: ai.FinishReasonStop}, nil
		})
}

// output returns the output of the i-th tool call of turn, as JSON
// decoded into a map, matched by its ref.
func (s *scripted) output(t *testing.T, turn, i int) map[string]any {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	require.Greater(t, len(s.seen), turn, "turn %d got no tool responses", turn)
	ref := fmt.Sprintf("t%d-%d", turn, i)
	for _, r := range s.seen[turn] {
		if r.Ref == ref {
			b, err := json.Marshal(r.Output)
			require.NoError(t, err)
			var m map[string]any
			require.NoError(t, json.Unmarshal(b, &m))
			return m
		}
	}
	t.Fatalf("no response for %s in %+v", ref, s.seen[turn])
	return nil
}

// errCode returns the code of a tool output's error, "" when none.
func errCode(m map[string]any) string {
	e, _ := m["error"].(map[string]any)
	c, _ := e["code"].(string)
	return c
}

// provider is one runtime the tests run on.
type provider struct {
	name   string
	client func(t *testing.T) *sandbox.Client
}

func providers() []provider {
	return []provider{
		{"memory", func(t *testing.T) *sandbox.Client { return sandbox.NewClient(memory.New()) }},
		{"local", func(t *testing.T) *sandbox.Client {
			rt, err := local.New(local.WithRoot(t.TempDir()))
			require.NoError(t, err)
			return sandbox.NewClient(rt)
		}},
	}
}

const secret = "sk-live-0123456789abcdef"

// harness is a Genkit instance with the scripted model, the toolset over
// a session manager on one provider, and an agent flow that runs
// Generate with the toolset as middleware.
type harness struct {
	g     *genkit.Genkit
	model *scripted
	mgr   *session.Manager
	tools *sandboxgenkit.Toolset
	flow  func(ctx context.Context, prompt string) (string, error)
}

func newHarness(t *testing.T, p provider, opts sandboxgenkit.Options, turns ...[]call) *harness {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel) // ends genkit.Init's signal watcher
	g := genkit.Init(ctx)
	h := &harness{g: g, model: &scripted{turns: turns}}
	m := h.model.define(g, "test/scripted")
	client := p.client(t)
	h.mgr = session.NewManager(client, session.Options{ReapInterval: -1})
	t.Cleanup(func() {
		require.NoError(t, h.mgr.Close(context.Background()))
		client.Close()
	})
	var err error
	h.tools, err = sandboxgenkit.New(h.mgr, opts)
	require.NoError(t, err)
	t.Cleanup(func() { h.tools.Close() })
	flow := genkit.DefineFlow(g, "agent", func(ctx context.Context, prompt string) (string, error) {
		resp, err := genkit.Generate(ctx, g, ai.WithModel(m), ai.WithUse(h.tools), ai.WithPrompt(prompt), ai.WithMaxTurns(20))
		if err != nil {
			return "", err
		}
		return resp.Text(), nil
	})
	h.flow = func(ctx context.Context, prompt string) (string, error) { return flow.Run(ctx, prompt) }
	return h
}

// sh runs a command in the conversation's sandbox, in its workspace,
// behind the tools' back.
func (h *harness) sh(t *testing.T, key, cmd string) string {
	t.Helper()
	s, err := h.mgr.Acquire(context.Background(), key)
	require.NoError(t, err)
	r, err := s.Exec(context.Background(), sandbox.Command{Shell: cmd})
	require.NoError(t, err)
	require.Equal(t, 0, r.ExitCode, "%s: %s %s", cmd, r.Stdout, r.Stderr)
	return string(r.Stdout)
}

// TestAgentFlow runs a flow whose model writes, reads, edits, lists,
// globs, greps and executes, end to end through Genkit's generate loop,
// and checks each tool's response as the model received it.
func TestAgentFlow(t *testing.T) {
	for _, p := range providers() {
		t.Run(p.name, func(t *testing.T) {
			h := newHarness(t, p, sandboxgenkit.Options{AllowExecute: true, SecretEnv: map[string]string{"API_KEY": secret}},
				[]call{{"write_file", map[string]any{"path": "src/app.py", "content": "print('hello')\nprint('bye')\n"}}},
				[]call{
					{"read_file", map[string]any{"path": "src/app.py"}},
					{"ls", map[string]any{"path": "src"}},
					{"glob", map[string]any{"pattern": "*.py"}},
					{"grep", map[string]any{"pattern": "bye"}},
				},
				[]call{{"edit_file", map[string]any{"path": "/src/app.py", "old_string": "hello", "new_string": "world"}}},
				[]call{{"execute", map[string]any{"command": "cat src/app.py; echo key=$API_KEY; exit 3"}}},
				[]call{{"edit_file", map[string]any{"path": "src/app.py", "old_string": "print", "new_string": "p"}}},
				[]call{{"read_file", map[string]any{"path": "missing.txt"}}},
			)
			ctx := sandboxgenkit.WithConversation(context.Background(), "conv-1")
			text, err := h.flow(ctx, "work on src/app.py")
			require.NoError(t, err)
			assert.Equal(t, "done", text)

			// The model was told what the tools are, with schemas.
			var names []string
			for _, d := range h.model.tools {
				names = append(names, d.Name)
				assert.Contains(t, d.Description, "workspace", d.Name)
				assert.NotEmpty(t, d.InputSchema, d.Name)
			}
			assert.ElementsMatch(t, h.tools.Names(), names)
			assert.ElementsMatch(t, []string{"ls", "read_file", "write_file", "edit_file", "glob", "grep", "execute"}, names)

			w := h.model.output(t, 0, 0)
			assert.Equal(t, "src/app.py", w["path"])
			assert.EqualValues(t, 28, w["bytes"])
			r := h.model.output(t, 1, 0)
			assert.Equal(t, "     1\tprint('hello')\n     2\tprint('bye')", r["content"])
			assert.EqualValues(t, 2, r["total_lines"])
			assert.Equal(t, "src/app.py", h.model.output(t, 1, 1)["output"])
			assert.Equal(t, "src/app.py", h.model.output(t, 1, 2)["output"])
			assert.Equal(t, "src/app.py:2:print('bye')", h.model.output(t, 1, 3)["output"])
			e := h.model.output(t, 2, 0)
			assert.EqualValues(t, 1, e["occurrences"], "%v", e)
			x := h.model.output(t, 3, 0)
			assert.EqualValues(t, 3, x["exit_code"])
			assert.Equal(t, "print('world')\nprint('bye')\nkey=[REDACTED]\n", x["output"])
			assert.NotContains(t, fmt.Sprint(x), secret)
			amb := h.model.output(t, 4, 0)
			assert.Equal(t, "ambiguous_match", errCode(amb), "%v", amb)
			miss := h.model.output(t, 5, 0)
			assert.Equal(t, "file_not_found", errCode(miss), "%v", miss)
			assert.Contains(t, miss["error"].(map[string]any)["message"], "missing.txt")

			// The files are in the conversation's sandbox.
			assert.Equal(t, "print('world')\nprint('bye')\n", h.sh(t, "conv-1", "cat src/app.py"))
		})
	}
}

// TestOneSandboxPerConversation: calls under one key share a sandbox
// across Generate calls; another key gets its own.
func TestOneSandboxPerConversation(t *testing.T) {
	h := newHarness(t, providers()[0], sandboxgenkit.Options{},
		[]call{{"write_file", map[string]any{"path": "note.txt", "content": "a"}}})
	_, err := h.flow(sandboxgenkit.WithConversation(context.Background(), "a"), "write")
	require.NoError(t, err)

	h.model.mu.Lock()
	h.model.turns = [][]call{{{"ls", map[string]any{}}}}
	h.model.seen = nil
	h.model.mu.Unlock()
	_, err = h.flow(sandboxgenkit.WithConversation(context.Background(), "a"), "list")
	require.NoError(t, err)
	assert.Equal(t, "note.txt", h.model.output(t, 0, 0)["output"])

	h.model.mu.Lock()
	h.model.seen = nil
	h.model.mu.Unlock()
	_, err = h.flow(sandboxgenkit.WithConversation(context.Background(), "b"), "list")
	require.NoError(t, err)
	assert.Equal(t, "No files found", h.model.output(t, 0, 0)["output"])
	assert.Equal(t, 2, h.mgr.Len())

	require.NoError(t, h.tools.Release(context.Background(), "b"))
	assert.Equal(t, 1, h.mgr.Len())
}

// TestHostile: paths that climb out, a symbolic link to the outside,
// binary files, huge outputs and inputs that do not match the schema all
// come back as tool results, and the loop goes on.
func TestHostile(t *testing.T) {
	for _, p := range providers() {
		t.Run(p.name, func(t *testing.T) {
			const max = 4096
			big := strings.Repeat("x", 3*max)
			h := newHarness(t, p, sandboxgenkit.Options{AllowExecute: true, MaxOutput: max, Secrets: []string{secret}},
				[]call{
					{"read_file", map[string]any{"path": "../outside/secret.txt"}},
					{"write_file", map[string]any{"path": "../../escaped.txt", "content": "x"}},
					{"read_file", map[string]any{"path": "link/secret.txt"}},
					{"write_file", map[string]any{"path": "link/planted.txt", "content": "x"}},
					{"edit_file", map[string]any{"path": "link/secret.txt", "old_string": "top", "new_string": "x"}},
					{"read_file", map[string]any{"path": "blob.bin"}},
				},
				[]call{
					{"execute", map[string]any{"command": "yes 0123456789 | head -c 5000000"}},
					{"read_file", map[string]any{"path": "long.txt"}},
					{"read_file", map[string]any{"path": "lines.txt"}},
					{"grep", map[string]any{"pattern": "line"}},
					{"execute", map[string]any{"command": "sleep 5", "timeout_seconds": 0.5}},
				},
				[]call{
					{"read_file", map[string]any{"path": 5}},
					{"write_file", map[string]any{"path": "x.txt", "content": big, "mode": "0777"}},
					{"execute", map[string]any{"command": "true", "timeout_seconds": -1}},
					{"write_file", map[string]any{"path": "leak.txt", "content": "key " + secret}},
				},
				[]call{{"read_file", map[string]any{"path": "leak.txt"}}},
			)
			key := "hostile"
			ws := strings.TrimSpace(h.sh(t, key, "pwd"))
			h.sh(t, key, "mkdir -p ../outside && printf 'top secret' > ../outside/secret.txt && ln -s ../outside link"+
				" && printf 'a\\000b' > blob.bin && printf '%s' "+big+" > long.txt"+
				" && i=1 && while [ $i -le 2000 ]; do echo line-$i-abcdefghijklmnopqrstuvwxyz; i=$((i+1)); done > lines.txt")

			_, err := h.flow(sandboxgenkit.WithConversation(context.Background(), key), "attack")
			require.NoError(t, err, "every hostile call must come back as a tool result")

			for i, want := range []string{"invalid_path", "invalid_path", "invalid_path", "invalid_path", "invalid_path", "binary_file"} {
				out := h.model.output(t, 0, i)
				assert.Equal(t, want, errCode(out), "call %d: %v", i, out)
				assert.NotContains(t, fmt.Sprint(out), "top secret")
			}
			// Nothing was written outside the workspace.
			assert.Equal(t, "top secret", h.sh(t, key, "cat ../outside/secret.txt"))
			assert.Equal(t, "absent", strings.TrimSpace(h.sh(t, key, "test -e ../outside/planted.txt && echo present || echo absent")))
			assert.Equal(t, "absent", strings.TrimSpace(h.sh(t, key, "test -e "+ws+"/../../escaped.txt && echo present || echo absent")))

			x := h.model.output(t, 1, 0)
			require.Equal(t, true, x["truncated"], "%v", x)
			assert.LessOrEqual(t, len(x["output"].(string)), max+200)
			assert.Contains(t, x["output"], "[Output truncated at 4096 bytes")
			long := h.model.output(t, 1, 1)
			assert.Equal(t, true, long["truncated"], "%v", long)
			assert.LessOrEqual(t, len(long["content"].(string)), max+200)
			lines := h.model.output(t, 1, 2)
			require.Equal(t, true, lines["truncated"], "%v", lines)
			c := lines["content"].(string)
			assert.LessOrEqual(t, len(c), max+200)
			next := int(lines["next_offset"].(float64))
			assert.Greater(t, next, 0)
			assert.Contains(t, c, fmt.Sprintf("read on with offset %d]", next))
			assert.Contains(t, c, fmt.Sprintf("line-%d-", next), "the last line kept is whole")
			assert.NotContains(t, c, fmt.Sprintf("line-%d-", next+1))
			g := h.model.output(t, 1, 3)
			assert.Equal(t, true, g["truncated"])
			assert.LessOrEqual(t, len(g["output"].(string)), max+200)
			slow := h.model.output(t, 1, 4)
			assert.Equal(t, true, slow["timed_out"], "%v", slow)

			for i := range 3 {
				out := h.model.output(t, 2, i)
				assert.Equal(t, "invalid_argument", errCode(out), "call %d: %v", i, out)
				assert.LessOrEqual(t, len(fmt.Sprint(out)), 5<<10, "the error does not quote a huge input whole")
			}
			leak := h.model.output(t, 3, 0)
			assert.Equal(t, "     1\tkey [REDACTED]", leak["content"])
		})
	}
}

// TestNoGuard documents why the tools go through the middleware: Genkit
// ends Generate when an input does not match a tool's schema. With
// Define and no middleware the loop ends; with Guard it goes on.
func TestNoGuard(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	g := genkit.Init(ctx)
	model := &scripted{turns: [][]call{{{"read_file", map[string]any{"path": 5}}}}}
	m := model.define(g, "test/scripted")
	mgr := session.NewManager(sandbox.NewClient(memory.New()), session.Options{ReapInterval: -1})
	defer mgr.Close(context.Background())
	ts, err := sandboxgenkit.New(mgr, sandboxgenkit.Options{})
	require.NoError(t, err)
	refs := ts.Define(g)
	cctx := sandboxgenkit.WithConversation(ctx, "k")

	_, err = genkit.Generate(cctx, g, ai.WithModel(m), ai.WithTools(refs...), ai.WithPrompt("go"))
	require.Error(t, err, "Genkit ends the loop on a schema mismatch")

	model.seen = nil
	resp, err := genkit.Generate(cctx, g, ai.WithModel(m), ai.WithTools(refs...), ai.WithUse(ts.Guard()), ai.WithPrompt("go"))
	require.NoError(t, err)
	assert.Equal(t, "done", resp.Text())
	assert.Equal(t, "invalid_argument", errCode(model.output(t, 0, 0)))

	// The unregistered tools of Tools work the same way.
	model.turns = [][]call{{{"write_file", map[string]any{"path": "a.txt", "content": "x"}}}}
	model.seen = nil
	var tools []ai.ToolRef
	for _, tool := range ts.Tools() {
		tools = append(tools, tool)
	}
	_, err = genkit.Generate(cctx, g, ai.WithModel(m), ai.WithTools(tools...), ai.WithUse(ts.Guard()), ai.WithPrompt("go"))
	require.NoError(t, err)
	assert.EqualValues(t, 1, model.output(t, 0, 0)["bytes"])
}

// TestCancelledTurn: two tools of one turn running when the context
// ends both answer with a result, Generate ends with the context's error,
// and no goroutine is left behind. Genkit leaves the other tools of a turn
// blocked for ever when one returns a Go error, so the tools must not,
// with the middleware (whose guard would catch it) and without it
// (Define); goleak in TestMain checks.
func TestCancelledTurn(t *testing.T) {
	turn := []call{{"execute", map[string]any{"command": "sleep 20"}}, {"execute", map[string]any{"command": "sleep 20"}}, {"ls", map[string]any{}}}
	h := newHarness(t, providers()[1], sandboxgenkit.Options{AllowExecute: true}, turn)
	h.sh(t, "c", "true") // the sandbox exists before the clock starts
	for _, mode := range []string{"middleware", "define"} {
		t.Run(mode, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(sandboxgenkit.WithConversation(context.Background(), "c"), 1500*time.Millisecond)
			defer cancel()
			h.model.mu.Lock()
			h.model.seen = nil
			h.model.mu.Unlock()
			start := time.Now()
			var err error
			if mode == "middleware" {
				_, err = h.flow(ctx, "sleep")
			} else {
				m := genkit.LookupModel(h.g, "test/scripted")
				_, err = genkit.Generate(ctx, h.g, ai.WithModel(m), ai.WithTools(h.tools.Define(h.g)...), ai.WithPrompt("sleep"))
			}
			require.Error(t, err)
			assert.ErrorIs(t, err, context.DeadlineExceeded)
			assert.Less(t, time.Since(start), 15*time.Second)
		})
	}
}

// TestNoConversation: a call without a conversation key is a
// configuration error that ends Generate, naming the fix.
func TestNoConversation(t *testing.T) {
	h := newHarness(t, providers()[0], sandboxgenkit.Options{}, []call{{"ls", map[string]any{}}})
	_, err := h.flow(context.Background(), "list")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "WithConversation")
	assert.Equal(t, 0, h.mgr.Len(), "no sandbox is created without a key")
}

// TestBadOptions: invalid options are refused by New, naming them.
func TestBadOptions(t *testing.T) {
	mgr := session.NewManager(sandbox.NewClient(memory.New()), session.Options{ReapInterval: -1})
	defer mgr.Close(context.Background())
	for name, o := range map[string]sandboxgenkit.Options{
		"Prefix":         {Prefix: "my tools/"},
		"MaxOutput":      {MaxOutput: -1},
		"ExecuteTimeout": {ExecuteTimeout: -time.Second},
		"MaxReadBytes":   {MaxReadBytes: -1},
	} {
		_, err := sandboxgenkit.New(mgr, o)
		require.Error(t, err, name)
		assert.Contains(t, err.Error(), name)
	}
	_, err := sandboxgenkit.New(nil, sandboxgenkit.Options{})
	require.Error(t, err)
	ts, err := sandboxgenkit.New(mgr, sandboxgenkit.Options{Prefix: "sb_"})
	require.NoError(t, err)
	assert.Equal(t, []string{"sb_ls", "sb_read_file", "sb_write_file", "sb_edit_file", "sb_glob", "sb_grep"}, ts.Names())
}
