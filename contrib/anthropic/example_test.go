package anthropic_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/sandboxkit/sandbox"
	sbanthropic "github.com/sandboxkit/sandbox/contrib/anthropic"
	_ "github.com/sandboxkit/sandbox/provider/memory" // registers memory://
)

// Claude's bash and text editor, run by the SDK's tool runner, working in a
// sandbox instead of on the host. The Messages API here is a scripted
// stand-in on loopback that asks for three tool calls, one per turn, and
// prints each tool_result it is sent back.
func Example() {
	ctx := context.Background()
	client, err := sandbox.Open(ctx, "memory://") // local://, e2b:// or daytona:// alike
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	sb, err := client.Create(ctx, sandbox.CreateOptions{})
	if err != nil {
		log.Fatal(err)
	}
	defer sb.Destroy(ctx)

	tools, err := sbanthropic.New(sb, sbanthropic.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer tools.Close()

	api := httptest.NewServer(scriptedModel(
		map[string]any{"type": "tool_use", "id": "t1", "name": "str_replace_based_edit_tool",
			"input": map[string]any{"command": "create", "path": "hello.py", "file_text": "print('hello')\n"}},
		map[string]any{"type": "tool_use", "id": "t2", "name": "bash",
			"input": map[string]any{"command": "cat hello.py | wc -l"}},
		map[string]any{"type": "tool_use", "id": "t3", "name": "str_replace_based_edit_tool",
			"input": map[string]any{"command": "view", "path": "../../etc/passwd"}},
	))
	defer api.Close()

	transport := &http.Transport{}
	defer transport.CloseIdleConnections()
	claude := sdk.NewClient(option.WithBaseURL(api.URL), option.WithAPIKey("sk-ant-example"),
		option.WithHTTPClient(&http.Client{Transport: transport}))
	runner := claude.Beta.Messages.NewToolRunner(tools.ClientTools(), sdk.BetaToolRunnerParams{
		BetaMessageNewParams: sdk.BetaMessageNewParams{
			Model: sdk.ModelClaudeSonnet5_5, MaxTokens: 1024,
			Tools:    tools.ToolParams(), // bash_20250124 and text_editor_20250728
			Messages: []sdk.BetaMessageParam{sdk.NewBetaUserMessage(sdk.NewBetaTextBlock("Write hello.py"))},
		},
	})
	final, err := runner.RunToCompletion(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("stop:", final.StopReason)
	// Output:
	// t1 is_error=false: File created successfully at: hello.py
	// t2 is_error=false: 1
	// t3 is_error=true: Error: invalid path '../../etc/passwd': it climbs above the workspace root
	// stop: end_turn
}

// scriptedModel answers each Messages request with the next tool_use turn,
// then with a final text turn, and prints the tool_result blocks it gets.
func scriptedModel(turns ...map[string]any) http.Handler {
	var mu sync.Mutex
	n := 0
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		var req struct {
			Messages []struct {
				Content json.RawMessage `json:"content"`
			} `json:"messages"`
		}
		_ = json.NewDecoder(r.Body).Decode(&req)
		var blocks []struct {
			Type      string          `json:"type"`
			ToolUseID string          `json:"tool_use_id"`
			IsError   bool            `json:"is_error"`
			Content   json.RawMessage `json:"content"`
		}
		if len(req.Messages) > 0 {
			_ = json.Unmarshal(req.Messages[len(req.Messages)-1].Content, &blocks)
		}
		for _, b := range blocks {
			if b.Type == "tool_result" {
				fmt.Printf("%s is_error=%v: %s\n", b.ToolUseID, b.IsError, strings.TrimSpace(resultText(b.Content)))
			}
		}
		content, stop := []any{map[string]any{"type": "text", "text": "Done."}}, "end_turn"
		if n < len(turns) {
			content, stop = []any{turns[n]}, "tool_use"
		}
		n++
		w.Header().Set("content-type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{
			"id": fmt.Sprintf("msg_%d", n), "type": "message", "role": "assistant", "model": "claude-sonnet-5-5",
			"content": content, "stop_reason": stop, "usage": map[string]any{"input_tokens": 1, "output_tokens": 1},
		})
	})
}
