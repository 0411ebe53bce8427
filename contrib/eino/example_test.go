package eino_test

import (
	"context"
	"fmt"

	"github.com/cloudwego/eino/adk"
	"github.com/cloudwego/eino/components/model"
	"github.com/cloudwego/eino/schema"

	"github.com/sandboxkit/sandbox"
	eino "github.com/sandboxkit/sandbox/contrib/eino"
	"github.com/sandboxkit/sandbox/provider/memory"
	"github.com/sandboxkit/sandbox/session"
)

// replayModel stands in for a real chat model: it prints the result of each
// tool call it made, then makes the next call of its list, and answers
// "done" at the end.
type replayModel struct{ calls []schema.ToolCall }

func (m *replayModel) WithTools([]*schema.ToolInfo) (model.ToolCallingChatModel, error) {
	return m, nil
}

func (m *replayModel) Generate(_ context.Context, in []*schema.Message, _ ...model.Option) (*schema.Message, error) {
	if last := in[len(in)-1]; last.Role == schema.Tool {
		fmt.Printf("%s -> %s\n", last.ToolName, last.Content)
	}
	if len(m.calls) == 0 {
		return schema.AssistantMessage("done", nil), nil
	}
	c := m.calls[0]
	m.calls = m.calls[1:]
	return schema.AssistantMessage("", []schema.ToolCall{c}), nil
}

func (m *replayModel) Stream(ctx context.Context, in []*schema.Message, opts ...model.Option) (*schema.StreamReader[*schema.Message], error) {
	msg, err := m.Generate(ctx, in, opts...)
	if err != nil {
		return nil, err
	}
	return schema.StreamReaderFromArray([]*schema.Message{msg}), nil
}

func toolCall(id, name, args string) schema.ToolCall {
	return schema.ToolCall{ID: id, Type: "function", Function: schema.FunctionCall{Name: name, Arguments: args}}
}

// An eino agent whose file and shell tools run in a sandbox: one sandbox
// per conversation (the adk session value eino.SessionKey), the tools
// jailed to its workspace, and every failure handed back to the model.
func Example() {
	ctx := context.Background()
	client := sandbox.NewClient(memory.New()) // any provider: sandbox.Open(ctx, "") for local
	defer client.Close()
	mgr := session.NewManager(client, session.Options{})
	defer mgr.Close(ctx)

	b, err := eino.New(mgr, eino.Options{AllowExecute: true})
	if err != nil {
		panic(err)
	}
	defer b.Close()
	mw, err := eino.NewMiddleware(ctx, b, nil)
	if err != nil {
		panic(err)
	}

	m := &replayModel{calls: []schema.ToolCall{
		toolCall("1", "write_file", `{"file_path":"hello.py","content":"print('hello from the sandbox')\n"}`),
		toolCall("2", "execute", `{"command":"printf 'lines: %s' $(wc -l < hello.py)"}`),
		toolCall("3", "read_file", `{"file_path":"../../etc/passwd"}`),
		toolCall("4", "ls", `{}`),
	}}
	agent, err := adk.NewChatModelAgent(ctx, &adk.ChatModelAgentConfig{
		Name: "coder", Description: "writes and runs code", Model: m,
		Handlers: []adk.ChatModelAgentMiddleware{mw},
	})
	if err != nil {
		panic(err)
	}
	runner := adk.NewRunner(ctx, adk.RunnerConfig{Agent: agent})
	it := runner.Query(ctx, "say hello", adk.WithSessionValues(map[string]any{eino.SessionKey: "conversation-42"}))
	for ev, ok := it.Next(); ok; ev, ok = it.Next() {
		if ev.Err != nil {
			fmt.Println("run failed:", ev.Err)
		}
	}
	// Output:
	// write_file -> Updated file hello.py
	// execute -> lines: 1
	// read_file -> Error: invalid path '../../etc/passwd': it climbs above the workspace root
	// ls -> hello.py
}
