package sandboxtest

import (
	"context"
	"testing"
)

// The path utilities that scripts (and providers' own helper scripts)
// walk paths with answer as POSIX says, "--" included: a dirname that
// took "--" for a name made a walk up a path loop until its timeout
// (MkdirAll under a file took 30 s over a fake).
func init() {
	execTests = append(execTests, test{name: "PathUtilities", fn: testPathUtilities})
}

func testPathUtilities(ctx context.Context, t *testing.T, s *suite) {
	sb := s.create(ctx, t, nil)
	for _, tc := range []struct{ line, want string }{
		{`dirname -- /etc/passwd/x`, "/etc/passwd\n"},
		{`dirname /a/b/`, "/a\n"},
		{`dirname a/`, ".\n"},
		{`dirname /a`, "/\n"},
		{`dirname /`, "/\n"},
		{`dirname -- -x/y`, "-x\n"},
		{`basename -- /a/b.txt .txt`, "b\n"},
		{`basename /a/b/`, "b\n"},
		{`basename -- -x`, "-x\n"},
	} {
		r := sh(ctx, t, sb, tc.line)
		if r.ExitCode != 0 || string(r.Stdout) != tc.want {
			t.Errorf("%s: %q (stderr %q, exit %d), want %q", tc.line, r.Stdout, r.Stderr, r.ExitCode, tc.want)
		}
	}
}
