package sandboxtest

import (
	"context"
	"strings"
	"testing"

	"github.com/sandboxkit/sandbox"
)

// Environment variables with the short names scripts use (d, t, p, rc,
// …) reach the command with the caller's values, from CreateOptions.Env
// and from Command.Env, for Exec and for Start: a provider that runs the
// command through a shell wrapper of its own must not let the wrapper's
// variables take the caller's names.
func init() {
	execTests = append(execTests, test{name: "EnvNamesAreTheCallers", fn: testEnvNames})
}

// wrapperLikeNames are names a provider's wrapper script could use.
func wrapperLikeNames() []string {
	var names []string
	for c := 'a'; c <= 'z'; c++ {
		names = append(names, string(c))
	}
	return append(names, "rc", "pf", "sup", "fin", "oo", "oe", "ack", "dir", "pid", "out", "err", "tmp", "status", "code")
}

func testEnvNames(ctx context.Context, t *testing.T, s *suite) {
	names := wrapperLikeNames()
	created, per := map[string]string{}, map[string]string{}
	for i, n := range names {
		created[n] = "create-" + n
		if i%2 == 0 {
			per[n] = "command-" + n
		}
	}
	sb := s.createOn(ctx, t, s.c, func(o *sandbox.CreateOptions) {
		o.Env = created
	})
	checkEnv := func(what, out string) {
		t.Helper()
		got := map[string]string{}
		for _, line := range strings.Split(out, "\n") {
			if k, v, ok := strings.Cut(line, "="); ok {
				got[k] = v
			}
		}
		for _, n := range names {
			want := created[n]
			if v, ok := per[n]; ok {
				want = v
			}
			if v, ok := got[n]; !ok || v != want {
				t.Errorf("%s: the command sees %s=%q (set: %v), want %q", what, n, v, ok, want)
			}
		}
	}
	r := must[*sandbox.Result](t, "Exec env")(sb.Exec(ctx, sandbox.Command{Args: []string{"env"}, Env: per}))
	if r.ExitCode != 0 {
		t.Fatalf("env: exit %d, stderr %q", r.ExitCode, r.Stderr)
	}
	checkEnv("Exec", string(r.Stdout))
	r = must[*sandbox.Result](t, "Exec sh")(sb.Exec(ctx, sandbox.Command{Shell: "env", Env: per}))
	checkEnv("Exec of a shell line", string(r.Stdout))
	if needsProcesses(s.caps) != "" {
		return
	}
	p := must[*sandbox.Process](t, "Start env")(sb.Start(ctx, sandbox.Command{Args: []string{"env"}, Env: per}))
	defer p.Close()
	r = must[*sandbox.Result](t, "Wait")(p.Wait(ctx))
	checkEnv("Start", string(r.Stdout))
}
