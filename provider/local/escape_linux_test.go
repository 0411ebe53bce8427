package local

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/sberrors"
)

// nsClient returns a Client whose sandboxes get namespaces (L3 or L4), or
// skips the test with the probe's reason.
func nsClient(t *testing.T) *sandbox.Client {
	t.Helper()
	rt := newRuntime(t)
	if l, missing := rt.Level(); l < L3 {
		t.Skipf("this host gives %s, not namespaces: %s", l.Describe(), strings.Join(missing, "; "))
	}
	return sandbox.NewClient(rt)
}

func mustCreate(ctx context.Context, t *testing.T, c *sandbox.Client, opts sandbox.CreateOptions) *sandbox.Sandbox {
	t.Helper()
	sb, err := c.Create(ctx, opts)
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	t.Cleanup(func() {
		if err := sb.Destroy(context.Background()); err != nil {
			t.Errorf("Destroy: %v", err)
		}
	})
	return sb
}

func run(ctx context.Context, t *testing.T, sb *sandbox.Sandbox, shell string) *sandbox.Result {
	t.Helper()
	res, err := sb.Exec(ctx, sandbox.Command{Shell: shell, Timeout: 30 * time.Second})
	if err != nil {
		t.Fatalf("Exec(%q): %v", shell, err)
	}
	return res
}

func TestEscapeFilesOutsideHome(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := nsClient(t)
	sb := mustCreate(ctx, t, c, sandbox.CreateOptions{})
	if got := sb.Home(); got != sandboxHome {
		t.Fatalf("Home = %q, want %q", got, sandboxHome)
	}
	// Host paths a sandboxed command must not be able to create or change,
	// whatever the host uid (this test also runs as root).
	marker := fmt.Sprintf("sbx-escape-%d", time.Now().UnixNano())
	hostDir := t.TempDir()
	targets := []string{
		"/usr/" + marker, "/etc/" + marker, "/" + marker, "/home/" + marker,
		"/bin/" + marker, "/opt/" + marker, filepath.Join(hostDir, marker),
		filepath.Join(sb.Info().Detail["host_home"], "..", marker),
	}
	var sh strings.Builder
	for _, p := range targets {
		fmt.Fprintf(&sh, "touch %q 2>/dev/null && echo CREATED %q; ", p, p)
	}
	sh.WriteString("echo x >> /etc/hostname 2>/dev/null && echo CHANGED /etc/hostname; ")
	sh.WriteString("mkdir -p /tmp/ok && touch " + sandboxHome + "/ok && echo home-ok")
	res := run(ctx, t, sb, sh.String())
	if bytes.Contains(res.Stdout, []byte("CREATED")) || bytes.Contains(res.Stdout, []byte("CHANGED")) {
		t.Errorf("sandbox wrote outside its home:\n%s", res.Stdout)
	}
	if !bytes.Contains(res.Stdout, []byte("home-ok")) {
		t.Errorf("sandbox could not write its own home and /tmp: %q %q", res.Stdout, res.Stderr)
	}
	for _, p := range targets {
		if _, err := os.Lstat(p); err == nil {
			os.Remove(p)
			t.Errorf("%s exists on the host", p)
		}
	}
	res = run(ctx, t, sb, "id -u; id -g")
	if got := strings.Fields(string(res.Stdout)); len(got) != 2 || got[0] != "1000" || got[1] != "1000" {
		t.Errorf("id = %q, want uid and gid 1000", res.Stdout)
	}
}

func TestEscapeNoCapabilities(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	sb := mustCreate(ctx, t, nsClient(t), sandbox.CreateOptions{})
	res := run(ctx, t, sb, "grep ^Cap /proc/self/status")
	lines := strings.Split(strings.TrimSpace(string(res.Stdout)), "\n")
	if len(lines) < 5 {
		t.Fatalf("status: %q", res.Stdout)
	}
	for _, l := range lines {
		f := strings.Fields(l)
		if len(f) != 2 || strings.Trim(f[1], "0") != "" {
			t.Errorf("capability set not empty: %q", l)
		}
	}
	res = run(ctx, t, sb, "grep -E '^(NoNewPrivs|Seccomp):' /proc/self/status")
	if !bytes.Contains(res.Stdout, []byte("NoNewPrivs:\t1")) {
		t.Errorf("no_new_privs not set: %q", res.Stdout)
	}
	if sb.Info().Isolation == L4.Describe() && !bytes.Contains(res.Stdout, []byte("Seccomp:\t2")) {
		t.Errorf("L4 sandbox without a seccomp filter: %q", res.Stdout)
	}
	// Without capabilities, administration fails inside the sandbox too.
	res = run(ctx, t, sb, "mount -t tmpfs none /tmp 2>/dev/null && echo MOUNTED; unshare -U true 2>/dev/null && echo UNSHARED; true")
	if len(bytes.TrimSpace(res.Stdout)) != 0 {
		t.Errorf("privileged operation succeeded: %q", res.Stdout)
	}
}

func TestEscapeHostProcesses(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	sb := mustCreate(ctx, t, nsClient(t), sandbox.CreateOptions{})
	victim := exec.Command("sleep", "60")
	if err := victim.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = victim.Process.Kill(); _ = victim.Wait() }()
	pid := victim.Process.Pid
	res := run(ctx, t, sb, fmt.Sprintf("test -e /proc/%d && echo SEES; kill -9 %d 2>/dev/null && echo KILLED; kill -9 %d 2>/dev/null && echo KILLED-SELF; ls /proc | grep -c '^[0-9]'", pid, pid, os.Getpid()))
	out := string(res.Stdout)
	if strings.Contains(out, "SEES") || strings.Contains(out, "KILLED") {
		t.Errorf("sandbox reached a host process: %q", out)
	}
	if err := victim.Process.Signal(syscall.Signal(0)); err != nil {
		t.Errorf("the host process died: %v", err)
	}
}

func TestEscapeNoNetwork(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := nsClient(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			conn.Close()
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	probe := fmt.Sprintf("bash -c 'exec 3<>/dev/tcp/127.0.0.1/%d' 2>/dev/null && echo CONNECTED; grep -c : /proc/net/dev", port)
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("needs bash for /dev/tcp")
	}
	on := mustCreate(ctx, t, c, sandbox.CreateOptions{})
	if res := run(ctx, t, on, probe); bytes.Contains(res.Stdout, []byte("CONNECTED")) {
		t.Errorf("with the network on by default, the sandbox reached the host's loopback: %q", res.Stdout)
	}
	host := mustCreate(ctx, t, c, sandbox.CreateOptions{ProviderOptions: map[string]string{"network": "host"}})
	if res := run(ctx, t, host, probe); !bytes.Contains(res.Stdout, []byte("CONNECTED")) {
		t.Fatalf("with network=host, the sandbox could not reach the host's loopback: %q %q", res.Stdout, res.Stderr)
	}
	off := mustCreate(ctx, t, c, sandbox.CreateOptions{NoNetwork: true})
	res := run(ctx, t, off, probe)
	if bytes.Contains(res.Stdout, []byte("CONNECTED")) {
		t.Errorf("with the network off, the sandbox reached the host")
	}
	if got := strings.TrimSpace(strings.TrimPrefix(string(res.Stdout), "CONNECTED")); got != "1" {
		t.Errorf("interfaces in /proc/net/dev = %q, want only lo", got)
	}
	// Its own loopback works: a server in the sandbox is reachable from it.
	res = run(ctx, t, off, "grep -q 'lo:' /proc/net/dev && cat /sys/class/net/lo/operstate 2>/dev/null; bash -c 'exec 3<>/dev/tcp/127.0.0.1/1' 2>&1 | grep -o 'refused' | head -1")
	if !bytes.Contains(res.Stdout, []byte("refused")) {
		t.Errorf("loopback in the sandbox is not up (want connection refused, not unreachable): %q", res.Stdout)
	}
}

// TestEscapeSymlinkInHome plants links to /etc in the home and checks that
// no file method follows them out, at every level.
func TestEscapeSymlinkInHome(t *testing.T) {
	t.Parallel()
	for _, l := range []Level{L1, L4} {
		t.Run(l.String(), func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			rt := newRuntime(t)
			if l == L1 {
				rt = newRuntime(t, WithIsolation(L1))
			}
			c := sandbox.NewClient(rt)
			sb := mustCreate(ctx, t, c, sandbox.CreateOptions{})
			run(ctx, t, sb, "ln -s /etc etc && ln -s /etc/hostname host && ln -s ../../../../../../../etc up")
			hostname, _ := os.ReadFile("/etc/hostname")
			marker := fmt.Sprintf("sbx-escape-%d", time.Now().UnixNano())
			for _, p := range []string{"etc/" + marker, "up/" + marker, "host", "etc/sub/" + marker} {
				err := sb.WriteFile(ctx, p, []byte("pwned"))
				if err == nil {
					t.Errorf("Upload(%s) succeeded", p)
				} else if !errors.Is(err, sberrors.ErrPathEscape) && sberrors.CodeOf(err) != sberrors.PermissionDenied {
					t.Errorf("Upload(%s) = %v, want ErrPathEscape", p, err)
				}
			}
			if _, err := os.Stat("/etc/" + marker); err == nil {
				os.RemoveAll("/etc/" + marker)
				t.Fatalf("Upload escaped to /etc")
			}
			if got, _ := os.ReadFile("/etc/hostname"); !bytes.Equal(got, hostname) {
				t.Fatalf("/etc/hostname changed")
			}
			if l < L3 {
				// The home only is served at L1: the links lead out of it.
				for _, p := range []string{"etc/passwd", "host", "up/passwd"} {
					if b, err := sb.ReadFile(ctx, p); err == nil {
						t.Errorf("Download(%s) read %d bytes outside the home", p, len(b))
					} else if !errors.Is(err, sberrors.ErrPathEscape) {
						t.Errorf("Download(%s) = %v, want ErrPathEscape", p, err)
					}
					if _, err := sb.Stat(ctx, p); err == nil {
						t.Errorf("Stat(%s) followed the link out", p)
					}
				}
				if _, err := sb.ReadDir(ctx, "etc"); err == nil {
					t.Errorf("ReadDir(etc) listed /etc")
				}
			}
			// At L4 the links lead into the sandbox's own view, with its
			// commands' permissions: what they can read, the file methods
			// read; what they cannot, the file methods cannot.
			for _, p := range []string{"etc/passwd", "up/passwd"} {
				if l < L3 {
					break
				}
				want := run(ctx, t, sb, "cat "+p).Stdout
				if b, err := sb.ReadFile(ctx, p); err != nil || !bytes.Equal(b, want) {
					t.Errorf("Download(%s) = %d bytes, %v; the sandbox's cat read %d", p, len(b), err, len(want))
				}
			}
			if res := run(ctx, t, sb, "cat etc/shadow"); l >= L3 && res.ExitCode != 0 {
				if b, err := sb.ReadFile(ctx, "etc/shadow"); err == nil {
					t.Errorf("Download(etc/shadow) read %d bytes the sandbox's commands cannot", len(b))
				} else if sberrors.CodeOf(err) != sberrors.PermissionDenied && sberrors.CodeOf(err) != sberrors.NotFound {
					t.Errorf("Download(etc/shadow) = %v, want PermissionDenied", err)
				}
			}
			if err := sb.Remove(ctx, "etc/hostname"); err == nil {
				t.Errorf("Remove(etc/hostname) succeeded")
			}
			if err := sb.Rename(ctx, "etc/hostname", "stolen"); err == nil {
				t.Errorf("Rename(etc/hostname) succeeded")
			}
			if _, err := os.Stat("/etc/hostname"); err != nil && len(hostname) > 0 {
				t.Fatalf("/etc/hostname is gone")
			}
			// The links themselves are entries of the home, and removable.
			list, err := sb.ReadDir(ctx, ".")
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range list {
				if e.Name() == "etc" && e.LinkTarget != "/etc" {
					t.Errorf("ReadDir: etc has LinkTarget %q", e.LinkTarget)
				}
			}
			if err := sb.Remove(ctx, "etc"); err != nil {
				t.Errorf("Remove(link): %v", err)
			}
			if _, err := os.Stat("/etc/passwd"); err != nil {
				t.Fatalf("removing the link removed its target: %v", err)
			}
		})
	}
}

// TestFilesWholeView: the file methods serve the sandbox's file system as
// its commands see it, with their permissions.
func TestFilesWholeView(t *testing.T) {
	t.Parallel()
	for _, l := range []Level{L0, L1, L2} {
		t.Run(l.String(), func(t *testing.T) {
			t.Parallel()
			// Below L3 the host's root is served with the commands' rights
			// (and, at L2, their Landlock allow-list): never the host's
			// /etc or /usr for writing.
			ctx := context.Background()
			sb := mustCreate(ctx, t, sandbox.NewClient(levelRuntime(t, l)), sandbox.CreateOptions{})
			if os.Getuid() == 0 {
				if u := sb.Info().Detail["user"]; !strings.HasPrefix(u, "uid ") {
					t.Fatalf("Detail[user] = %q: the commands run as root here, which this test does not cover", u)
				}
			}
			want := run(ctx, t, sb, "cat /etc/os-release").Stdout
			if b, err := sb.ReadFile(ctx, "/etc/os-release"); err != nil || !bytes.Equal(b, want) || len(b) == 0 {
				t.Errorf("ReadFile(/etc/os-release) = %d bytes, %v; the sandbox's cat read %d", len(b), err, len(want))
			}
			for _, p := range []string{"/etc/passwd", "/etc/sbx-view-x", "/usr/sbx-view-x"} {
				before, _ := os.ReadFile(p)
				if err := sb.WriteFile(ctx, p, []byte("x")); sandbox.CodeOf(err) != sandbox.PermissionDenied {
					t.Errorf("WriteFile(%s) = %v, want PermissionDenied", p, err)
				}
				if after, _ := os.ReadFile(p); !bytes.Equal(before, after) {
					t.Fatalf("WriteFile changed the host's %s", p)
				}
			}
			if err := sb.MkdirAll(ctx, "/usr/sbx-view-dir"); sandbox.CodeOf(err) != sandbox.PermissionDenied {
				t.Errorf("MkdirAll(/usr/sbx-view-dir) = %v, want PermissionDenied", err)
			}
			// The sandbox's temporary directory is served both ways.
			dir := strings.TrimSpace(string(run(ctx, t, sb, `d=$(mktemp -d) && echo "$d"`).Stdout))
			if err := sb.WriteFile(ctx, dir+"/from-api", []byte("api")); err != nil {
				t.Fatal(err)
			}
			if got := run(ctx, t, sb, "cat "+dir+"/from-api; echo cmd > "+dir+"/from-cmd").Stdout; string(got) != "api" {
				t.Errorf("the command read %q from a file the API wrote in %s", got, dir)
			}
			if b, err := sb.ReadFile(ctx, dir+"/from-cmd"); err != nil || string(b) != "cmd\n" {
				t.Errorf("ReadFile of a file a command wrote in %s: %q, %v", dir, b, err)
			}
			if res := run(ctx, t, sb, "echo more >> "+dir+"/from-api"); res.ExitCode != 0 {
				t.Errorf("a command cannot append to a file the API wrote: %s", res.Stderr)
			}
			if err := sb.Remove(ctx, dir); err != nil {
				t.Error(err)
			}
			if l == L2 {
				// Landlock keeps the commands, and so the file methods, out
				// of the host's /tmp, which their user could write.
				if err := sb.WriteFile(ctx, "/tmp/sbx-view-x", []byte("x")); sandbox.CodeOf(err) != sandbox.PermissionDenied {
					os.Remove("/tmp/sbx-view-x")
					t.Errorf("WriteFile(/tmp/sbx-view-x) at L2 = %v, want PermissionDenied", err)
				}
			}
		})
	}
	t.Run("L1-as-root", func(t *testing.T) {
		t.Parallel()
		// Commands that run as the host's root are not given the host's
		// root through the file methods: the home only is served.
		if os.Getuid() != 0 {
			t.Skip("needs a root host")
		}
		ctx := context.Background()
		sb := mustCreate(ctx, t, sandbox.NewClient(levelRuntime(t, L1, WithCommandsAsRoot())), sandbox.CreateOptions{})
		for _, p := range []string{"/etc/os-release", "/tmp/x"} {
			if _, err := sb.ReadFile(ctx, p); sberrors.CodeOf(err) != sberrors.PermissionDenied {
				t.Errorf("ReadFile(%s) = %v, want PermissionDenied", p, err)
			}
		}
		if err := sb.WriteFile(ctx, "/etc/sbx-view-x", nil); sberrors.CodeOf(err) != sberrors.PermissionDenied {
			t.Errorf("WriteFile(/etc/sbx-view-x) = %v, want PermissionDenied", err)
		}
	})
	for _, l := range []Level{L4} {
		t.Run(l.String(), func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			c := nsClient(t)
			sb := mustCreate(ctx, t, c, sandbox.CreateOptions{})
			want := run(ctx, t, sb, "cat /etc/os-release").Stdout
			if b, err := sb.ReadFile(ctx, "/etc/os-release"); err != nil || !bytes.Equal(b, want) {
				t.Errorf("ReadFile(/etc/os-release) = %q, %v; the sandbox's cat read %q", b, err, want)
			}
			// A place the commands cannot write is PermissionDenied.
			if res := run(ctx, t, sb, "touch /usr/sbx-view-x"); res.ExitCode != 0 {
				if err := sb.WriteFile(ctx, "/usr/sbx-view-x", []byte("x")); sberrors.CodeOf(err) != sberrors.PermissionDenied {
					t.Errorf("WriteFile(/usr/sbx-view-x) = %v, want PermissionDenied", err)
				}
			} else {
				run(ctx, t, sb, "rm -f /usr/sbx-view-x")
				t.Logf("the sandbox's commands can write /usr at %s here: no read-only place to check", l)
			}
			// A place they can is served both ways.
			dir := strings.TrimSpace(string(run(ctx, t, sb, `d=$(mktemp -d) && echo "$d"`).Stdout))
			check := func(err error) {
				t.Helper()
				if err != nil {
					t.Fatal(err)
				}
			}
			check(sb.WriteFile(ctx, dir+"/from-api", []byte("api")))
			if got := run(ctx, t, sb, "cat "+dir+"/from-api; echo cmd > "+dir+"/from-cmd").Stdout; string(got) != "api" {
				t.Errorf("the command read %q from a file the API wrote in %s", got, dir)
			}
			if b, err := sb.ReadFile(ctx, dir+"/from-cmd"); err != nil || string(b) != "cmd\n" {
				t.Errorf("ReadFile of a file a command wrote in %s: %q, %v", dir, b, err)
			}
			// The owner is the commands' user, so they may change it.
			if res := run(ctx, t, sb, "echo more >> "+dir+"/from-api"); res.ExitCode != 0 {
				t.Errorf("a command cannot append to a file the API wrote: %s", res.Stderr)
			}
			check(sb.Remove(ctx, dir))
			// Kernel interfaces are not files.
			for _, p := range []string{"/proc/self/status", "/sys/kernel/hostname", "/dev/null"} {
				if _, err := sb.ReadFile(ctx, p); sberrors.CodeOf(err) != sberrors.PermissionDenied {
					t.Errorf("ReadFile(%s) = %v, want PermissionDenied", p, err)
				}
			}
			if _, err := sb.ReadFile(ctx, "/"); !errors.Is(err, sberrors.ErrIsDirectory) {
				t.Errorf("ReadFile(/) = %v, want ErrIsDirectory", err)
			}
		})
	}
}

// TestNoDescriptorLeak: a command holds only its stdin, stdout and stderr,
// none of the descriptors of the program, the spawner or the agent.
func TestNoDescriptorLeak(t *testing.T) {
	t.Parallel() // it counts a command's descriptors, not this process's
	for _, l := range []Level{L1, L4} {
		t.Run(l.String(), func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			rt := newRuntime(t)
			if l == L1 {
				rt = newRuntime(t, WithIsolation(L1))
			}
			sb := mustCreate(ctx, t, sandbox.NewClient(rt), sandbox.CreateOptions{})
			res := run(ctx, t, sb, "ls /proc/$$/fd")
			if got := strings.Fields(string(res.Stdout)); !slices.Equal(got, []string{"0", "1", "2"}) {
				t.Errorf("descriptors of a command: %v, want [0 1 2]", got)
			}
		})
	}
}

// TestAgentEndsWithItsDirectory: removing a sandbox's directory behind the
// provider's back (a test's TempDir clean-up) ends its agent and processes.
func TestAgentEndsWithItsDirectory(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rt := newRuntime(t)
	c := sandbox.NewClient(rt)
	sb, err := c.Create(ctx, sandbox.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sb.Start(ctx, sandbox.Command{Args: []string{"sleep", "600"}}); err != nil {
		t.Fatal(err)
	}
	pids, err := rt.HostPIDs(ctx, sb.ID())
	if err != nil || len(pids) < 2 {
		t.Fatalf("HostPIDs = %v, %v", pids, err)
	}
	m, _ := rt.readMeta(sb.ID())
	if err := os.RemoveAll(rt.dir(sb.ID())); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return !procAlive(m.AgentPID, m.AgentAt) })
	for _, pid := range pids {
		waitFor(t, func() bool { return !procAlive(pid, 0) })
	}
	m.Cgroups.kill(ctx)
	_ = m.Cgroups.remove(ctx)
}
