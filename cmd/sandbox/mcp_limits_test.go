package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestMCPExecuteTimeoutCeiling checks that --execute-timeout is a ceiling:
// a larger timeout_seconds is lowered to it (the result says so), and a
// negative value or one no duration holds is InvalidArgument naming the
// argument, never a wrap to some other timeout.
func TestMCPExecuteTimeoutCeiling(t *testing.T) {
	const ceiling = time.Second
	srv, _ := newTestServer(t, memoryURL(t), mcpConfig{AllowExecute: true, ExecuteTimeout: ceiling})
	cs := connect(t, srv, nil)

	for _, sec := range []int{0, 60, 1 << 30, 9223372036} {
		start := time.Now()
		x := ok[executeOut](t, cs, "execute", map[string]any{"command": "sleep 4; echo late", "timeout_seconds": sec})
		el := time.Since(start)
		if !x.TimedOut || strings.Contains(x.Output, "late") || x.TimeoutSeconds != ceiling.Seconds() || x.TimeoutLowered != (sec != 0) {
			t.Errorf("timeout_seconds %d under a 1s ceiling: %+v", sec, x)
		}
		if el > 5*ceiling {
			t.Errorf("timeout_seconds %d under a 1s ceiling ran %v", sec, el)
		}
	}
	x := ok[executeOut](t, cs, "execute", map[string]any{"command": "echo quick", "timeout_seconds": 1})
	if x.TimedOut || x.Output != "quick\n" || x.TimeoutSeconds != 1 || x.TimeoutLowered {
		t.Errorf("timeout_seconds 1 = %+v", x)
	}
	for _, sec := range []any{-1, 9223372037, -0.5, 1e300} {
		wantToolError(t, cs, "execute", map[string]any{"command": "echo ran", "timeout_seconds": sec}, "InvalidArgument: timeout_seconds "+fmt.Sprint(sec))
	}
	for _, sec := range []int64{-9223372036854775808, 9223372036854775807} {
		wantToolError(t, cs, "execute", map[string]any{"command": "echo ran", "timeout_seconds": sec}, "InvalidArgument: timeout_seconds ")
	}
	for _, sec := range []int64{-1, 9223372037} {
		wantToolError(t, cs, "run_start", map[string]any{"id": "r", "command": "true", "budget_seconds": sec}, "InvalidArgument: budget_seconds "+fmt.Sprint(sec))
	}
	// The tool tells the model the limit.
	tools, err := cs.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range tools.Tools {
		if tool.Name == "execute" && !strings.Contains(tool.Description, "1 seconds") {
			t.Errorf("execute's description does not give the limit: %q", tool.Description)
		}
	}
}

// secretShards returns the substrings of secret of n bytes or more.
func secretShards(secret string, n int) []string {
	var out []string
	for i := 0; i+n <= len(secret); i++ {
		out = append(out, secret[i:i+n])
	}
	return out
}

// showsPart reports the first substring of 2 bytes or more of a secret
// that s holds ("" if none). The fillers the tests use share no 2 bytes
// with the secrets, nor does "[REDACTED]".
func showsPart(s string, secrets ...string) string {
	for _, sec := range secrets {
		for _, sh := range secretShards(sec, 2) {
			if strings.Contains(s, sh) {
				return sh
			}
		}
	}
	return ""
}

// TestMCPGrepCutKeepsSecrets checks that grep's cut of long lines never
// returns the start of a secret that straddles it, wherever it falls.
func TestMCPGrepCutKeepsSecrets(t *testing.T) {
	srv, _ := newTestServer(t, memoryURL(t), mcpConfig{Secrets: map[string]string{"K": testSecret}})
	cs := connect(t, srv, nil)
	var b strings.Builder
	for k := -2; k <= len(testSecret)+1; k++ {
		// The secret starts k characters before the cut.
		fmt.Fprintf(&b, "%s%s%s\n", strings.Repeat("a", 1000-k), testSecret, strings.Repeat("b", 50))
	}
	fmt.Fprintf(&b, "%s\n", testSecret)
	ok[writeOut](t, cs, "write_file", map[string]any{"path": "long.txt", "content": b.String()})
	for _, pattern := range []string{"aaaa", "5ecr"} {
		g := ok[grepOut](t, cs, "grep", map[string]any{"pattern": pattern})
		if len(g.Matches) == 0 {
			t.Fatalf("grep %q: no match", pattern)
		}
		for _, m := range g.Matches {
			if p := showsPart(m.Text, testSecret); p != "" {
				t.Errorf("grep %q, line %d: the text shows %q of the secret: ...%s", pattern, m.Line, p, m.Text[max(0, len(m.Text)-40):])
			}
		}
		res, _ := json.Marshal(g) // line numbers hold digits: 4 bytes or more
		if p := secretShards(testSecret, 4); containsAny(string(res), p) != "" {
			t.Errorf("grep %q: the result shows %q of the secret", pattern, containsAny(string(res), p))
		}
	}
}

func containsAny(s string, subs []string) string {
	for _, x := range subs {
		if strings.Contains(s, x) {
			return x
		}
	}
	return ""
}
