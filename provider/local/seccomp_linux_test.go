package local

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sandboxkit/sandbox"
)

// compatProbe makes syscalls the seccomp filter must fail whatever their
// form: through the i386 interface (int $0x80) of an x86-64 process,
// through the x32 ABI, and namespace creation through clone and clone3.
// It prints name=result, the result being the raw return value (-errno
// for the i386 interface) or -errno.
const compatProbe = `#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

static long int80(long nr, long a, long b, long c) {
	long r;
	__asm__ volatile("int $0x80" : "=a"(r) : "a"(nr), "b"(a), "c"(b), "d"(c) : "memory");
	return r;
}

static long native(long r) { return r < 0 ? -errno : r; }

static long reap(long r) {
	if (r == 0) _exit(0);
	if (r > 0) waitpid((pid_t)r, NULL, __WALL);
	return r;
}

struct cargs { unsigned long long flags, pidfd, child_tid, parent_tid, exit_signal, stack, stack_size, tls; };

int main(int argc, char **argv) {
	/* "i386": only check that the kernel offers the i386 interface at all
	   (without it, int $0x80 raises SIGSEGV); "noi386": skip it. */
	int i386 = !(argc > 1 && strcmp(argv[1], "noi386") == 0);
	if (argc > 1 && strcmp(argv[1], "i386") == 0) {
		printf("getpid32=%ld\n", int80(20, 0, 0, 0));
		return 0;
	}
	/* i386: socket(AF_INET, SOCK_STREAM, 0) = 359, unshare(CLONE_NEWUSER) = 310, getpid = 20, mount = 21 */
	if (i386) {
		printf("socket32=%ld\n", int80(359, 2, 1, 0));
		printf("unshare32=%ld\n", int80(310, 0x10000000, 0, 0));
		printf("getpid32=%ld\n", int80(20, 0, 0, 0));
		printf("mount32=%ld\n", int80(21, (long)"none", (long)"/tmp", (long)"tmpfs"));
	}
	/* x32: getpid */
	printf("getpidx32=%ld\n", native(syscall(0x40000000 | SYS_getpid)));
	printf("clonens=%ld\n", reap(native(syscall(SYS_clone, 0x10000000L | SIGCHLD, 0L, 0L, 0L, 0L))));
	struct cargs ca;
	memset(&ca, 0, sizeof ca);
	ca.exit_signal = SIGCHLD;
	printf("clone3=%ld\n", reap(native(syscall(435, &ca, sizeof ca))));
	printf("fork=%ld\n", reap(native(syscall(SYS_clone, (long)SIGCHLD, 0L, 0L, 0L, 0L))) > 0 ? 1L : 0L);
	return 0;
}
`

// TestSeccompForeignABIs runs compatProbe at L2 (network off) and L4 and
// checks that the filter cannot be bypassed through another syscall ABI
// and that no namespace can be made through clone or clone3.
func TestSeccompForeignABIs(t *testing.T) {
	t.Parallel()
	if runtime.GOARCH != "amd64" {
		t.Skip("the probe uses the x86-64 i386 and x32 interfaces")
	}
	gcc, err := exec.LookPath("gcc")
	if err != nil {
		t.Skip("needs gcc to build the probe")
	}
	dir := t.TempDir()
	src, bin := filepath.Join(dir, "probe.c"), filepath.Join(dir, "probe")
	if err := os.WriteFile(src, []byte(compatProbe), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(gcc, "-O0", "-o", bin, src).CombinedOutput(); err != nil {
		t.Skipf("gcc cannot build the probe here: %v\n%s", err, out)
	}
	probe, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	// Some kernels lack the i386 interface (no IA32 emulation, or
	// ia32_emulation=0): int $0x80 then kills the process even outside a
	// sandbox, and there is no i386 filter path to check.
	i386, arg := true, "all"
	if out, err := exec.Command(bin, "i386").CombinedOutput(); err != nil {
		t.Logf("this host lacks the i386 syscall interface (int $0x80: %v %q): its checks are skipped", err, out)
		i386, arg = false, "noi386"
	}
	for _, tc := range []struct {
		level Level
		opts  sandbox.CreateOptions
	}{
		{L2, sandbox.CreateOptions{NoNetwork: true}},
		{L2, sandbox.CreateOptions{}},
		{L4, sandbox.CreateOptions{NoNetwork: true}},
	} {
		t.Run(tc.level.String()+"/nonet="+strconv.FormatBool(tc.opts.NoNetwork), func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			rt := levelRuntime(t, tc.level)
			sb := mustCreate(ctx, t, sandbox.NewClient(rt), tc.opts)
			if err := sb.WriteFile(ctx, "probe", probe); err != nil {
				t.Fatal(err)
			}
			res, err := sb.Exec(ctx, sandbox.Command{Shell: "chmod +x probe && ./probe " + arg, Timeout: 30 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			if res.ExitCode != 0 {
				t.Fatalf("probe exit %d: %q %q", res.ExitCode, res.Stdout, res.Stderr)
			}
			got := map[string]string{}
			for l := range strings.Lines(string(res.Stdout)) {
				if k, v, ok := strings.Cut(strings.TrimSpace(l), "="); ok {
					got[k] = v
				}
			}
			enosys, eperm := "-38", "-1"
			want := map[string]string{
				// Every i386 syscall fails, allowed natively or not.
				"socket32": enosys, "unshare32": enosys, "getpid32": enosys, "mount32": enosys,
				"getpidx32": enosys,
				"clonens":   eperm, "clone3": enosys,
				"fork": "1", // a plain clone still works
			}
			if !i386 {
				for _, k := range []string{"socket32", "unshare32", "getpid32", "mount32"} {
					delete(want, k)
				}
			}
			for k, w := range want {
				if got[k] != w {
					t.Errorf("%s = %q, want %q", k, got[k], w)
				}
			}
			if t.Failed() {
				t.Logf("probe output: %s%s", res.Stdout, res.Stderr)
			}
		})
	}
}
