package eino_test

import (
	"context"
	"fmt"
	"path"
	"strings"
	"testing"
	"time"

	"github.com/cloudwego/eino/adk"
	"github.com/cloudwego/eino/schema"
	"github.com/stretchr/testify/require"

	"github.com/sandboxkit/sandbox"
	eino "github.com/sandboxkit/sandbox/contrib/eino"
)

const e2eSecret = "tok-e2e-secret-123"

// fixtures puts into the conversation's sandbox what the hostile calls
// aim at: a file outside the workspace and a symbolic link to its
// directory inside, a large file, a file of one long line and a binary
// file. It returns the directory outside the workspace.
func fixtures(ctx context.Context, t *testing.T, sb *sandbox.Sandbox, ws string) string {
	t.Helper()
	outside := path.Join(sb.Home(), "outside")
	require.NoError(t, sb.WriteFile(ctx, path.Join(outside, "secret.txt"), []byte("TOP-SECRET-OUTSIDE\n")))
	res, err := sb.Exec(ctx, sandbox.Command{Args: []string{"ln", "-s", outside, path.Join(ws, "escape")}})
	require.NoError(t, err)
	require.Equal(t, 0, res.ExitCode, "ln: %s", res.Stderr)
	var big strings.Builder
	for i := 1; i <= 30000; i++ {
		fmt.Fprintf(&big, "line %05d %s\n", i, strings.Repeat("x", 88))
	}
	require.NoError(t, sb.WriteFile(ctx, path.Join(ws, "big.txt"), []byte(big.String())))
	require.NoError(t, sb.WriteFile(ctx, path.Join(ws, "long.txt"), []byte(strings.Repeat("y", 200<<10)+"\n")))
	bin := make([]byte, 256)
	for i := range bin {
		bin[i] = byte(i)
	}
	require.NoError(t, sb.WriteFile(ctx, path.Join(ws, "bin.dat"), bin))
	return outside
}

// runAgent runs agent through an adk Runner for the conversation key and
// returns the last message and the errors of the run.
func runAgent(ctx context.Context, agent adk.Agent, streaming bool, key string) (string, []error) {
	runner := adk.NewRunner(ctx, adk.RunnerConfig{Agent: agent, EnableStreaming: streaming})
	it := runner.Run(ctx, []adk.Message{schema.UserMessage("work in the sandbox")},
		adk.WithSessionValues(map[string]any{eino.SessionKey: key}))
	var last string
	var errs []error
	for {
		ev, ok := it.Next()
		if !ok {
			return last, errs
		}
		if ev.Err != nil {
			errs = append(errs, ev.Err)
			continue
		}
		if ev.Output != nil && ev.Output.MessageOutput != nil {
			msg, err := ev.Output.MessageOutput.GetMessage()
			if err != nil {
				errs = append(errs, err)
				continue
			}
			if msg.Role == schema.Assistant {
				last = msg.Content
			}
		}
	}
}

// TestAgentEndToEnd drives an adk ChatModelAgent whose tools are eino's
// filesystem middleware over the Backend with a scripted model, on the
// memory and the local provider: every tool, and the hostile calls (paths
// out of the workspace by "..", by an absolute path and through a symbolic
// link, a huge file, a binary file, malformed arguments, a secret in a
// file and in a command's output), each checked in the result the model
// got, with the run going on after each failure.
func TestAgentEndToEnd(t *testing.T) {
	for _, p := range providers() {
		t.Run(p.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			mgr := newManager(t, p.client(t))
			sess, err := mgr.Acquire(ctx, "conv-1")
			require.NoError(t, err)
			outside := fixtures(ctx, t, sess.Sandbox(), sess.Workspace())

			b, err := eino.New(mgr, eino.Options{AllowExecute: true, SecretEnv: map[string]string{"API_TOKEN": e2eSecret}, MaxReadOutput: 64 << 10})
			require.NoError(t, err)
			defer b.Close()
			mw, err := eino.NewMiddleware(ctx, b, nil)
			require.NoError(t, err)

			type check func(t *testing.T, got string)
			equal := func(want string) check {
				return func(t *testing.T, got string) { require.Equal(t, want, got) }
			}
			has := func(want ...string) check {
				return func(t *testing.T, got string) {
					for _, w := range want {
						require.Contains(t, got, w)
					}
				}
			}
			noHostFile := func(t *testing.T, got string) {
				require.NotContains(t, got, "root:")
				require.NotContains(t, got, "TOP-SECRET-OUTSIDE")
			}
			steps := []struct {
				call
				checks []check
			}{
				{call{"ls", `{}`}, []check{has("big.txt", "bin.dat", "long.txt")}},
				{call{"write_file", `{"file_path":"notes/a.txt","content":"hello world\nsecond line\n"}`}, []check{equal("Updated file notes/a.txt")}},
				{call{"read_file", `{"file_path":"notes/a.txt"}`}, []check{equal("     1\thello world\n     2\tsecond line")}},
				{call{"edit_file", `{"file_path":"notes/a.txt","old_string":"world","new_string":"sandbox"}`}, []check{equal("Successfully replaced the string in 'notes/a.txt'")}},
				{call{"grep", `{"pattern":"sand.ox","output_mode":"content"}`}, []check{equal("notes/a.txt:1:hello sandbox")}},
				{call{"grep", `{"pattern":"SECOND","-i":true,"type":"txt"}`}, []check{equal("Found 1 file\nnotes/a.txt")}},
				{call{"glob", `{"pattern":"**/*.txt"}`}, []check{has("notes/a.txt", "big.txt", "long.txt"), func(t *testing.T, got string) { require.NotContains(t, got, "secret.txt") }}},
				{call{"execute", `{"command":"cat notes/a.txt; echo token=$API_TOKEN; exit 3"}`}, []check{
					has("hello sandbox\nsecond line\ntoken=[REDACTED]\n", "[Command failed with exit code 3]"),
					func(t *testing.T, got string) { require.NotContains(t, got, e2eSecret) }}},
				// Hostile paths: a tool-result error naming the path, no host file.
				{call{"read_file", `{"file_path":"../../etc/passwd"}`}, []check{has("Error: invalid path '../../etc/passwd'"), noHostFile}},
				{call{"read_file", `{"file_path":"/etc/passwd"}`}, []check{equal("Error: file 'etc/passwd' not found"), noHostFile}},
				{call{"read_file", `{"file_path":"escape/secret.txt"}`}, []check{has("Error: invalid path 'escape/secret.txt'"), noHostFile}},
				{call{"write_file", `{"file_path":"escape/planted.txt","content":"planted"}`}, []check{has("Error: invalid path 'escape/planted.txt'")}},
				{call{"grep", `{"pattern":"TOP-SECRET","output_mode":"content"}`}, []check{equal("No matches found")}},
				// A huge file is read in windows, each capped with a mark.
				{call{"read_file", `{"file_path":"big.txt"}`}, []check{
					has("     1\tline 00001 ", "[Output truncated at the read limit of 65536 bytes: lines 1-"),
					func(t *testing.T, got string) {
						require.Less(t, len(got), 64<<10+20*700, "the window is capped")
						require.Regexp(t, `lines 1-(\d+) of 30000 shown; call read_file with offset=(\d+) to read on\]$`, got)
					}}},
				{call{"read_file", `{"file_path":"big.txt","offset":29999}`}, []check{equal(" 29999\tline 29999 " + strings.Repeat("x", 88) + "\n 30000\tline 30000 " + strings.Repeat("x", 88))}},
				{call{"read_file", `{"file_path":"long.txt"}`}, []check{has("[Output truncated: line 1 is longer than the read limit of 65536 bytes"),
					func(t *testing.T, got string) { require.Less(t, len(got), 64<<10+1000) }}},
				{call{"read_file", `{"file_path":"bin.dat"}`}, []check{has("Error: 'bin.dat' is a binary file")}},
				{call{"read_file", `{"file_path":"missing.txt"}`}, []check{equal("Error: file 'missing.txt' not found")}},
				{call{"read_file", `{"file_path":`}, []check{has("Error: ")}},
				{call{"edit_file", `{"file_path":"notes/a.txt","old_string":"e","new_string":"E"}`}, []check{has("Error: ", "notes/a.txt")}},
				{call{"grep", `{"pattern":"x","type":"klingon"}`}, []check{has(`Error: invalid type: unknown file type "klingon"`)}},
				// Secrets in files are redacted from what the model sees.
				{call{"write_file", `{"file_path":"leak.txt","content":"key=` + e2eSecret + `\n"}`}, []check{equal("Updated file leak.txt")}},
				{call{"read_file", `{"file_path":"leak.txt"}`}, []check{equal("     1\tkey=[REDACTED]")}},
			}
			calls := make([]call, len(steps))
			for i, s := range steps {
				calls[i] = s.call
			}
			m := newScripted(calls...)
			agent, err := adk.NewChatModelAgent(ctx, &adk.ChatModelAgentConfig{
				Name: "coder", Description: "works in a sandbox", Instruction: "You are a careful coder.",
				Model: m, MaxIterations: 2 * len(steps), Handlers: []adk.ChatModelAgentMiddleware{mw},
			})
			require.NoError(t, err)

			last, errs := runAgent(ctx, agent, false, "conv-1")
			require.Empty(t, errs, "no tool failure ends the run")
			require.Equal(t, "done", last)
			for i, s := range steps {
				got, ok := m.result(i)
				require.True(t, ok, "step %d (%s %s) has a result", i, s.tool, s.args)
				t.Run(fmt.Sprintf("%02d_%s", i, s.tool), func(t *testing.T) {
					for _, c := range s.checks {
						c(t, got)
					}
				})
			}

			// The model was offered the tools, described for the sandbox.
			descs := map[string]string{}
			for _, ti := range m.offered() {
				descs[ti.Name] = ti.Desc
			}
			for _, name := range []string{"ls", "read_file", "write_file", "edit_file", "glob", "grep", "execute"} {
				require.Contains(t, descs, name)
			}
			require.Contains(t, descs["read_file"], "relative to the workspace root")
			require.Contains(t, descs["read_file"], "65536 bytes")
			require.Contains(t, descs["read_file"], "Binary files")
			require.Contains(t, descs["execute"], "The working directory is the workspace root")

			// Nothing reached the directory outside the workspace.
			_, err = sess.Sandbox().Stat(ctx, path.Join(outside, "planted.txt"))
			require.ErrorIs(t, err, sandbox.ErrNotFound)
		})
	}
}
