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
	t.Parallel()
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
	t.Parallel()
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

// A fork of a sandbox behind its egress proxy runs behind its own, never
// on pasta (a default route out, no private range filtered): with
// brokered secrets, which the creating handle carries over, and with an
// allow-all that SetNetwork put behind the proxy.
func TestEgressForkStaysBehindProxy(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEgressEnv(t, L4)
	if e.rt.pasta == "" {
		t.Skip("pasta (Debian package passt) is not installed: a child could not get an open network anyway")
	}
	brokered := mustCreate(ctx, t, e.c, sandbox.CreateOptions{
		BrokeredSecrets: []sandbox.BrokeredSecret{{Value: "sk-fork-0123456789abcdef", Hosts: []string{"api.example.test"}, Env: "API_KEY"}}})
	set := mustCreate(ctx, t, e.c, sandbox.CreateOptions{NoNetwork: true})
	if err := set.SetNetwork(ctx, sandbox.NetworkPolicy{Mode: sandbox.NetworkAllowAll}); err != nil {
		t.Fatal(err)
	}
	for name, sb := range map[string]*sandbox.Sandbox{"brokered": brokered, "set-network": set} {
		if _, err := sb.Refresh(ctx); err != nil {
			t.Fatal(err)
		}
		if got := sb.Info().Detail["egress"]; got != "proxy" {
			t.Fatalf("%s: the source is not behind the proxy: egress %q", name, got)
		}
		kids, err := sb.Fork(ctx, 1, sandbox.ForkOptions{})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		k := kids[0]
		defer k.Destroy(ctx)
		if got := k.Info().Detail["egress"]; got != "proxy" {
			t.Errorf("%s: the fork does not run behind the egress proxy: egress %q network %q", name, got, k.Info().Detail["network"])
		}
		// No route out (the header line of /proc/net/route only), and the
		// proxy answers: it refuses the host's loopback, as allow-all
		// behind it does.
		res := run(ctx, t, k, "wc -l </proc/net/route; curl -sS --max-time 10 http://api.example.test:"+e.port+"/")
		if out := string(res.Stdout); !strings.HasPrefix(out, "1\n") || !strings.Contains(out, "loopback address the policy does not allow") {
			t.Errorf("%s: the fork is not behind a proxy: %q %q", name, res.Stdout, res.Stderr)
		}
		if name == "brokered" && len(k.Info().BrokeredSecrets) != 1 {
			t.Errorf("the fork has brokered secrets %+v, want its parent's", k.Info().BrokeredSecrets)
		}
	}
}
