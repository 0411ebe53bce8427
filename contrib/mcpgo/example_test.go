package mcpgo_test

import (
	"context"
	"fmt"
	"log"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
)

// An mcp-go client drives the sandbox's MCP server over stdio: it spawns
// `sandbox mcp` (here on the memory provider; local:// is the default),
// writes a file in the session's sandbox, runs a command on it, and gets a
// path outside the workspace back as a tool error result.
func Example() {
	ctx := context.Background()
	c, err := client.NewStdioMCPClient(bin, nil, "--url", "memory://", "mcp", "--allow-execute")
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	init := mcp.InitializeRequest{}
	init.Params.ClientInfo = mcp.Implementation{Name: "example", Version: "1.0.0"}
	// The go-sdk server speaks the protocol up to 2025-11-25: mcp-go's
	// LATEST_PROTOCOL_VERSION (2026-07-28) finds no common version.
	init.Params.ProtocolVersion = mcp.LATEST_LEGACY_PROTOCOL_VERSION
	if _, err := c.Initialize(ctx, init); err != nil {
		log.Fatal(err)
	}
	call := func(name string, args map[string]any) {
		req := mcp.CallToolRequest{}
		req.Params.Name, req.Params.Arguments = name, args
		res, err := c.CallTool(ctx, req)
		if err != nil {
			log.Fatal(err) // a protocol failure, not a tool's
		}
		fmt.Printf("%s error=%v %s\n", name, res.IsError, mcp.GetTextFromContent(res.Content[0]))
	}
	call("write_file", map[string]any{"path": "hello.txt", "content": "hello\n"})
	call("execute", map[string]any{"command": "wc -c < hello.txt"})
	call("read_file", map[string]any{"path": "../../etc/passwd"})
	// Output:
	// write_file error=false {"bytes":6,"path":"hello.txt"}
	// execute error=false {"exit_code":0,"output":"6\n","timeout_seconds":120}
	// read_file error=true invalid_path: invalid path '../../etc/passwd': it climbs above the workspace root
}
