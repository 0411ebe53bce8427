package main

import (
	"fmt"
	"strings"
	"testing"
)

// TestMCPBadInput: what a model may send to the file tools out of range
// gets a useful answer, not a silent empty one: read_file with offset
// 1500 and a limit near 2^63 returns the lines from 1501 to the end (it
// returned "" with no error), a grep pattern of 1 MiB is an isError
// result naming the pattern (it was "Internal: helper exited 127"), and a
// matching line holding a terminal escape is returned escaped (it was
// dropped).
func TestMCPBadInput(t *testing.T) {
	t.Parallel()
	srv, _ := newTestServer(t, memoryURL(t), mcpConfig{})
	cs := connect(t, srv, nil)
	var b strings.Builder
	for i := 1; i <= 2000; i++ {
		fmt.Fprintf(&b, "line %d\n", i)
	}
	ok[writeOut](t, cs, "write_file", map[string]any{"path": "long.txt", "content": b.String()})
	r := ok[readOut](t, cs, "read_file", map[string]any{"path": "long.txt", "offset": 1500, "limit": int64(1<<63 - 1024)}) // exact as a float64: 1500 more overflows an int64
	if r.TotalLines != 2000 || !strings.HasPrefix(r.Content, "  1501\tline 1501\n") || !strings.HasSuffix(r.Content, "  2000\tline 2000") {
		t.Errorf("read_file offset 1500 limit 2^63-1024 = %d lines, content %.80q...", r.TotalLines, r.Content)
	}
	wantToolError(t, cs, "grep", map[string]any{"pattern": strings.Repeat("x", 1<<20)}, "pattern")
	ok[writeOut](t, cs, "write_file", map[string]any{"path": "log.txt", "content": "\x1b[31mERROR\x1b[0m\n"})
	g := ok[grepOut](t, cs, "grep", map[string]any{"pattern": "ERROR"})
	if len(g.Matches) != 1 || g.Matches[0].Text != `\x1b[31mERROR\x1b[0m` {
		t.Errorf("grep of a line with ESC = %+v", g)
	}
}

// TestMCPToolErrorBounded checks that a tool error stays a few KiB when
// the input it complains about is large: a 200 KB string as
// timeout_seconds, or as a run id, was quoted whole by the go-sdk's
// input checks; the error still names the argument.
func TestMCPToolErrorBounded(t *testing.T) {
	t.Parallel()
	srv, _ := newTestServer(t, memoryURL(t), mcpConfig{AllowExecute: true})
	cs := connect(t, srv, nil)
	big := strings.Repeat("9", 200<<10)
	for _, c := range []struct {
		tool string
		args map[string]any
		want string
	}{
		{"execute", map[string]any{"command": "true", "timeout_seconds": big}, "timeout_seconds"},
		{"run_logs", map[string]any{"id": "r", "offset": big}, "offset"},
		{"read_file", map[string]any{"path": "a", "limit": []any{big}}, "limit"},
	} {
		res := call(t, cs, c.tool, c.args)
		msg := text(res)
		if !res.IsError || len(msg) > maxToolError+100 || !strings.Contains(msg, c.want) {
			t.Errorf("%s with a 200 KB %s: isError=%v, %d bytes, %.200q", c.tool, c.want, res.IsError, len(msg), msg)
		}
	}
}
