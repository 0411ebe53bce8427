package local

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/sberrors"
)

// searchableRoot returns a fresh root directory whose parents the
// unprivileged sandbox user may search (t.TempDir's parent is 0700), so
// that a root host runs L1 and L2 commands as that user.
func searchableRoot(t *testing.T) string {
	t.Helper()
	dir := shortTempDir(t)
	if err := os.Chmod(filepath.Dir(dir), 0o711); err != nil {
		t.Fatal(err)
	}
	if _, ok := searchable(filepath.Dir(dir), uidBase, uidBase); !ok && os.Getuid() == 0 {
		t.Skipf("an unprivileged user cannot search the directories above %s", dir)
	}
	return dir
}

// levelRuntime returns a Runtime forced to level l, or skips the test when
// the host cannot give it.
func levelRuntime(t *testing.T, l Level, opts ...Option) *Runtime {
	t.Helper()
	rt, err := New(append([]Option{WithRoot(searchableRoot(t)), WithIsolation(l)}, opts...)...)
	var ie *IsolationError
	if errors.As(err, &ie) {
		t.Skipf("no %s on this host: %v", l, err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rt.Close() })
	return rt
}

// attackScript, run by python3 in one sandbox, reads the other sandbox's
// agent key if it can, connects to that agent's socket and asks it to run
// a command that writes into the other sandbox's home.
const attackScript = `
import json, os, socket, struct, sys
sock, target = sys.argv[1], sys.argv[2]
key = b""
try:
    key = open(os.path.join(os.path.dirname(sock), "key"), "rb").read()
    print("KEY-READ")
except Exception as e:
    print("no key:", e)
try:
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(10)
    s.connect(sock)
    if key:
        s.sendall(b"A" + struct.pack(">I", len(key)) + key)
    req = json.dumps({"op": "exec", "args": ["/bin/sh", "-c", "echo PWNED; touch " + target], "env": ["PATH=/usr/bin:/bin"]}).encode()
    s.sendall(b"R" + struct.pack(">I", len(req)) + req)
    got = b""
    while True:
        b = s.recv(65536)
        if not b:
            break
        got += b
    print("GOT", got)
except Exception as e:
    print("refused:", e)
`

// TestAgentsUnreachableFromOtherSandboxes runs, in one sandbox, code that
// tries to make another sandbox's agent run a command, at every level from
// L1 up that the host gives.
func TestAgentsUnreachableFromOtherSandboxes(t *testing.T) {
	t.Parallel()
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("needs python3 (Debian package python3-minimal) for the attacking client")
	}
	if rp, err := filepath.EvalSymlinks(py); err == nil {
		py = rp
	}
	if !strings.HasPrefix(py, "/usr/") {
		py = "/usr/bin/python3"
		if _, err := os.Stat(py); err != nil {
			t.Skip("needs python3 in /usr/bin (Debian package python3-minimal)")
		}
	}
	cases := []struct {
		name   string
		l      Level
		asRoot bool // the key, not the uid, must stop it (as on a non-root host)
	}{{"L1", L1, false}, {"L2", L2, false}, {"L2-as-root", L2, true}, {"L4", L4, false}}
	for _, tc := range cases {
		l := tc.l
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if l == L1 && os.Getuid() != 0 {
				t.Skip("at L1 commands run as the host user, who can read every sandbox's key: sandboxes are not isolated from each other (documented)")
			}
			ctx := context.Background()
			var opts []Option
			if tc.asRoot {
				opts = append(opts, WithCommandsAsRoot())
			}
			rt := levelRuntime(t, l, opts...)
			c := sandbox.NewClient(rt)
			victim := mustCreate(ctx, t, c, sandbox.CreateOptions{})
			attacker := mustCreate(ctx, t, c, sandbox.CreateOptions{})
			if l == L1 {
				run(ctx, t, victim, "true") // L1 starts its agent on first use
			}
			if got := attacker.Info().Detail["user"]; l <= L2 && !tc.asRoot && os.Getuid() == 0 && !strings.HasPrefix(got, "uid ") {
				t.Errorf("Detail[user] = %q, want an unprivileged uid on a root host", got)
			}
			marker := filepath.Join(rt.home(victim.ID()), "pwned")
			if err := attacker.WriteFile(ctx, "attack.py", []byte(attackScript)); err != nil {
				t.Fatal(err)
			}
			res := run(ctx, t, attacker, fmt.Sprintf("%s attack.py %q %q", py, rt.sock(victim.ID()), marker))
			t.Logf("attacker: %s %s", res.Stdout, res.Stderr)
			if bytes.Contains(res.Stdout, []byte("PWNED")) {
				t.Errorf("the attacking sandbox ran a command through another sandbox's agent: %s", res.Stdout)
			}
			if bytes.Contains(res.Stdout, []byte("KEY-READ")) {
				t.Errorf("the attacking sandbox read another sandbox's agent key")
			}
			if _, err := os.Stat(marker); err == nil {
				t.Errorf("%s was created through the other sandbox's agent", marker)
			}
			// The victim's own Runtime still reaches its agent.
			if res := run(ctx, t, victim, "echo ok"); string(res.Stdout) != "ok\n" {
				t.Errorf("victim exec: %q", res.Stdout)
			}
		})
	}
}

// TestAgentRefusesWithoutKey connects to an agent from the host with no
// key and with a wrong one: the agent closes the connection without
// answering or running anything.
func TestAgentRefusesWithoutKey(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rt := newRuntime(t)
	if l, _ := rt.Level(); l < L2 {
		t.Skip("the agent starts on first use below L2")
	}
	sb := mustCreate(ctx, t, sandbox.NewClient(rt), sandbox.CreateOptions{})
	marker := filepath.Join(rt.home(sb.ID()), "ran")
	home := sb.Home()
	wrong := bytes.Repeat([]byte{'x'}, keySize)
	for name, prefix := range map[string][]byte{"none": nil, "wrong": authFrame(wrong), "short": authFrame([]byte("k"))} {
		t.Run(name, func(t *testing.T) {
			c, err := net.Dial("unix", rt.sock(sb.ID()))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			fw := &frameWriter{w: c}
			if prefix != nil {
				if _, err := c.Write(prefix); err != nil {
					t.Fatal(err)
				}
			}
			_ = fw.writeJSON(frameRequest, &request{Op: "exec", Args: []string{"/bin/sh", "-c", "touch " + home + "/ran"}, Env: agentEnv})
			_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
			b, err := io.ReadAll(c)
			if len(b) > 0 {
				t.Errorf("agent answered an unauthenticated client: %q", b)
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				t.Errorf("agent kept an unauthenticated connection open")
			}
			if _, err := os.Stat(marker); err == nil {
				t.Errorf("the command of an unauthenticated client ran")
			}
		})
	}
}

// escapeScript starts processes that try to outlive their sandbox: a
// double-forked daemon in its own session, one that also moves itself to
// the root of every cgroup hierarchy it can write, and one with an empty
// environment. Each runs "sleep <marker>.<n>" so that the host can find it.
const escapeScript = `
(setsid sleep %[1]s1 &)
(setsid sh -c 'for f in /sys/fs/cgroup/*/cgroup.procs /sys/fs/cgroup/cgroup.procs; do echo $$ > "$f"; done 2>/dev/null; exec sleep %[1]s2' &)
(env -i setsid sleep %[1]s3 &)
sleep %[1]s4 &
echo started
`

// hostProcsWith lists the command lines of the host processes (not
// zombies) whose command line contains marker.
func hostProcsWith(marker string) []string {
	_, out := hostPidsWith(marker)
	return out
}

// hostPidsWith lists the pids and command lines of the host processes (not
// zombies) whose command line contains marker.
func hostPidsWith(marker string) ([]int, []string) {
	var pids []int
	var out []string
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil || !bytes.Contains(b, []byte(marker)) {
			continue
		}
		if st, err := os.ReadFile("/proc/" + e.Name() + "/stat"); err == nil {
			if i := bytes.LastIndexByte(st, ')'); i > 0 && i+2 < len(st) && (st[i+2] == 'Z' || st[i+2] == 'X') {
				continue
			}
		}
		if pid, err := strconv.Atoi(e.Name()); err == nil {
			pids = append(pids, pid)
			out = append(out, strings.ReplaceAll(string(b), "\x00", " "))
		}
	}
	return pids, out
}

// TestDestroyLeavesNoProcess starts processes that leave their command's
// session, process tree and (where they can) cgroup, and checks that none
// survives Destroy, at every level; below L3 also after the agent died
// first, when only the cgroup and the marker still find them.
//
// Its subtests run at once, beside other tests: each finds its processes
// by a marker of its own (its index, the time and this test's pid).
func TestDestroyLeavesNoProcess(t *testing.T) {
	t.Parallel()
	idx := 0
	for _, l := range []Level{L0, L1, L2, L3, L4} {
		for _, agentDies := range []bool{false, true} {
			if agentDies && l >= L3 {
				continue // the agent is the pid namespace's init: its death ends them all
			}
			name := l.String()
			if agentDies {
				name += "-agent-killed"
			}
			idx++
			// A number sleep takes (3<index><ms>.<pid><k>: hours), the
			// same length for every subtest, so that no marker is part of
			// another's command line.
			marker := fmt.Sprintf("3%d%03d.%07d", idx, time.Now().UnixNano()/1e6%1000, os.Getpid())
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				ctx := context.Background()
				rt := levelRuntime(t, l)
				sb, err := sandbox.NewClient(rt).Create(ctx, sandbox.CreateOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if got := Level(sb.Info().Detail["level"][1] - '0'); got != l {
					_ = sb.Destroy(ctx)
					t.Skipf("got %s, not %s: %s", got, l, sb.Info().Detail["isolation_missing"])
				}
				res := run(ctx, t, sb, fmt.Sprintf(escapeScript, marker))
				if !bytes.Contains(res.Stdout, []byte("started")) {
					t.Fatalf("script: %q %q", res.Stdout, res.Stderr)
				}
				// Wait until each of the four runs sleep itself (setsid may
				// still be about to exec it).
				sleeping := func() bool {
					for k := 1; k <= 4; k++ {
						if !slices.Contains(hostProcsWith(marker), fmt.Sprintf("sleep %s%d ", marker, k)) {
							return false
						}
					}
					return true
				}
				deadline := time.Now().Add(25 * time.Second)
				for !sleeping() && time.Now().Before(deadline) {
					time.Sleep(20 * time.Millisecond)
				}
				if !sleeping() {
					t.Fatalf("want the 4 sleeps running, got %q", hostProcsWith(marker))
				}
				if agentDies {
					m, err := rt.readMeta(sb.ID())
					if err != nil {
						t.Fatal(err)
					}
					_ = syscall.Kill(m.AgentPID, syscall.SIGKILL)
					waitGone(ctx, m.AgentPID, m.AgentAt)
				}
				if err := sb.Destroy(ctx); err != nil {
					t.Fatalf("Destroy: %v", err)
				}
				if got := hostProcsWith(marker); len(got) > 0 {
					t.Errorf("alive after Destroy: %q", got)
					pids, _ := hostPidsWith(marker)
					for _, pid := range pids {
						_ = syscall.Kill(pid, syscall.SIGKILL)
					}
				}
			})
		}
	}
}

// TestRenameAcrossDirectories moves and links files between directories
// of the home and its temporary directory (Landlock's refer right), and
// checks that nothing moves out of them.
func TestRenameAcrossDirectories(t *testing.T) {
	t.Parallel()
	for _, l := range []Level{L2, L4} {
		t.Run(l.String(), func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			rt := levelRuntime(t, l)
			sb := mustCreate(ctx, t, sandbox.NewClient(rt), sandbox.CreateOptions{})
			if sb.Info().Detail["landlock"] == "" {
				t.Skip("no Landlock in this sandbox")
			}
			res := run(ctx, t, sb, `set -e
mkdir -p a b "$TMPDIR/t"
echo x > a/x
mv a/x b/x
ln b/x a/y
mkdir a/d && mv a/d b/d
echo z > "$TMPDIR/t/z" && mv "$TMPDIR/t/z" "$TMPDIR/z"
cat b/x a/y && ls b/d >/dev/null && echo ok`)
			if string(res.Stdout) != "x\nx\nok\n" || res.ExitCode != 0 {
				t.Errorf("rename and link inside the home: exit %d %q %q", res.ExitCode, res.Stdout, res.Stderr)
			}
			out := fmt.Sprintf("/etc/sbx-refer-%d", time.Now().UnixNano())
			res = run(ctx, t, sb, fmt.Sprintf(`mv b/x %[1]q 2>/dev/null && echo MOVED; ln a/y %[1]q 2>/dev/null && echo LINKED; true`, out))
			if len(res.Stdout) > 0 {
				t.Errorf("moved out of the home: %q", res.Stdout)
			}
			if _, err := os.Lstat(out); err == nil {
				os.Remove(out)
				t.Errorf("%s exists on the host", out)
			}
		})
	}
}

// loopbackListener serves on the host's 127.0.0.1 until the test ends.
func loopbackListener(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_, _ = c.Write([]byte("host-loopback\n"))
			c.Close()
		}
	}()
	return ln.Addr().(*net.TCPAddr).Port
}

// TestIsolatedNetwork checks that a sandbox with the network on (the
// default) at L3/L4 has its own network with a user-space stack, through
// which the host's loopback cannot be reached, neither at 127.0.0.1 nor
// through the gateway.
func TestIsolatedNetwork(t *testing.T) {
	t.Parallel() // its probe of the gateway waits out a 10 s connect
	if lookPasta() == "" {
		t.Skip("needs pasta (Debian package passt) for an isolated network")
	}
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("needs bash for /dev/tcp")
	}
	ctx := context.Background()
	c := nsClient(t)
	port := loopbackListener(t)
	sb := mustCreate(ctx, t, c, sandbox.CreateOptions{})
	if got := sb.Info().Detail["network"]; !strings.HasPrefix(got, "isolated") {
		t.Fatalf("Detail[network] = %q, want isolated", got)
	}
	probe := fmt.Sprintf(`gw=$(awk '$2=="00000000"{print $3}' /proc/net/route | head -1)
echo ifaces $(grep -c : /proc/net/dev) gw=$gw
for h in 127.0.0.1 $(printf '%%d.%%d.%%d.%%d' 0x${gw:6:2} 0x${gw:4:2} 0x${gw:2:2} 0x${gw:0:2} 2>/dev/null); do
  timeout 10 bash -c "exec 3<>/dev/tcp/$h/%d && head -1 <&3" 2>/dev/null && echo "REACHED $h"
done; true`, port)
	res, err := sb.Exec(ctx, sandbox.Command{Shell: "bash -c " + shellQuote(probe), Timeout: 60 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s%s", res.Stdout, res.Stderr)
	if bytes.Contains(res.Stdout, []byte("REACHED")) {
		t.Errorf("an isolated sandbox reached the host's loopback listener: %s", res.Stdout)
	}
	if bytes.Contains(res.Stdout, []byte("ifaces 1 ")) || !bytes.Contains(res.Stdout, []byte("gw=")) || bytes.Contains(res.Stdout, []byte("gw=\n")) {
		t.Errorf("no interface with a default route besides lo: %s", res.Stdout)
	}
	// Destroy ends the network stack too.
	rt := c.Runtime().(*Runtime)
	pids, err := rt.HostPIDs(ctx, sb.ID())
	if err != nil {
		t.Fatal(err)
	}
	if m, _ := rt.readMeta(sb.ID()); m != nil && m.NetPID > 0 {
		pids = append(pids, m.NetPID)
	}
	var running []int
	for _, pid := range pids {
		if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid)); err == nil && (strings.HasPrefix(string(b), "pasta") || strings.HasPrefix(string(b), "passt")) {
			running = append(running, pid)
		}
	}
	if len(running) == 0 {
		t.Fatalf("no pasta among the sandbox's processes %v", pids)
	}
	if err := sb.Destroy(ctx); err != nil {
		t.Fatal(err)
	}
	for _, pid := range running {
		if procAlive(pid, 0) {
			t.Errorf("pasta (pid %d) outlived Destroy", pid)
		}
	}
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// TestNetworkWithoutStack checks what a host without pasta gives: no
// network by default (said in Detail), FailedPrecondition naming passt
// when an isolated network is asked for, the host's when asked for.
func TestNetworkWithoutStack(t *testing.T) {
	saved := lookPasta
	lookPasta = func() string { return "" }
	t.Cleanup(func() { lookPasta = saved })
	ctx := context.Background()
	c := nsClient(t)
	sb := mustCreate(ctx, t, c, sandbox.CreateOptions{})
	if d := sb.Info().Detail; d["network"] != "off" || !strings.Contains(d["network_note"], "passt") {
		t.Errorf("Detail network = %q, note %q; want off, naming passt", d["network"], d["network_note"])
	}
	res := run(ctx, t, sb, "grep -c : /proc/net/dev")
	if strings.TrimSpace(string(res.Stdout)) != "1" {
		t.Errorf("interfaces: %q, want only lo", res.Stdout)
	}
	_, err := c.Create(ctx, sandbox.CreateOptions{ProviderOptions: map[string]string{"network": "isolated"}})
	if sberrors.CodeOf(err) != sberrors.FailedPrecondition || !strings.Contains(err.Error(), "passt") {
		t.Errorf("network=isolated without pasta: %v, want FailedPrecondition naming passt", err)
	}
	if _, err := c.Create(ctx, sandbox.CreateOptions{ProviderOptions: map[string]string{"network": "bogus"}}); sberrors.CodeOf(err) != sberrors.InvalidArgument {
		t.Errorf("network=bogus: %v, want InvalidArgument", err)
	}
	host := mustCreate(ctx, t, c, sandbox.CreateOptions{ProviderOptions: map[string]string{"network": "host"}})
	if got := host.Info().Detail["network"]; got != "host" {
		t.Errorf("Detail[network] = %q, want host", got)
	}
}

// TestDiskQuota writes past Resources.DiskGiB at L3/L4 from inside (ENOSPC)
// and through the file API (ResourceExhausted), and checks that the home's
// image is mounted again after it was unmounted (as after a reboot), that
// the file API and the sandbox then see the same files, and that Destroy
// leaves no mount.
func TestDiskQuota(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := nsClient(t)
	rt := c.Runtime().(*Runtime)
	if why := rt.diskUnsupported(L4); why != "" {
		t.Skip(why)
	}
	sb, err := c.Create(ctx, sandbox.CreateOptions{Resources: sandbox.Resources{DiskGiB: 1}})
	if err != nil {
		t.Fatal(err)
	}
	dir := rt.dir(sb.ID())
	defer func() { _ = sb.Destroy(ctx) }()
	if got := sb.Info().Detail["disk"]; !strings.HasPrefix(got, "1 GiB") {
		t.Errorf("Detail[disk] = %q, want 1 GiB", got)
	}
	res, err := sb.Exec(ctx, sandbox.Command{Shell: "fallocate -l 900M fill && dd if=/dev/zero of=big bs=1M count=200 2>&1; echo exit=$?; df -k . | tail -1", Timeout: 2 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(res.Stdout, []byte("No space left on device")) || bytes.Contains(res.Stdout, []byte("exit=0")) {
		t.Errorf("writing 1100 MiB into a 1 GiB home: %s %s", res.Stdout, res.Stderr)
	}
	err = sb.WriteFile(ctx, "more", bytes.Repeat([]byte("x"), 4<<20))
	if sberrors.CodeOf(err) != sberrors.ResourceExhausted {
		t.Errorf("WriteFile on a full disk: %v, want ResourceExhausted", err)
	}
	run(ctx, t, sb, "rm -f fill big more")
	// As after a reboot: the host's mount is gone; the file API mounts the
	// image again and writes where the sandbox reads.
	home := rt.home(sb.ID())
	if err := syscall.Unmount(home, syscall.MNT_DETACH); err != nil {
		t.Fatal(err)
	}
	if err := sb.WriteFile(ctx, "after", []byte("same disk")); err != nil {
		t.Fatal(err)
	}
	if !mounted(dir, home) {
		t.Errorf("the home's image is not mounted again")
	}
	if res := run(ctx, t, sb, "cat after"); string(res.Stdout) != "same disk" {
		t.Errorf("sandbox reads %q, want what the file API wrote", res.Stdout)
	}
	if err := sb.Destroy(ctx); err != nil {
		t.Fatal(err)
	}
	mounts, _ := os.ReadFile("/proc/self/mountinfo")
	if bytes.Contains(mounts, []byte(sb.ID())) {
		t.Errorf("a mount of the sandbox is left on the host")
	}
}

// TestDiskQuotaReported checks that a level that cannot enforce DiskGiB
// says so in Info.Detail.
func TestDiskQuotaReported(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rt := levelRuntime(t, L2)
	sb := mustCreate(ctx, t, sandbox.NewClient(rt), sandbox.CreateOptions{Resources: sandbox.Resources{DiskGiB: 1}})
	if got := sb.Info().Detail["disk"]; !strings.Contains(got, "not enforced") {
		t.Errorf("Detail[disk] = %q, want a note that it is not enforced", got)
	}
}
