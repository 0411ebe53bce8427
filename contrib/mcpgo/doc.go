// Package mcpgo documents, and its tests prove, the MCP route into the
// sandbox for Go agent frameworks that consume MCP servers: the server of
// `sandbox mcp` (cmd/sandbox, built on modelcontextprotocol/go-sdk) driven
// by a github.com/mark3labs/mcp-go client over stdio and over streamable
// HTTP. It has no code of its own: frameworks connect to the server as
// they connect to any MCP server (see README.md).
package mcpgo
