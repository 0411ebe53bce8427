package openai

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/openai/openai-go/v3/responses"
	"github.com/stretchr/testify/require"

	"github.com/sandboxkit/sandbox/backend"
)

// markRE matches the truncation mark line.
var markRE = regexp.MustCompile(`\[\.\.\. \d+ bytes truncated \.\.\.\]\n`)

func patch(callID, op, p, diff string) responses.ResponseApplyPatchToolCall {
	return responses.ResponseApplyPatchToolCall{CallID: callID, Operation: responses.ResponseApplyPatchToolCallOperationUnion{Type: op, Path: p, Diff: diff}}
}

func shell(callID string, timeoutMs, maxLen int64, cmds ...string) responses.ResponseFunctionShellToolCall {
	return responses.ResponseFunctionShellToolCall{CallID: callID, Action: responses.ResponseFunctionShellToolCallAction{Commands: cmds, TimeoutMs: timeoutMs, MaxOutputLength: maxLen}}
}

// applied runs one patch call and returns its status and output, failing
// the test on a Go error: every case here is one the model must be told.
func applied(t *testing.T, tools *Tools, call responses.ResponseApplyPatchToolCall) (string, string) {
	t.Helper()
	out, err := tools.ApplyPatch(context.Background(), call)
	require.NoError(t, err)
	require.Equal(t, call.CallID, out.CallID)
	return out.Status, out.Output.Value
}

func TestApplyPatchPathEscapes(t *testing.T) {
	t.Parallel()
	for name, e := range envs(t) {
		t.Run(name, func(t *testing.T) {
			tools := toolsFor(t, e, Options{})
			e.sh(t, "mkdir -p "+e.ws+" && printf 'keep\\n' > "+e.out+"/victim.txt")
			e.sh(t, "ln -s "+e.out+" "+e.ws+"/link && ln -s ../outside "+e.ws+"/rel && ln -s "+e.out+"/victim.txt "+e.ws+"/vlink.txt")
			home := strings.TrimSuffix(e.ws, "/workspace")

			for _, p := range []string{"../escape.txt", "../outside/x.txt", "a/../../escape.txt", "link/x.txt", "rel/x.txt", ".fsbackend/x.txt"} {
				st, msg := applied(t, tools, patch("c", "create_file", p, "+pwned\n"))
				require.Equal(t, "failed", st, "create_file %s: %s", p, msg)
			}
			require.False(t, e.exists(t, home+"/escape.txt"))
			require.False(t, e.exists(t, e.out+"/x.txt"))

			for _, p := range []string{"link/victim.txt", "rel/victim.txt", "vlink.txt", "../outside/victim.txt"} {
				st, msg := applied(t, tools, patch("c", "update_file", p, "-keep\n+pwned\n"))
				require.Equal(t, "failed", st, "update_file %s: %s", p, msg)
				st, msg = applied(t, tools, patch("c", "delete_file", p, ""))
				if p == "vlink.txt" {
					// The link itself is in the workspace: deleting it
					// removes the link, never its target.
					require.Equal(t, "completed", st, msg)
					continue
				}
				require.Equal(t, "failed", st, "delete_file %s: %s", p, msg)
			}
			require.Equal(t, "keep\n", e.read(t, e.out+"/victim.txt"))
			require.False(t, e.exists(t, e.ws+"/vlink.txt"))

			// An absolute path is re-rooted under the workspace, and the
			// workspace's own prefix is accepted as such.
			st, msg := applied(t, tools, patch("c", "create_file", "/etc/evil.txt", "+x\n"))
			require.Equal(t, "completed", st, msg)
			require.Equal(t, "x\n", e.read(t, e.ws+"/etc/evil.txt"))
			require.False(t, e.exists(t, "/etc/evil.txt"))
			st, msg = applied(t, tools, patch("c", "create_file", e.ws+"/abs.txt", "+y\n"))
			require.Equal(t, "completed", st, msg)
			require.Equal(t, "y\n", e.read(t, e.ws+"/abs.txt"))
		})
	}
}

func TestApplyPatchBadHunkLeavesFileUnchanged(t *testing.T) {
	t.Parallel()
	for name, e := range envs(t) {
		t.Run(name, func(t *testing.T) {
			tools := toolsFor(t, e, Options{})
			orig := "one\ntwo\nthree\nfour\nfive\n"
			st, msg := applied(t, tools, patch("c1", "create_file", "f.txt", "+one\n+two\n+three\n+four\n+five\n"))
			require.Equal(t, "completed", st, msg)
			// The first hunk matches, the second does not: nothing changes.
			st, msg = applied(t, tools, patch("c2", "update_file", "f.txt", "@@\n-one\n+ONE\n@@\n four\n-six\n+SIX\n"))
			require.Equal(t, "failed", st)
			require.Contains(t, msg, "six")
			require.Contains(t, msg, "unchanged")
			require.Equal(t, orig, e.read(t, e.ws+"/f.txt"))
			// A malformed diff, likewise.
			st, _ = applied(t, tools, patch("c3", "update_file", "f.txt", "-one\n+ONE\n?junk\n"))
			require.Equal(t, "failed", st)
			require.Equal(t, orig, e.read(t, e.ws+"/f.txt"))
			// Both hunks good: both applied, in one write.
			st, msg = applied(t, tools, patch("c4", "update_file", "f.txt", "@@\n-one\n+ONE\n@@\n four\n-five\n+FIVE\n"))
			require.Equal(t, "completed", st, msg)
			require.Equal(t, "ONE\ntwo\nthree\nfour\nFIVE\n", e.read(t, e.ws+"/f.txt"))
		})
	}
}

func TestApplyPatchFailuresTellTheModel(t *testing.T) {
	t.Parallel()
	e := envs(t)["memory"]
	tools := toolsFor(t, e, Options{})
	ctx := context.Background()
	e.sh(t, "mkdir -p "+e.ws+"/dir && printf 'x\\n' > "+e.ws+"/exists.txt")
	w, err := tools.fb.WriteBytes(ctx, &backend.WriteBytesRequest{Path: "blob.bin", Data: []byte{0, 1, 2, 'a', '\n'}})
	require.NoError(t, err)
	require.Nil(t, w.Error)
	cases := []struct {
		call responses.ResponseApplyPatchToolCall
		want string
	}{
		{patch("c", "create_file", "exists.txt", "+y\n"), "already exists"},
		{patch("c", "create_file", "dir", "+y\n"), "directory of that name already exists"},
		{patch("c", "create_file", "new.txt", "no plus\n"), "does not start with"},
		{patch("c", "create_file", "exists.txt/sub.txt", "+y\n"), "not a directory"},
		{patch("c", "update_file", "missing.txt", " a\n"), "does not exist; use create_file"},
		{patch("c", "update_file", "blob.bin", " a\n+b\n"), "binary"},
		{patch("c", "delete_file", "missing.txt", ""), "does not exist"},
		{patch("c", "delete_file", "dir", ""), "is a directory"},
		{patch("c", "delete_file", "", ""), "no path"},
		{patch("c", "delete_file", ".", ""), "workspace root"},
		{patch("c", "rename_file", "exists.txt", ""), "unknown apply_patch operation"},
	}
	for _, c := range cases {
		st, msg := applied(t, tools, c.call)
		require.Equal(t, "failed", st, "%s %s: %s", c.call.Operation.Type, c.call.Operation.Path, msg)
		require.Contains(t, msg, c.want, "%s %s", c.call.Operation.Type, c.call.Operation.Path)
	}
	require.Equal(t, "x\n", e.read(t, e.ws+"/exists.txt"))
	require.True(t, e.exists(t, e.ws+"/dir"))
}

func TestShellTimeout(t *testing.T) {
	t.Parallel()
	for name, e := range envs(t) {
		t.Run(name, func(t *testing.T) {
			// MaxTimeout caps what the call asks for: without the cap this
			// would run for a minute and the ctx below would end it.
			tools := toolsFor(t, e, Options{MaxTimeout: 500 * time.Millisecond})
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			start := time.Now()
			out, err := tools.Shell(ctx, shell("c", 60_000, 0, "echo before; sleep 60", "echo after"))
			require.NoError(t, err)
			require.Less(t, time.Since(start), 20*time.Second)
			require.Len(t, out.Output, 1, "the command after a timeout is not run")
			require.NotNil(t, out.Output[0].Outcome.OfTimeout)
			require.Equal(t, "before\n", out.Output[0].Stdout, "output before the timeout is kept")
		})
	}
}

func TestShellHugeOutputCapped(t *testing.T) {
	t.Parallel()
	for name, e := range envs(t) {
		t.Run(name, func(t *testing.T) {
			tools := toolsFor(t, e, Options{MaxOutputLength: 4000})
			ctx := context.Background()
			out, err := tools.Shell(ctx, shell("c", 0, 1000, "yes abcdefghi | head -c 3000000; echo; echo END"))
			require.NoError(t, err)
			require.Equal(t, int64(1000), out.MaxOutputLength.Value)
			so := out.Output[0].Stdout
			require.True(t, strings.HasPrefix(so, "abcdefghi\nabcdefghi\n"), so[:40])
			require.True(t, strings.HasSuffix(so, "\nEND\n"))
			require.Contains(t, so, fmt.Sprintf("[... %d bytes truncated ...]", 3000000+1+4-1000))
			mark := len(fmt.Sprintf("\n[... %d bytes truncated ...]\n", 3000000+1+4-1000))
			require.LessOrEqual(t, utf8.RuneCountInString(so), 1000+mark)
			require.NotNil(t, out.Output[0].Outcome.OfExit)

			// stdout and stderr share the budget.
			out, err = tools.Shell(ctx, shell("c", 0, 1000, "yes o | head -c 40000; yes e | head -c 40000 >&2"))
			require.NoError(t, err)
			so, se := out.Output[0].Stdout, out.Output[0].Stderr
			require.Contains(t, so, "bytes truncated")
			require.Contains(t, se, "bytes truncated")
			require.Equal(t, 500, utf8.RuneCountInString(markRE.ReplaceAllString(so, "")))
			require.Equal(t, 500, utf8.RuneCountInString(markRE.ReplaceAllString(se, "")))

			// A call asking for more than MaxOutputLength gets MaxOutputLength.
			out, err = tools.Shell(ctx, shell("c", 0, 1_000_000, "echo hi"))
			require.NoError(t, err)
			require.Equal(t, int64(4000), out.MaxOutputLength.Value)
			require.Equal(t, "hi\n", out.Output[0].Stdout)
		})
	}
}

func TestShellRedactsSecrets(t *testing.T) {
	t.Parallel()
	for name, e := range envs(t) {
		t.Run(name, func(t *testing.T) {
			const secret = "sk-live-51Habcdef"
			tools := toolsFor(t, e, Options{SecretEnv: map[string]string{"API_TOKEN": secret}, Env: map[string]string{"MODE": "test"}})
			ctx := context.Background()
			out, err := tools.Shell(ctx, shell("c", 0, 0, `echo "token=$API_TOKEN mode=$MODE"; echo "$API_TOKEN" >&2`))
			require.NoError(t, err)
			require.Equal(t, "token=[REDACTED] mode=test\n", out.Output[0].Stdout)
			require.Equal(t, "[REDACTED]\n", out.Output[0].Stderr)
			// The secret reaches a file through a command; a failed patch
			// that quotes it back does not show it.
			_, err = tools.Shell(ctx, shell("c", 0, 0, `printf 'a\n' > s.txt`))
			require.NoError(t, err)
			st, msg := applied(t, tools, patch("c", "update_file", "s.txt", " "+secret+"\n+b\n"))
			require.Equal(t, "failed", st)
			require.NotContains(t, msg, secret)
			require.Contains(t, msg, "[REDACTED]")
		})
	}
}

func TestShellContextEndIsAGoError(t *testing.T) {
	t.Parallel()
	e := envs(t)["memory"]
	tools := toolsFor(t, e, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err := tools.Shell(ctx, shell("c", 60_000, 0, "sleep 30"))
	require.Error(t, err)
	require.ErrorIs(t, err, context.DeadlineExceeded)
}
