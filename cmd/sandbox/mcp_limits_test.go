package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/sandboxkit/sandbox"
)

// TestMCPExecuteTimeoutCeiling checks that --execute-timeout is a ceiling:
// a larger timeout_seconds is lowered to it (the result says so), and a
// negative value or one no duration holds is InvalidArgument naming the
// argument, never a wrap to some other timeout.
func TestMCPExecuteTimeoutCeiling(t *testing.T) {
	t.Parallel()
	const ceiling = time.Second
	srv, _ := newTestServer(t, memoryURL(t), mcpConfig{AllowExecute: true, ExecuteTimeout: ceiling})
	cs := connect(t, srv, nil)

	// A call first, so that the sandbox the tools run in exists before a
	// call is timed: the bound below is the ceiling's, not the create's
	// (on a loaded host the first call, its sandbox made on the way, took
	// 9 s).
	x := ok[executeOut](t, cs, "execute", map[string]any{"command": "echo quick", "timeout_seconds": 1})
	if x.TimedOut || x.Output != "quick\n" || x.TimeoutSeconds != 1 || x.TimeoutLowered {
		t.Errorf("timeout_seconds 1 = %+v", x)
	}
	for _, sec := range []float64{0, 1.5, 60, 1 << 30, 9223372035.5, 9223372036} {
		start := time.Now()
		x := ok[executeOut](t, cs, "execute", map[string]any{"command": "sleep 4; echo late", "timeout_seconds": sec})
		el := time.Since(start)
		if !x.TimedOut || strings.Contains(x.Output, "late") || x.TimeoutSeconds != ceiling.Seconds() || x.TimeoutLowered != (sec != 0) {
			t.Errorf("timeout_seconds %v under a 1s ceiling: %+v", sec, x)
		}
		if el > 5*ceiling {
			t.Errorf("timeout_seconds %v under a 1s ceiling ran %v", sec, el)
		}
	}
	x = ok[executeOut](t, cs, "execute", map[string]any{"command": "sleep 4", "timeout_seconds": 0.25})
	if !x.TimedOut || x.TimeoutSeconds != 0.25 || x.TimeoutLowered {
		t.Errorf("timeout_seconds 0.25 = %+v", x)
	}
	for _, sec := range []any{-1, 9223372037, -0.5, 1e300} {
		wantToolError(t, cs, "execute", map[string]any{"command": "echo ran", "timeout_seconds": sec}, "InvalidArgument: timeout_seconds "+fmt.Sprint(sec))
	}
	for _, sec := range []int64{-9223372036854775808, 9223372036854775807} {
		wantToolError(t, cs, "execute", map[string]any{"command": "echo ran", "timeout_seconds": sec}, "InvalidArgument: timeout_seconds ")
	}
	for _, sec := range []int64{-1} {
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
// returns the start of a secret that straddles it, wherever it falls: a
// secret set for commands, and a brokered secret's value (in no
// environment, but a file may hold it: an upstream that echoes headers).
func TestMCPGrepCutKeepsSecrets(t *testing.T) {
	t.Parallel()
	for name, cfg := range map[string]mcpConfig{
		"secret": {Secrets: map[string]string{"K": testSecret}},
		"brokered": {
			Network:  &sandbox.NetworkPolicy{Allow: []string{"api.example.com"}},
			Brokered: []sandbox.BrokeredSecret{{Env: "API_KEY", Value: testSecret, Hosts: []string{"api.example.com"}}},
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			testGrepCutKeepsSecret(t, cfg)
		})
	}
}

func testGrepCutKeepsSecret(t *testing.T, cfg mcpConfig) {
	srv, _ := newTestServer(t, memoryURL(t), cfg)
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

// waitRun polls run_status until the run exited.
func waitRun(t *testing.T, cs *mcp.ClientSession, id string) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for st := ok[runStatusOut](t, cs, "run_status", map[string]any{"id": id}); st.State != "exited"; st = ok[runStatusOut](t, cs, "run_status", map[string]any{"id": id}) {
		if time.Now().After(deadline) {
			t.Fatalf("run %s: %+v after 2 minutes", id, st)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// readAllLogs reads a run's output from offset 0 in pages of max_bytes m.
func readAllLogs(t *testing.T, cs *mcp.ClientSession, id string, m int) []string {
	t.Helper()
	var pages []string
	var off int64
	for i := 0; ; i++ {
		lg := ok[runLogsOut](t, cs, "run_logs", map[string]any{"id": id, "offset": off, "max_bytes": m})
		pages = append(pages, lg.Output)
		if lg.Done {
			return pages
		}
		if lg.Next <= off || i > 1000 {
			t.Fatalf("run_logs max_bytes %d from %d: next %d, no progress", m, off, lg.Next)
		}
		off = lg.Next
	}
}

// TestMCPRunLogsRedactedAcrossPages checks, on a real run, that no page of run_logs, read
// in order with any page size or from any offset, shows any part of a
// secret, that pages read in order add up to the whole output redacted,
// and that while a run goes on, the beginning of a secret it is still
// writing (a multi-line one here) is withheld.
func TestMCPRunLogsRedactedAcrossPages(t *testing.T) {
	t.Parallel()
	const pem = "-----BEGIN KEY-----\nzzqq77pp99\n-----END KEY-----"
	url := localURL(t)
	srv, _ := newTestServer(t, url, mcpConfig{AllowExecute: true, Secrets: map[string]string{"K": testSecret, "PEM": pem}})
	cs := connect(t, srv, nil)

	ok[runStatusOut](t, cs, "run_start", map[string]any{"id": "r1", "command": `printf '....%s....\n..%s%s\n.\n%s' "$K" "$K" "$K" "$K"`})
	waitRun(t, cs, "r1")
	raw := "...." + testSecret + "....\n.." + testSecret + testSecret + "\n.\n" + testSecret
	whole := strings.ReplaceAll(raw, testSecret+testSecret, "[REDACTED]")
	whole = strings.ReplaceAll(whole, testSecret, "[REDACTED]")
	for _, m := range []int{7, 19} { // every size and offset: TestRedactedLogsPaging
		pages := readAllLogs(t, cs, "r1", m)
		for _, p := range pages {
			if sh := showsPart(p, testSecret); sh != "" {
				t.Errorf("max_bytes %d: page %q shows %q of the secret", m, p, sh)
			}
		}
		if got := strings.Join(pages, ""); got != whole {
			t.Errorf("max_bytes %d: pages add up to %q, want %q", m, got, whole)
		}
	}
	for off := 3; off < 3+len(testSecret); off += 5 {
		for _, m := range []int{6} {
			lg := ok[runLogsOut](t, cs, "run_logs", map[string]any{"id": "r1", "offset": off, "max_bytes": m})
			if sh := showsPart(lg.Output, testSecret); sh != "" {
				t.Errorf("offset %d max_bytes %d: %q shows %q of the secret", off, m, lg.Output, sh)
			}
		}
	}

	// A multi-line secret written in two steps: its first lines are
	// withheld until the run shows whether the rest follows.
	ok[runStatusOut](t, cs, "run_start", map[string]any{"id": "r2", "command": `printf '%s\n' "$PEM" | head -n 2; sleep 3; printf '%s\n' "$PEM" | tail -n 1`})
	var pages []string
	var off int64
	for end := time.Now().Add(2 * time.Second); time.Now().Before(end); time.Sleep(250 * time.Millisecond) {
		lg := ok[runLogsOut](t, cs, "run_logs", map[string]any{"id": "r2", "offset": off})
		if sh := showsPart(lg.Output, pem); sh != "" {
			t.Errorf("while the run writes the secret: %q shows %q of it", lg.Output, sh)
		}
		pages, off = append(pages, lg.Output), lg.Next
	}
	waitRun(t, cs, "r2")
	for {
		lg := ok[runLogsOut](t, cs, "run_logs", map[string]any{"id": "r2", "offset": off})
		pages, off = append(pages, lg.Output), lg.Next
		if lg.Done {
			break
		}
	}
	if got := strings.Join(pages, ""); got != "[REDACTED]\n" {
		t.Errorf("the multi-line secret's run output reads %q, want %q", got, "[REDACTED]\n")
	}
}

// TestMCPRunBudgetCeiling checks that --run-budget is a ceiling the model
// cannot raise: a larger budget_seconds, up to the largest integer, is
// lowered to it (the result says so) and the run ends within it, never an
// overflowed lifetime or an error from deeper down; a number no integer
// holds is an error naming budget_seconds.
func TestMCPRunBudgetCeiling(t *testing.T) {
	t.Parallel()
	const ceiling = 2 * time.Second
	srv, _ := newTestServer(t, localURL(t), mcpConfig{AllowExecute: true, RunBudget: ceiling})
	cs := connect(t, srv, nil)
	for i, sec := range []int64{3, 2147483648, 9223372035} {
		id := fmt.Sprint("b", i)
		st := ok[runStatusOut](t, cs, "run_start", map[string]any{"id": id, "command": "sleep 60", "budget_seconds": sec})
		if st.BudgetSeconds != 2 || !st.BudgetLowered {
			t.Errorf("budget_seconds %d under a 2s ceiling: %+v, want budget_seconds 2, lowered", sec, st)
		}
		deadline := time.Now().Add(5 * (ceiling + 2*time.Second))
		for st.State != "exited" && st.State != "lost" {
			if time.Now().After(deadline) {
				t.Fatalf("budget_seconds %d under a 2s ceiling: the run still %s after %v", sec, st.State, 5*(ceiling+2*time.Second))
			}
			time.Sleep(100 * time.Millisecond)
			st = ok[runStatusOut](t, cs, "run_status", map[string]any{"id": id})
		}
		if !st.BudgetExceeded {
			t.Errorf("budget_seconds %d: the run ended without its budget: %+v", sec, st)
		}
	}
	st := ok[runStatusOut](t, cs, "run_start", map[string]any{"id": "small", "command": "true", "budget_seconds": 1})
	if st.BudgetSeconds != 1 || st.BudgetLowered {
		t.Errorf("budget_seconds 1 under a 2s ceiling: %+v", st)
	}
	st = ok[runStatusOut](t, cs, "run_start", map[string]any{"id": "default", "command": "true"})
	if st.BudgetSeconds != 2 || st.BudgetLowered {
		t.Errorf("no budget_seconds under a 2s ceiling: %+v, want the ceiling, not lowered", st)
	}
	for _, sec := range []any{1e300, 9223372036854775808.0} {
		wantToolError(t, cs, "run_start", map[string]any{"id": "big", "command": "true", "budget_seconds": sec}, "budget_seconds")
	}
	tools, err := cs.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range tools.Tools {
		if tool.Name == "run_start" && !strings.Contains(tool.Description, "at most 2 seconds") {
			t.Errorf("run_start's description does not give the limit: %q", tool.Description)
		}
	}
}
