package anthropic_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandboxkit/sandbox"
	sbanthropic "github.com/sandboxkit/sandbox/contrib/anthropic"
	"github.com/sandboxkit/sandbox/provider/local"
	"github.com/sandboxkit/sandbox/provider/memory"
)

// The tools satisfy the SDK's tool interface.
var (
	_ sdk.BetaTool = (&sbanthropic.Tools{}).Bash()
	_ sdk.BetaTool = (&sbanthropic.Tools{}).TextEditor()
)

const secret = "s3cr3t-t0ken-value"

// providers returns a fresh sandbox on each provider the tests run on.
func providers(t *testing.T) map[string]func(t *testing.T) *sandbox.Sandbox {
	return map[string]func(t *testing.T) *sandbox.Sandbox{
		"memory": func(t *testing.T) *sandbox.Sandbox {
			c := sandbox.NewClient(memory.New())
			t.Cleanup(func() { _ = c.Close() })
			sb, err := c.Create(context.Background(), sandbox.CreateOptions{})
			require.NoError(t, err)
			t.Cleanup(func() { _ = sb.Destroy(context.Background()) })
			return sb
		},
		"local": func(t *testing.T) *sandbox.Sandbox {
			rt, err := local.New(local.WithRoot(t.TempDir()))
			require.NoError(t, err)
			c := sandbox.NewClient(rt)
			t.Cleanup(func() { _ = c.Close() })
			sb, err := c.Create(context.Background(), sandbox.CreateOptions{})
			require.NoError(t, err)
			t.Cleanup(func() { _ = sb.Destroy(context.Background()) })
			return sb
		},
	}
}

// newClient returns the SDK's client for the fake API at srv, with a
// transport of its own whose idle connections end with the test.
func newClient(t *testing.T, srv string, key string) sdk.Client {
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return sdk.NewClient(option.WithBaseURL(srv), option.WithAPIKey(key), option.WithMaxRetries(0),
		option.WithHTTPClient(&http.Client{Transport: tr}))
}

// runLoop drives the SDK's own tool runner to completion.
func runLoop(t *testing.T, client sdk.Client, tools []sdk.BetaTool, defs []sdk.BetaToolUnionParam) *sdk.BetaMessage {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	runner := client.Beta.Messages.NewToolRunner(tools, sdk.BetaToolRunnerParams{
		BetaMessageNewParams: sdk.BetaMessageNewParams{
			Model: "claude-fake", MaxTokens: 1024, Tools: defs,
			Messages: []sdk.BetaMessageParam{sdk.NewBetaUserMessage(sdk.NewBetaTextBlock("work in the sandbox"))},
		},
	})
	msg, err := runner.RunToCompletion(ctx)
	require.NoError(t, err, "the runner's loop ended with an error")
	return msg
}

func ed(id string, input map[string]any) call {
	return call{ID: id, Name: sbanthropic.TextEditorToolName, Input: input}
}

func sh(id, command string) call {
	return call{ID: id, Name: sbanthropic.BashToolName, Input: map[string]any{"command": command}}
}

// TestClientToolsEndToEnd drives bash and the text editor through the SDK's
// tool runner against the scripted Messages API, on memory and local, and
// checks each tool_result, the hostile cases included.
func TestClientToolsEndToEnd(t *testing.T) {
	for name, mk := range providers(t) {
		t.Run(name, func(t *testing.T) {
			sb := mk(t)
			tools, err := sbanthropic.New(sb, sbanthropic.Options{
				SecretEnv: map[string]string{"API_TOKEN": secret}, MaxOutput: 2000,
			})
			require.NoError(t, err)
			defer tools.Close()

			// The runner runs a turn's calls in parallel (bash ones one at a
			// time, in any order): calls that depend on each other are in
			// different turns.
			f, srv := newFakeAPI(t,
				[]call{
					ed("create", map[string]any{"command": "create", "path": "notes/a.txt", "file_text": "alpha\nbeta\nalpha\n"}),
					sh("outside", "mkdir -p ../outside && echo top-secret > ../outside/f.txt && ln -s ../outside link && printf '\\000\\001\\002\\003' > bin.dat"),
				},
				[]call{
					ed("view", map[string]any{"command": "view", "path": "notes/a.txt"}),
					ed("two", map[string]any{"command": "str_replace", "path": "notes/a.txt", "old_str": "alpha", "new_str": "x"}),
					ed("zero", map[string]any{"command": "str_replace", "path": "notes/a.txt", "old_str": "gamma", "new_str": "x"}),
					ed("escape", map[string]any{"command": "view", "path": "../../../etc/passwd"}),
					ed("symlink", map[string]any{"command": "view", "path": "link/f.txt"}),
					ed("symlink-write", map[string]any{"command": "create", "path": "link/new.txt", "file_text": "x"}),
					ed("binary", map[string]any{"command": "view", "path": "bin.dat"}),
					sh("mk", "mkdir -p sub && cd sub && GREETING=\"it's here\""),
				},
				[]call{
					sh("persist", "pwd; echo \"$GREETING\""),
					ed("one", map[string]any{"command": "str_replace", "path": "notes/a.txt", "old_str": "beta", "new_str": "BETA"}),
				},
				[]call{
					sh("huge", "i=0; while [ $i -lt 3000 ]; do echo line-$i-xxxxxxxxxxxxxxxxxxxxxxxx; i=$((i+1)); done"),
					sh("secret", "echo token=$API_TOKEN"),
					sh("fail", "echo failing >&2; exit 3"),
				},
				[]call{
					call{ID: "restart", Name: sbanthropic.BashToolName, Input: map[string]any{"restart": true}},
					ed("insert", map[string]any{"command": "insert", "path": "notes/a.txt", "insert_line": 0, "insert_text": "top"}),
				},
				[]call{
					sh("after-restart", "pwd; echo \"[${GREETING:-unset}]\""),
					ed("range", map[string]any{"command": "view", "path": "notes/a.txt", "view_range": []int{1, 2}}),
					ed("dir", map[string]any{"command": "view", "path": "notes"}),
					ed("unknown", map[string]any{"command": "undo_edit", "path": "notes/a.txt"}),
					ed("missing", map[string]any{"command": "view", "path": "nope.txt"}),
					ed("write-secret", map[string]any{"command": "create", "path": "cfg.txt", "file_text": "key=" + secret + "\n"}),
				},
				[]call{
					ed("read-secret", map[string]any{"command": "view", "path": "cfg.txt"}),
				},
			)
			msg := runLoop(t, newClient(t, srv.URL, f.key), tools.ClientTools(), tools.ToolParams())
			assert.Equal(t, sdk.BetaStopReasonEndTurn, msg.StopReason)
			require.Empty(t, f.problems)

			// The Anthropic-defined versions were declared, not custom tools.
			var declared []string
			for _, raw := range f.tools {
				declared = append(declared, string(raw))
			}
			assert.Contains(t, strings.Join(declared, " "), `"type":"bash_20250124"`)
			assert.Contains(t, strings.Join(declared, " "), `"type":"text_editor_20250728"`)

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

			assert.Equal(t, "File created successfully at: notes/a.txt", ok("create"))
			assert.Equal(t, "     1\talpha\n     2\tbeta\n     3\talpha", ok("view"))
			assert.Contains(t, bad("two"), "Found 2 matches for replacement text. Please provide more context to make a unique match.")
			assert.Contains(t, bad("two"), "lines 1, 3")
			assert.Contains(t, bad("zero"), "No match found for replacement. Please check your text and try again.")
			persist := ok("persist")
			assert.True(t, strings.HasSuffix(persist, "/sub\nit's here\n"), "cwd and variables persist: %q", persist)

			assert.Contains(t, bad("escape"), "Error: ")
			assert.NotContains(t, f.result(t, "escape").Text, "root:")
			assert.NotContains(t, bad("symlink"), "top-secret")
			bad("symlink-write")
			out, err := sb.Exec(context.Background(), sandbox.Command{Shell: "ls ../outside", Dir: mustBase(t, sb)})
			require.NoError(t, err)
			assert.NotContains(t, string(out.Stdout), "new.txt", "a write through a link must not land outside")

			assert.Contains(t, bad("binary"), "binary file of 4 bytes")

			huge := ok("huge")
			assert.LessOrEqual(t, len([]rune(huge)), 2000+100)
			assert.Contains(t, huge, "[Output truncated")
			assert.True(t, strings.HasPrefix(huge, "line-0-"))

			assert.Equal(t, "token=[REDACTED]\n", ok("secret"))
			failing := bad("fail")
			assert.Contains(t, failing, "failing")
			assert.Contains(t, failing, "[Command exited with code 3]")

			assert.Contains(t, ok("one"), "     2\tBETA")
			assert.Equal(t, "tool has been restarted.", ok("restart"))
			afterRestart := ok("after-restart")
			assert.True(t, strings.HasSuffix(afterRestart, "/workspace\n[unset]\n"), "restart clears the state: %q", afterRestart)
			assert.Contains(t, ok("insert"), "     1\ttop")

			assert.Equal(t, "     1\ttop\n     2\talpha", ok("range"))
			dir := ok("dir")
			assert.Contains(t, dir, "a.txt")
			assert.Contains(t, bad("unknown"), "Unrecognized command")
			assert.Contains(t, bad("missing"), "nope.txt")
			ok("write-secret")
			rs := ok("read-secret")
			assert.NotContains(t, rs, secret)
			assert.Contains(t, rs, "key=[REDACTED]")
		})
	}
}

// mustBase returns the tools' default workspace of sb.
func mustBase(t *testing.T, sb *sandbox.Sandbox) string {
	t.Helper()
	res, err := sb.Exec(context.Background(), sandbox.Command{Shell: `printf '%s' "$HOME/workspace"`})
	require.NoError(t, err)
	return string(res.Stdout)
}
