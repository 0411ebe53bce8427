package openai

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/responses"
	"github.com/stretchr/testify/require"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/provider/memory"
	"github.com/sandboxkit/sandbox/session"
)

// outputItems decodes output items as the SDK does from a response body.
func outputItems(t *testing.T, items ...map[string]any) []responses.ResponseOutputItemUnion {
	t.Helper()
	b, err := json.Marshal(items)
	require.NoError(t, err)
	var out []responses.ResponseOutputItemUnion
	require.NoError(t, json.Unmarshal(b, &out))
	return out
}

func marshal(t *testing.T, v any) map[string]any {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(b, &m))
	return m
}

func TestStepAnswersOnlyClientCalls(t *testing.T) {
	t.Parallel()
	e := envs(t)["memory"]
	tools := toolsFor(t, e, Options{})
	ctx := context.Background()

	container := shellCall("hosted", 0, 0, "echo hosted")
	container["environment"] = map[string]any{"type": "container_reference", "container_id": "cntr_1"}
	done := shellCall("done", 0, 0, "echo done")
	program := shellCall("prog", 0, 0, "echo from program")
	program["caller"] = map[string]any{"type": "program", "caller_id": "pg_7"}
	noEnv := shellCall("noenv", 0, 0, "echo plain")
	delete(noEnv, "environment")
	items, err := tools.Step(ctx, outputItems(t,
		message("thinking"),
		container,
		done,
		map[string]any{"type": "shell_call_output", "id": "sho_1", "call_id": "done", "status": "completed", "output": []any{}},
		program,
		noEnv,
		map[string]any{"type": "function_call", "id": "fc_1", "call_id": "fn", "name": "other", "arguments": "{}", "status": "completed"},
	))
	require.NoError(t, err)
	require.Len(t, items, 2, "only the calls the client must run are answered")
	first := marshal(t, items[0])
	require.Equal(t, "prog", first["call_id"])
	require.Equal(t, map[string]any{"type": "program", "caller_id": "pg_7"}, first["caller"])
	require.Equal(t, "noenv", marshal(t, items[1])["call_id"])

	items, err = tools.Step(ctx, outputItems(t, message("all done")))
	require.NoError(t, err)
	require.Empty(t, items)
}

func TestStepLocalShell(t *testing.T) {
	t.Parallel()
	for name, e := range envs(t) {
		t.Run(name, func(t *testing.T) {
			tools := toolsFor(t, e, Options{})
			items, err := tools.Step(context.Background(), outputItems(t, map[string]any{
				"type": "local_shell_call", "id": "lsh_1", "call_id": "call_ls", "status": "completed",
				"action": map[string]any{"type": "exec", "command": []string{"sh", "-c", "mkdir -p sub && cd sub && pwd && echo \"$GREETING\" && exit 4"},
					"env": map[string]string{"GREETING": "hi"}, "timeout_ms": 5000, "user": nil, "working_directory": nil},
			}))
			require.NoError(t, err)
			require.Len(t, items, 1)
			m := marshal(t, items[0])
			require.Equal(t, "local_shell_call_output", m["type"])
			require.Equal(t, "call_ls", m["id"])
			var out struct {
				Output   string         `json:"output"`
				Metadata map[string]any `json:"metadata"`
			}
			require.NoError(t, json.Unmarshal([]byte(m["output"].(string)), &out))
			require.Equal(t, e.ws+"/sub\nhi\n", out.Output)
			require.Equal(t, 4.0, out.Metadata["exit_code"])
		})
	}
}

func TestRunStatelessCarriesTranscript(t *testing.T) {
	t.Parallel()
	e := envs(t)["memory"]
	tools := toolsFor(t, e, Options{})
	api := newFakeAPI(t,
		[]map[string]any{shellCall("c1", 0, 0, "echo one")},
		[]map[string]any{message("ok")},
	)
	c := api.client()
	params := responses.ResponseNewParams{Model: "gpt-5.1", Tools: tools.Params(), Store: param.NewOpt(false),
		Instructions: param.NewOpt("Be brief."),
		Input:        responses.ResponseNewParamsInputUnion{OfString: param.NewOpt("run it")}}
	resp, err := tools.Run(context.Background(), &c.Responses, params, RunOptions{})
	require.NoError(t, err)
	require.Equal(t, "ok", resp.OutputText())
	reqs := api.requests()
	require.Len(t, reqs, 2)
	require.Nil(t, reqs[1]["previous_response_id"])
	require.Equal(t, false, reqs[1]["store"])
	require.Contains(t, reqs[1]["instructions"], "Be brief.\n\nYou work in a sandbox.")
	require.Equal(t, "user", item(t, reqs[1], 0)["role"])
	require.Equal(t, "shell_call", item(t, reqs[1], 1)["type"])
	require.Equal(t, "c1", item(t, reqs[1], 1)["call_id"])
	out := shellOutputs(t, item(t, reqs[1], 2))
	require.Equal(t, "one\n", out[0]["stdout"])
}

func TestRunConversationAndLimits(t *testing.T) {
	t.Parallel()
	e := envs(t)["memory"]
	tools := toolsFor(t, e, Options{})
	ctx := context.Background()

	api := newFakeAPI(t,
		[]map[string]any{shellCall("c1", 0, 0, "true")},
		[]map[string]any{message("ok")},
	)
	c := api.client()
	params := responses.ResponseNewParams{Model: "gpt-5.1", Tools: tools.Params(),
		Conversation: responses.ResponseNewParamsConversationUnion{OfString: param.NewOpt("conv_1")},
		Input:        responses.ResponseNewParamsInputUnion{OfString: param.NewOpt("go")}}
	_, err := tools.Run(ctx, &c.Responses, params, RunOptions{NoInstructions: true})
	require.NoError(t, err)
	reqs := api.requests()
	require.Equal(t, "conv_1", reqs[1]["conversation"])
	require.Nil(t, reqs[1]["previous_response_id"])
	require.Nil(t, reqs[0]["instructions"])
	require.Len(t, reqs[1]["input"], 1)

	// A model that keeps calling tools is stopped at MaxTurns.
	api = newFakeAPI(t,
		[]map[string]any{shellCall("a", 0, 0, "true")},
		[]map[string]any{shellCall("b", 0, 0, "true")},
		[]map[string]any{shellCall("c", 0, 0, "true")},
	)
	c = api.client()
	params = responses.ResponseNewParams{Model: "gpt-5.1", Tools: tools.Params(), Input: responses.ResponseNewParamsInputUnion{OfString: param.NewOpt("go")}}
	resp, err := tools.Run(ctx, &c.Responses, params, RunOptions{MaxTurns: 2})
	require.ErrorIs(t, err, ErrMaxTurns)
	require.Equal(t, "resp_2", resp.ID)

	// An API error ends the run, wrapped, with the last response.
	api = newFakeAPI(t, []map[string]any{shellCall("a", 0, 0, "true")})
	c = api.client()
	resp, err = tools.Run(ctx, &c.Responses, params, RunOptions{})
	var apiErr *oai.Error
	require.True(t, errors.As(err, &apiErr), "%v", err)
	require.Equal(t, 400, apiErr.StatusCode)
	require.Equal(t, "resp_1", resp.ID)
	require.NotContains(t, err.Error(), testKey)
}

func TestConversationsOneSandboxPerKey(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rt := memory.New()
	m := session.NewManager(sandbox.NewClient(rt), session.Options{ReapInterval: -1})
	defer m.Close(ctx)
	convs := NewConversations(m, Options{})
	defer convs.Close()

	a1, err := convs.Tools(ctx, "alice")
	require.NoError(t, err)
	a2, err := convs.Tools(ctx, "alice")
	require.NoError(t, err)
	require.Same(t, a1, a2)
	b, err := convs.Tools(ctx, "bob")
	require.NoError(t, err)
	require.NotEqual(t, a1.Sandbox().ID(), b.Sandbox().ID())
	require.Equal(t, 2, rt.Live())

	st, msg := applied(t, a1, patch("c", "create_file", "note.txt", "+alice's\n"))
	require.Equal(t, "completed", st, msg)
	out, err := a2.Shell(ctx, shell("c", 0, 0, "cat note.txt"))
	require.NoError(t, err)
	require.Equal(t, "alice's\n", out.Output[0].Stdout)
	out, err = b.Shell(ctx, shell("c", 0, 0, "cat note.txt"))
	require.NoError(t, err)
	require.Equal(t, "exit 1", outcomeOf(out.Output[0]))

	_, err = convs.Tools(ctx, "")
	require.ErrorIs(t, err, sandbox.ErrInvalidArgument)
}

func outcomeOf(o responses.ResponseFunctionShellCallOutputContentParam) string {
	if o.Outcome.OfTimeout != nil {
		return "timeout"
	}
	b, _ := json.Marshal(o.Outcome.OfExit.ExitCode)
	return "exit " + string(b)
}
