package openai

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/openai/openai-go/v3/responses"
	"github.com/stretchr/testify/require"
)

// item returns input item i of request r, failing when it is missing.
func item(t *testing.T, r map[string]any, i int) map[string]any {
	t.Helper()
	in, ok := r["input"].([]any)
	require.True(t, ok, "input is not a list: %v", r["input"])
	require.Greater(t, len(in), i, "input: %v", in)
	m, ok := in[i].(map[string]any)
	require.True(t, ok)
	return m
}

// shellOutputs returns the output list of a shell_call_output item.
func shellOutputs(t *testing.T, it map[string]any) []map[string]any {
	t.Helper()
	require.Equal(t, "shell_call_output", it["type"])
	var out []map[string]any
	for _, o := range it["output"].([]any) {
		out = append(out, o.(map[string]any))
	}
	return out
}

func outcome(o map[string]any) string {
	oc := o["outcome"].(map[string]any)
	if oc["type"] == "exit" {
		b, _ := json.Marshal(oc["exit_code"])
		return "exit " + string(b)
	}
	return oc["type"].(string)
}

// TestRunScriptedConversation drives the real SDK client through Run
// against a fake Responses API that scripts shell and apply_patch calls
// over four turns, and checks every output the client sent back.
func TestRunScriptedConversation(t *testing.T) {
	t.Parallel()
	for name, e := range envs(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			api := newFakeAPI(t,
				[]map[string]any{
					patchCall("c1", "create_file", "src/hello.txt", "+hello\n+world\n"),
					shellCall("c2", 0, 0, "cat src/hello.txt", "echo oops >&2; exit 3"),
				},
				[]map[string]any{
					patchCall("c3", "update_file", "src/hello.txt", "@@\n hello\n-world\n+there\n"),
					patchCall("c4", "update_file", "src/hello.txt", " hello\n-planet\n+mars\n"),
					shellCall("c5", 0, 0, "cat src/hello.txt"),
				},
				[]map[string]any{
					patchCall("c6", "delete_file", "src/hello.txt", ""),
					shellCall("c7", 300, 0, "ls src", "sleep 30", "echo never"),
				},
				[]map[string]any{message("done")},
			)
			tools := toolsFor(t, e, Options{})
			c := api.client()
			params := responses.ResponseNewParams{Model: "gpt-5.1", Tools: tools.Params(),
				Input: responses.ResponseNewParamsInputUnion{OfString: oaiString("make a file")}}
			resp, err := tools.Run(ctx, &c.Responses, params, RunOptions{})
			require.NoError(t, err)
			require.Equal(t, "done", resp.OutputText())

			reqs := api.requests()
			require.Len(t, reqs, 4)
			// Turn 1: the tools are declared, the instructions name the workspace.
			tl, _ := json.Marshal(reqs[0]["tools"])
			require.JSONEq(t, `[{"type":"shell","environment":{"type":"local"}},{"type":"apply_patch"}]`, string(tl))
			require.Contains(t, reqs[0]["instructions"], e.ws)
			require.Nil(t, reqs[0]["previous_response_id"])

			// Turn 2 answers turn 1.
			require.Equal(t, "resp_1", reqs[1]["previous_response_id"])
			p := item(t, reqs[1], 0)
			require.Equal(t, "apply_patch_call_output", p["type"])
			require.Equal(t, "c1", p["call_id"])
			require.Equal(t, "completed", p["status"])
			s := shellOutputs(t, item(t, reqs[1], 1))
			require.Equal(t, "c2", item(t, reqs[1], 1)["call_id"])
			require.Len(t, s, 2)
			require.Equal(t, "hello\nworld\n", s[0]["stdout"])
			require.Equal(t, "exit 0", outcome(s[0]))
			require.Equal(t, "oops\n", s[1]["stderr"])
			require.Equal(t, "exit 3", outcome(s[1]))

			// Turn 3: the good patch applied, the bad one failed with a
			// message for the model and changed nothing.
			require.Equal(t, "resp_2", reqs[2]["previous_response_id"])
			require.Equal(t, "completed", item(t, reqs[2], 0)["status"])
			bad := item(t, reqs[2], 1)
			require.Equal(t, "c4", bad["call_id"])
			require.Equal(t, "failed", bad["status"])
			require.Contains(t, bad["output"], "not found")
			require.Contains(t, bad["output"], "planet")
			require.Contains(t, bad["output"], "unchanged")
			s = shellOutputs(t, item(t, reqs[2], 2))
			require.Equal(t, "hello\nthere\n", s[0]["stdout"])

			// Turn 4: deleted; the second command timed out and the third
			// did not run.
			require.Equal(t, "completed", item(t, reqs[3], 0)["status"])
			s = shellOutputs(t, item(t, reqs[3], 1))
			require.Len(t, s, 2)
			require.Equal(t, "exit 0", outcome(s[0]))
			require.Equal(t, "timeout", outcome(s[1]))
			require.False(t, e.exists(t, e.ws+"/src/hello.txt"))
		})
	}
}
