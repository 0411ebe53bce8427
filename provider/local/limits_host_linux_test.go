package local

import (
	"bufio"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/sandboxkit/sandbox"
)

// readSysctl reads a number from /proc/sys, failing the test if it cannot.
func readSysctl(t *testing.T, name string) uint64 {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("/proc/sys", name))
	if err != nil {
		t.Skipf("cannot read %s: %v", name, err)
	}
	n, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return n
}

// hostPidsMax returns the pids.max of the cgroup a process of the sandbox
// is in, given that process's /proc/self/cgroup, read through the host's
// cgroup mounts; "" when the pids controller is not mounted or the file
// is not there.
func hostPidsMax(t *testing.T, procCgroup string) string {
	t.Helper()
	v1, v2 := "", ""
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		for i, x := range fields {
			if x != "-" || i+3 >= len(fields)+1 || i+2 >= len(fields) {
				continue
			}
			switch fields[i+1] {
			case "cgroup2":
				if v2 == "" {
					v2 = fields[4]
				}
			case "cgroup":
				if i+3 < len(fields) && strings.Contains(","+fields[i+3]+",", ",pids,") {
					v1 = fields[4]
				}
			}
		}
	}
	var tries []string
	for l := range strings.Lines(procCgroup) {
		parts := strings.SplitN(strings.TrimSpace(l), ":", 3)
		if len(parts) != 3 {
			continue
		}
		switch {
		case parts[0] == "0" && parts[1] == "" && v2 != "":
			tries = append(tries, filepath.Join(v2, parts[2], "pids.max"))
		case strings.Contains(","+parts[1]+",", ",pids,") && v1 != "":
			tries = append(tries, filepath.Join(v1, parts[2], "pids.max"))
		}
	}
	for _, p := range tries {
		if b, err := os.ReadFile(p); err == nil {
			return strings.TrimSpace(string(b))
		}
	}
	return ""
}

// exhaustProbe opens descriptors until the kernel refuses, then forks
// children (which wait) until it refuses, and reports both counts.
const exhaustProbe = `
import os, time
fds = []
try:
    while len(fds) < 10000000:
        fds.append(os.open("/dev/null", os.O_RDONLY))
except OSError:
    pass
print("fds=%d" % (len(fds) + 3))
for fd in fds:
    os.close(fd)
kids = []
try:
    while len(kids) < 100000:
        pid = os.fork()
        if pid == 0:
            time.sleep(60)
            os._exit(0)
        kids.append(pid)
except OSError:
    pass
print("forks=%d" % len(kids))
for k in kids:
    os.kill(k, 9)
for k in kids:
    os.waitpid(k, 0)
`

// TestLimitsWithinHostShare checks, at each level, that what a sandbox's
// processes see as their limits keeps the host's task and file tables out
// of its reach: pids.max at most 1/8 of the host's tasks (min of
// kernel.pid_max and kernel.threads-max), the open-files hard limit times
// pids.max at most 1/8 of fs.file-max, and that Info.Detail reports them.
func TestLimitsWithinHostShare(t *testing.T) {
	fileMax := readSysctl(t, "fs/file-max")
	tasks := min(readSysctl(t, "kernel/pid_max"), readSysctl(t, "kernel/threads-max"))
	for _, level := range []Level{L1, L2, L3, L4} {
		t.Run(level.String(), func(t *testing.T) {
			ctx := context.Background()
			rt, err := New(WithRoot(t.TempDir()), WithIsolation(level))
			var ie *IsolationError
			if errors.As(err, &ie) {
				t.Skipf("no %s on this host: %v", level, err)
			}
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = rt.Close() })
			sb := mustCreate(ctx, t, sandbox.NewClient(rt), sandbox.CreateOptions{})
			res := run(ctx, t, sb, "ulimit -Sn; ulimit -Hn; cat /proc/self/cgroup")
			if res.ExitCode != 0 {
				t.Fatalf("exit %d: %q %q", res.ExitCode, res.Stdout, res.Stderr)
			}
			lines := strings.SplitN(string(res.Stdout), "\n", 3)
			if len(lines) < 3 {
				t.Fatalf("output %q", res.Stdout)
			}
			soft, err1 := strconv.ParseUint(lines[0], 10, 64)
			hard, err2 := strconv.ParseUint(lines[1], 10, 64)
			if err1 != nil || err2 != nil {
				t.Fatalf("ulimit -n: %q (soft %v, hard %v)", res.Stdout, err1, err2)
			}
			if soft > hard {
				t.Errorf("soft open files %d above hard %d", soft, hard)
			}
			info, err := sb.Refresh(ctx)
			if err != nil {
				t.Fatal(err)
			}
			d := info.Detail
			if got, want := d["open_files_max"], strconv.FormatUint(hard, 10)+" per process"; got != want {
				t.Errorf("Info.Detail[open_files_max] = %q, want %q", got, want)
			}
			pm := hostPidsMax(t, lines[2])
			if pm == "" || pm == "max" {
				// Without a pids limit only the open files are bounded.
				if hard > fileMax/8 {
					t.Errorf("open files %d per process with no pids limit, above 1/8 of fs.file-max %d", hard, fileMax)
				}
				t.Logf("no pids limit in this sandbox's cgroup (%q): %q", pm, lines[2])
				return
			}
			pids, err := strconv.ParseUint(pm, 10, 64)
			if err != nil {
				t.Fatalf("pids.max %q: %v", pm, err)
			}
			if pids > tasks/8 {
				t.Errorf("pids.max %d, above 1/8 of the host's %d tasks", pids, tasks)
			}
			if pids*hard > fileMax/8 {
				t.Errorf("pids.max %d x open files %d = %d, above 1/8 of fs.file-max %d", pids, hard, pids*hard, fileMax)
			}
			// A hostile program: it cannot raise its limit, and opening or
			// forking stops at the limits.
			r := run(ctx, t, sb, "ulimit -Hn "+strconv.FormatUint(hard*2, 10)+" 2>/dev/null && echo raised || echo refused")
			if got := strings.TrimSpace(string(r.Stdout)); got != "refused" {
				t.Errorf("raising the open-files limit to %d: %q, want refused", hard*2, got)
			}
			if r := run(ctx, t, sb, "command -v python3"); r.ExitCode == 0 && level == L4 {
				r = run(ctx, t, sb, "python3 -c '"+exhaustProbe+"'")
				got := map[string]uint64{}
				for l := range strings.Lines(string(r.Stdout)) {
					if k, v, ok := strings.Cut(strings.TrimSpace(l), "="); ok {
						got[k], _ = strconv.ParseUint(v, 10, 64)
					}
				}
				if got["fds"] == 0 || got["fds"] > hard {
					t.Errorf("opened %d descriptors in one process, want 1 to %d (%q %q)", got["fds"], hard, r.Stdout, r.Stderr)
				}
				if got["forks"] == 0 || got["forks"] >= pids {
					t.Errorf("forked %d processes, want 1 to %d (pids.max) (%q %q)", got["forks"], pids, r.Stdout, r.Stderr)
				}
			}
			if d["pids_max"] != pm {
				t.Errorf("Info.Detail[pids_max] = %q, want %q (the cgroup's)", d["pids_max"], pm)
			}
			if !strings.Contains(d["limits_basis"], "fs.file-max") {
				t.Errorf("Info.Detail[limits_basis] = %q, want the host values the limits come from", d["limits_basis"])
			}
			t.Logf("pids.max %s, open files %d/%d per process; %s", pm, soft, hard, d["limits_basis"])
		})
	}
}

// TestResourcesBeyondHostLowered checks that Resources asking for more
// memory and CPUs than the host has are lowered to what it has, with a
// note in Info.Detail, and that the memory limit applied is that one
// (not a number overflowing, or a limit that bounds nothing).
func TestResourcesBeyondHostLowered(t *testing.T) {
	ctx := context.Background()
	rt, err := New(WithRoot(t.TempDir()), WithIsolation(L4))
	var ie *IsolationError
	if errors.As(err, &ie) {
		t.Skipf("no L4 on this host: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rt.Close() })
	var total uint64
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for l := range strings.Lines(string(b)) {
			if rest, ok := strings.CutPrefix(l, "MemTotal:"); ok {
				total, _ = strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			}
		}
	}
	if total == 0 {
		t.Skip("no MemTotal in /proc/meminfo")
	}
	hostMiB := total >> 10
	sb := mustCreate(ctx, t, sandbox.NewClient(rt), sandbox.CreateOptions{
		Resources: sandbox.Resources{MemoryMiB: 1 << 44, CPUs: 1 << 20},
	})
	d := sb.Info().Detail
	if got, want := d["memory_max"], strconv.FormatUint(hostMiB, 10)+" MiB"; got != want {
		t.Errorf("Info.Detail[memory_max] = %q, want %q", got, want)
	}
	note := d["limits_note"]
	if !strings.Contains(note, "MemoryMiB") || !strings.Contains(note, "CPUs") {
		t.Errorf("Info.Detail[limits_note] = %q, want it to say MemoryMiB and CPUs were lowered", note)
	}
	if got := sb.Info().Isolation; !strings.HasPrefix(got, "L4") {
		t.Errorf("Isolation %q, want L4 (limits applied)", got)
	}
}

// TestAllSandboxesPidsCapped checks that the cgroup every sandbox's is made
// under caps the pids of all of them together at half the host's tasks,
// and their open files at half the host's file table: however many
// sandboxes run, the rest of the host keeps that many.
func TestAllSandboxesPidsCapped(t *testing.T) {
	tasks := min(readSysctl(t, "kernel/pid_max"), readSysctl(t, "kernel/threads-max"))
	rt, err := New(WithRoot(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rt.Close() })
	checked := 0
	for _, dir := range []string{rt.cg.V2, rt.cg.V1["pids"]} {
		b, err := os.ReadFile(filepath.Join(dir, "pids.max"))
		if dir == "" || err != nil {
			continue
		}
		checked++
		got := strings.TrimSpace(string(b))
		n, err := strconv.ParseUint(got, 10, 64)
		if err != nil || n > tasks/2 {
			t.Errorf("%s/pids.max = %q, want at most %d (half the host's %d tasks)", dir, got, tasks/2, tasks)
		}
		if fileMax := readSysctl(t, "fs/file-max"); n*computeLimits(readProcValues()).NoFile > fileMax/2 {
			t.Errorf("%s/pids.max = %d x %d open files each is above half the host's fs.file-max %d", dir, n, computeLimits(readProcValues()).NoFile, fileMax)
		}
	}
	if checked == 0 {
		t.Skip("no writable pids controller on this host")
	}
}
