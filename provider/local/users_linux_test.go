//go:build linux

package local

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/sandboxkit/sandbox"
)

// TestCommandsRunAsOwnUser: on a root host, L0 to L2 commands run as an
// unprivileged uid of their sandbox's own, so that one sandbox can neither
// read nor write another's home, nor signal its processes.
func TestCommandsRunAsOwnUser(t *testing.T) {
	t.Parallel()
	if os.Getuid() != 0 {
		t.Skip("needs a root host: elsewhere commands run as the host user (documented)")
	}
	for _, l := range []Level{L0, L1, L2} {
		t.Run(l.String(), func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			rt := levelRuntime(t, l)
			c := sandbox.NewClient(rt)
			a := mustCreate(ctx, t, c, sandbox.CreateOptions{})
			b := mustCreate(ctx, t, c, sandbox.CreateOptions{})
			ua := strings.TrimSpace(string(run(ctx, t, a, "id -u").Stdout))
			ub := strings.TrimSpace(string(run(ctx, t, b, "id -u").Stdout))
			if ua == "0" || ub == "0" || ua == "" || ua == ub {
				t.Fatalf("id -u = %q and %q: want two distinct unprivileged uids", ua, ub)
			}
			if d := a.Info().Detail["user"]; d != "uid "+ua {
				t.Errorf("Detail[user] = %q, want %q", d, "uid "+ua)
			}
			if err := b.WriteFile(ctx, "secret", []byte("b's secret")); err != nil {
				t.Fatal(err)
			}
			bHome := rt.home(b.ID())
			pid := run(ctx, t, b, "sleep 600 >/dev/null 2>&1 & echo $!").Stdout
			// From a: b's home, its files, its directory and its processes.
			probes := []string{
				"cat " + shellQuote(filepath.Join(bHome, "secret")),
				"ls " + shellQuote(bHome),
				"echo x > " + shellQuote(filepath.Join(bHome, "planted")),
				"ls " + shellQuote(rt.dir(b.ID())),
				"cat " + shellQuote(filepath.Join(rt.dir(b.ID()), "key")),
				"kill -0 " + strings.TrimSpace(string(pid)),
			}
			for _, p := range probes {
				res := run(ctx, t, a, p)
				if res.ExitCode == 0 {
					t.Errorf("from another sandbox, %q succeeded: %q", p, res.Stdout)
				}
			}
			if _, err := os.Stat(filepath.Join(bHome, "planted")); err == nil {
				t.Errorf("a sandbox planted a file in another's home")
			}
			// Each still reaches its own.
			if got := run(ctx, t, b, "cat secret").Stdout; string(got) != "b's secret" {
				t.Errorf("b reads its own file: %q", got)
			}
		})
	}
}

// TestDefaultRootReachable: on a root host the default root directory is
// one the sandboxes' users can reach, so that commands do not fall back
// to running as root.
func TestDefaultRootReachable(t *testing.T) {
	t.Parallel()
	if os.Getuid() != 0 {
		t.Skip("needs a root host: elsewhere the default root is the user's cache directory")
	}
	rt, err := New(WithIsolation(L1))
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	if rt.Root() != systemRoot {
		t.Errorf("Root() = %s, want %s", rt.Root(), systemRoot)
	}
	ctx := context.Background()
	sb := mustCreate(ctx, t, sandbox.NewClient(rt), sandbox.CreateOptions{})
	out := strings.TrimSpace(string(run(ctx, t, sb, "id -u").Stdout))
	if uid, err := strconv.Atoi(out); err != nil || uid == 0 {
		t.Errorf("id -u = %q at L1 under the default root: want an unprivileged uid (Detail[user] %q)", out, sb.Info().Detail["user"])
	}
	if why := rt.runAsWhy; why != "" {
		t.Errorf("runAsWhy = %q", why)
	}
}

// TestUIDReservationEndsWithSandbox: a sandbox's user is reserved while
// the sandbox exists, and free again once it is destroyed.
func TestUIDReservationEndsWithSandbox(t *testing.T) {
	t.Parallel()
	if os.Getuid() != 0 {
		t.Skip("needs a root host: elsewhere commands run as the host user")
	}
	ctx := context.Background()
	rt := levelRuntime(t, L1)
	sb, err := sandbox.NewClient(rt).Create(ctx, sandbox.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	uid := strings.TrimSpace(string(run(ctx, t, sb, "id -u").Stdout))
	n, err := strconv.Atoi(uid)
	if err != nil || n < uidBase || n >= uidBase+uidRange {
		t.Fatalf("id -u = %q: want a uid of the block from %d", uid, uidBase)
	}
	res := filepath.Join(rt.Root(), uidsDir, uid)
	if b, err := os.ReadFile(res); err != nil || string(b) != sb.ID() {
		t.Errorf("reservation %s = %q, %v; want the sandbox's id", res, b, err)
	}
	if err := sb.Destroy(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(res); err == nil {
		t.Errorf("reservation %s outlived its sandbox", res)
	}
}
