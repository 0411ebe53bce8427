package sandboxtest

import (
	"bytes"
	"context"
	"testing"

	"github.com/sandboxkit/sandbox"
)

// One file system view: file paths name the sandbox's file system as its
// commands see it, with the same permissions.

func init() {
	fileTests = append(fileTests, test{name: "SameViewAsCommands", fn: sameView})
}

func sameView(ctx context.Context, t *testing.T, s *suite) {
	sb := s.create(ctx, t, nil)
	checked := 0
	// What the commands read outside the home, the file methods read.
	for _, p := range []string{"/etc/os-release", "/etc/passwd"} {
		r := must[*sandbox.Result](t, "Exec cat")(sb.Exec(ctx, sandbox.Command{Args: []string{"cat", p}}))
		if r.ExitCode != 0 {
			continue
		}
		checked++
		if got, err := sb.ReadFile(ctx, p); err != nil || !bytes.Equal(got, r.Stdout) {
			t.Errorf("ReadFile(%s) = %d bytes, %v; the sandbox's cat read %d", p, len(got), err, len(r.Stdout))
		}
	}
	// Where the commands write outside the home, the file methods write,
	// and each sees the other's files.
	// (A write, not test -w: access(2) does not see Landlock, say.)
	r := must[*sandbox.Result](t, "Exec touch in /tmp")(sb.Exec(ctx, sandbox.Command{Args: []string{"sh", "-c", `p=/tmp/sandboxtest-probe-$$ && touch "$p" && rm -f "$p"`}}))
	if r.ExitCode == 0 {
		checked++
		p := "/tmp/sandboxtest-view-" + randHex(4)
		check(t, sb.WriteFile(ctx, p, []byte("from the API")))
		r := must[*sandbox.Result](t, "Exec cat")(sb.Exec(ctx, sandbox.Command{Args: []string{"cat", p}}))
		if string(r.Stdout) != "from the API" {
			t.Errorf("a command read %q from %s, which the API wrote", r.Stdout, p)
		}
		sh(ctx, t, sb, "echo from a command > "+p+".cmd")
		if got, err := sb.ReadFile(ctx, p+".cmd"); err != nil || string(got) != "from a command\n" {
			t.Errorf("ReadFile(%s.cmd) = %q, %v", p, got, err)
		}
		check(t, sb.Remove(ctx, p))
		check(t, sb.Remove(ctx, p+".cmd"))
	}
	if checked == 0 {
		t.Skip("the sandbox's commands neither read /etc/os-release or /etc/passwd nor write /tmp: nothing outside the home to compare")
	}
}
