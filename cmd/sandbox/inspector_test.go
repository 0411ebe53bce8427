package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// inspectorVersion is the MCP Inspector release the test runs: the newest
// whose package.json accepts Node 20 (0.16.0 and later ask for Node >= 22).
// .ci/run installs the same version into npx's cache; keep the two in step.
const inspectorVersion = "0.15.0"

// findInspector returns the Inspector's launcher as "npx -y
// @modelcontextprotocol/inspector@VERSION" installed it in npm's cache
// (.ci/run does), or skips the test saying what is missing. The test itself
// never reaches the registry.
func findInspector(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("node"); err != nil {
		t.Skip("the MCP Inspector test needs node (and npm to install the Inspector) on PATH")
	}
	cache := os.Getenv("npm_config_cache")
	if cache == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			t.Skipf("no npm cache: %v", err)
		}
		cache = filepath.Join(home, ".npm")
	}
	pkgs, _ := filepath.Glob(filepath.Join(cache, "_npx", "*", "node_modules", "@modelcontextprotocol", "inspector", "package.json"))
	for _, p := range pkgs {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		var pkg struct{ Version string }
		if json.Unmarshal(b, &pkg) != nil || pkg.Version != inspectorVersion {
			continue
		}
		bin := filepath.Join(filepath.Dir(p), "..", "..", ".bin", "mcp-inspector")
		if _, err := os.Stat(bin); err == nil {
			return bin
		}
	}
	t.Skipf("@modelcontextprotocol/inspector@%s is not in npx's cache under %s; install it as .ci/run does: npx -y @modelcontextprotocol/inspector@%s --cli --help",
		inspectorVersion, cache, inspectorVersion)
	return ""
}

// inspector runs one Inspector CLI call against the built binary serving
// MCP over stdio and returns its JSON output. Each call is a new server
// process and MCP session; the server runs with --reuse-label so that the
// calls share one sandbox.
func inspector(t *testing.T, insp, bin, url string, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	full := append([]string{"--cli", "-e", "SANDBOX_URL=" + url, bin, "mcp", "--reuse-label", "inspector-test"}, args...)
	cmd := exec.CommandContext(ctx, insp, full...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil && !json.Valid(out) {
		t.Fatalf("inspector %v: %v\nstdout %s\nstderr %s", args, err, out, stderr.String())
	}
	return out
}

// TestMCPInspectorCLI drives the server with a client nobody here wrote:
// the official MCP Inspector in CLI mode lists the tools, then calls
// write_file and read_file, and a jail escape comes back as an error result.
func TestMCPInspectorCLI(t *testing.T) {
	t.Parallel()
	npx := findInspector(t)
	url := localURL(t)
	bin := builtBinary(t)

	var list struct {
		Tools []struct {
			Name        string          `json:"name"`
			InputSchema json.RawMessage `json:"inputSchema"`
		} `json:"tools"`
	}
	out := inspector(t, npx, bin, url, "--method", "tools/list")
	if err := json.Unmarshal(out, &list); err != nil {
		t.Fatalf("tools/list: %v in %s", err, out)
	}
	var names []string
	for _, tool := range list.Tools {
		names = append(names, tool.Name)
	}
	if strings.Join(names, ",") != strings.Join(fileTools, ",") {
		t.Errorf("Inspector lists %v, want %v", names, fileTools)
	}

	type result struct {
		Content []struct {
			Type, Text string
		} `json:"content"`
		StructuredContent json.RawMessage `json:"structuredContent"`
		IsError           bool            `json:"isError"`
	}
	var w, r, esc result
	out = inspector(t, npx, bin, url, "--method", "tools/call", "--tool-name", "write_file",
		"--tool-arg", "path=notes/hello.txt", "--tool-arg", "content=written by the inspector")
	if err := json.Unmarshal(out, &w); err != nil || w.IsError {
		t.Fatalf("write_file: %v %s", err, out)
	}
	out = inspector(t, npx, bin, url, "--method", "tools/call", "--tool-name", "read_file", "--tool-arg", "path=notes/hello.txt")
	if err := json.Unmarshal(out, &r); err != nil || r.IsError || !strings.Contains(string(r.StructuredContent), "written by the inspector") {
		t.Errorf("read_file after write_file in another session: %v %s", err, out)
	}
	out = inspector(t, npx, bin, url, "--method", "tools/call", "--tool-name", "read_file", "--tool-arg", "path=../../etc/passwd")
	if err := json.Unmarshal(out, &esc); err != nil || !esc.IsError || len(esc.Content) == 0 || !strings.Contains(esc.Content[0].Text, "invalid_path") {
		t.Errorf("read_file ../../etc/passwd: %v %s, want an isError result", err, out)
	}
}
