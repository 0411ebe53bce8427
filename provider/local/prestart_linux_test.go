package local

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/sandboxkit/sandbox"
)

// TestAgentStartedAhead: from a runtime's second sandbox of a kind on, the
// next one's agent (and, for the isolated network, its pasta) starts ahead
// of the Create. Such an agent must give its sandbox what one started for
// it gives: the processes in the sandbox's cgroups, the network the
// sandbox asked for and never another (an agent started ahead with pasta
// must not serve a sandbox without network, nor the other way round).
func TestAgentStartedAhead(t *testing.T) {
	t.Parallel()
	if lookPasta() == "" {
		t.Skip("needs pasta (Debian package passt) for an isolated network")
	}
	ctx := context.Background()
	c := nsClient(t)
	rt := c.Runtime().(*Runtime)
	// Lines of /proc/net/route but the header: the routes out.
	const routes = "tail -n +2 /proc/net/route | wc -l; ls /sys/class/net"
	check := func(opts sandbox.CreateOptions, wantNet bool) {
		t.Helper()
		sb := mustCreate(ctx, t, c, opts)
		res, err := sb.Exec(ctx, sandbox.Command{Shell: "sh -c " + shellQuote(routes)})
		if err != nil {
			t.Fatal(err)
		}
		out := strings.Fields(string(res.Stdout))
		if len(out) == 0 {
			t.Fatalf("no output: %q %q", res.Stdout, res.Stderr)
		}
		hasNet := out[0] != "0" || slices.ContainsFunc(out[1:], func(s string) bool { return s != "lo" })
		if hasNet != wantNet {
			t.Errorf("NoNetwork=%v: routes and interfaces %q; want network %v", opts.NoNetwork, out, wantNet)
		}
		m, err := rt.readMeta(sb.ID())
		if err != nil {
			t.Fatal(err)
		}
		if procs := m.Cgroups.procs(); len(procs) > 0 || m.Cgroups.V2 != "" || len(m.Cgroups.V1) > 0 {
			if !slices.Contains(procs, m.AgentPID) {
				t.Errorf("agent %d not in its sandbox's cgroups %v", m.AgentPID, procs)
			}
			if wantNet && !slices.ContainsFunc(procs, isPasta) {
				t.Errorf("no pasta in the sandbox's cgroups %v", procs)
			}
		}
		if err := sb.Destroy(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for range 3 {
		check(sandbox.CreateOptions{}, true)
	}
	for range 3 {
		check(sandbox.CreateOptions{NoNetwork: true}, false)
	}
	check(sandbox.CreateOptions{}, true)
	check(sandbox.CreateOptions{}, true)
}

func isPasta(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	return err == nil && (strings.HasPrefix(string(b), "pasta") || strings.HasPrefix(string(b), "passt"))
}

// isPastaMain reports whether pid is a pasta whose parent is not one:
// pasta runs some of its set-up in the sandbox's namespaces through a
// short-lived clone of itself (same name, its child), which a count of
// pasta processes taken during that set-up would see as a second pasta.
func isPastaMain(pid int) bool {
	if !isPasta(pid) {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "PPid:"); ok {
			ppid, err := strconv.Atoi(strings.TrimSpace(v))
			return err != nil || !isPasta(ppid)
		}
	}
	return true
}
