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
