package sandboxgenkit_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"

	"github.com/firebase/genkit/go/ai"
	"github.com/firebase/genkit/go/genkit"

	"github.com/sandboxkit/sandbox"
	sandboxgenkit "github.com/sandboxkit/sandbox/contrib/genkit"
	_ "github.com/sandboxkit/sandbox/provider/memory" // registers memory://
	"github.com/sandboxkit/sandbox/session"
)

// A Genkit agent whose file and shell tools run in a sandbox, one sandbox
// per conversation. The model here is a scripted stand-in for a model
// plugin (googleai, anthropic, ...): it asks for write_file, then execute,
// then read_file of a path outside the workspace, and reports what it got.
func Example() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	g := genkit.Init(ctx)

	client, err := sandbox.Open(ctx, "memory://") // local://, e2b:// or daytona:// alike
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	mgr := session.NewManager(client, session.Options{})
	defer mgr.Close(ctx) // destroys the conversations' sandboxes

	tools, err := sandboxgenkit.New(mgr, sandboxgenkit.Options{AllowExecute: true})
	if err != nil {
		log.Fatal(err)
	}
	defer tools.Close()

	script := []*ai.ToolRequest{
		{Name: "write_file", Input: map[string]any{"path": "hello.py", "content": "print('hello from the sandbox')\n"}},
		{Name: "execute", Input: map[string]any{"command": "cat hello.py | wc -l"}},
		{Name: "read_file", Input: map[string]any{"path": "../../etc/passwd"}},
	}
	model := genkit.DefineModel(g, "example/scripted", &ai.ModelOptions{Supports: &ai.ModelSupports{Tools: true, Multiturn: true}},
		func(ctx context.Context, req *ai.ModelRequest, _ ai.ModelStreamCallback) (*ai.ModelResponse, error) {
			last := req.Messages[len(req.Messages)-1]
			turn := 0
			for _, m := range req.Messages {
				if m.Role == ai.RoleTool {
					turn++
				}
			}
			if turn > 0 {
				out, _ := json.Marshal(last.Content[0].ToolResponse.Output)
				fmt.Printf("%s -> %s\n", last.Content[0].ToolResponse.Name, out)
			}
			if turn == len(script) {
				return &ai.ModelResponse{Message: ai.NewModelTextMessage("done")}, nil
			}
			return &ai.ModelResponse{Message: &ai.Message{Role: ai.RoleModel,
				Content: []*ai.Part{ai.NewToolRequestPart(script[turn])}}}, nil
		})

	resp, err := genkit.Generate(sandboxgenkit.WithConversation(ctx, "conversation-1"), g,
		ai.WithModel(model), ai.WithUse(tools), ai.WithPrompt("write and run hello.py"))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(resp.Text())
	// Output:
	// write_file -> {"bytes":32,"path":"hello.py"}
	// execute -> {"exit_code":0,"output":"1\n","timeout_seconds":120}
	// read_file -> {"error":{"code":"invalid_path","message":"invalid path '../../etc/passwd': it climbs above the workspace root"}}
	// done
}
