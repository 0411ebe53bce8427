package local

import (
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sandboxkit/sandbox"
)

// procCgroup reads /proc/<pid>/cgroup.
func procCgroup(t *testing.T, pid int) string {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cgroup")
	if err != nil {
		t.Fatalf("pid %d: %v", pid, err)
	}
	return string(b)
}

// procNoFile returns the soft "Max open files" of pid.
func procNoFile(t *testing.T, pid int) uint64 {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/limits")
	if err != nil {
		t.Fatalf("pid %d: %v", pid, err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(l, "Max open files"); ok {
			if f := strings.Fields(rest); len(f) > 0 {
				n, _ := strconv.ParseUint(f[0], 10, 64)
				return n
			}
		}
	}
	t.Fatalf("pid %d: no Max open files in %s", pid, b)
	return 0
}

// The egress proxy runs in the sandbox's cgroups, as pasta and the
// sandbox's commands do, so what a sandbox makes it spend counts against
// the sandbox's Resources; its open files are bounded by what it serves.
// This holds for the proxy started with the agent and for one SetNetwork
// starts later.
func TestEgressProxyInSandboxCgroup(t *testing.T) {
	ctx := context.Background()
	e := newEgressEnv(t, L4)
	at := mustCreate(ctx, t, e.c, sandbox.CreateOptions{Network: &sandbox.NetworkPolicy{Allow: []string{"api.example.test"}},
		Resources: sandbox.Resources{MemoryMiB: 256, CPUs: 1}})
	later := mustCreate(ctx, t, e.c, sandbox.CreateOptions{NoNetwork: true})
	if err := later.SetNetwork(ctx, sandbox.NetworkPolicy{Allow: []string{"api.example.test"}}); err != nil {
		t.Fatal(err)
	}
	for name, sb := range map[string]*sandbox.Sandbox{"create": at, "set-network": later} {
		m, err := e.rt.readMeta(sb.ID())
		if err != nil {
			t.Fatal(err)
		}
		if m.Cgroups.V2 == "" && len(m.Cgroups.V1) == 0 {
			t.Skip("no writable cgroup hierarchy on this host")
		}
		if !procAlive(m.EgressPID, m.EgressAt) {
			t.Fatalf("%s: no proxy running (pid %d)", name, m.EgressPID)
		}
		agent, proxy := procCgroup(t, m.AgentPID), procCgroup(t, m.EgressPID)
		if agent != proxy {
			t.Errorf("%s: the egress proxy (pid %d) is not in the sandbox's cgroups:\nagent %q\nproxy %q", name, m.EgressPID, agent, proxy)
		}
		if !strings.Contains(proxy, sb.ID()) {
			t.Errorf("%s: the proxy's cgroup %q does not name the sandbox %s", name, proxy, sb.ID())
		}
		found := false
		for _, pid := range m.Cgroups.procs() {
			found = found || pid == m.EgressPID
		}
		if !found {
			t.Errorf("%s: the proxy (pid %d) is not among the sandbox cgroup's processes %v", name, m.EgressPID, m.Cgroups.procs())
		}
		if n := procNoFile(t, m.EgressPID); n > egressNoFile {
			t.Errorf("%s: the proxy's RLIMIT_NOFILE is %d, want at most %d", name, n, egressNoFile)
		}
	}
}

// Pause freezes the proxy with the sandbox: SetNetwork then fails at once
// with ErrPaused rather than waiting on a frozen proxy, and after Resume
// the proxy serves and takes a new policy.
func TestEgressPausedSetNetwork(t *testing.T) {
	ctx := context.Background()
	e := newEgressEnv(t, L4)
	sb := mustCreate(ctx, t, e.c, sandbox.CreateOptions{Network: &sandbox.NetworkPolicy{Allow: []string{"api.example.test", "127.0.0.1"}}})
	m, err := e.rt.readMeta(sb.ID())
	if err != nil {
		t.Fatal(err)
	}
	if m.Cgroups.V2 == "" && m.Cgroups.V1["freezer"] == "" {
		t.Skip("no cgroup freezer on this host")
	}
	if err := sb.Pause(ctx); err != nil {
		t.Fatal(err)
	}
	sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	start := time.Now()
	err = sb.SetNetwork(sctx, sandbox.NetworkPolicy{Allow: []string{"other.example.test", "127.0.0.1"}})
	if !errors.Is(err, sandbox.ErrPaused) {
		t.Errorf("SetNetwork on a paused sandbox: %v, want ErrPaused", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("SetNetwork on a paused sandbox took %v", d)
	}
	if err := sb.Resume(ctx); err != nil {
		t.Fatal(err)
	}
	get := func(host string) bool {
		res := run(ctx, t, sb, "curl -sS -p --max-time 10 http://"+host+":"+e.port+"/")
		return strings.Contains(string(res.Stdout), "upstream "+host)
	}
	if !get("api.example.test") || get("other.example.test") {
		t.Error("after Resume the proxy does not enforce the policy of Create")
	}
	if err := sb.SetNetwork(ctx, sandbox.NetworkPolicy{Allow: []string{"other.example.test", "127.0.0.1"}}); err != nil {
		t.Fatal(err)
	}
	if get("api.example.test") || !get("other.example.test") {
		t.Error("SetNetwork after Resume not in force")
	}
}
