package memory_test

import (
	"os/exec"
	"testing"
)

// dirname and basename answer as coreutils does, "--" included: a script
// that walks up with `dirname -- "$d"` (as the Daytona adapter's
// permission check does) looped until its timeout when "--" was taken for
// a name. Each answer is checked against the host's own tools.
func TestDirnameBasenameAsCoreutils(t *testing.T) {
	sb, _ := newSandbox(t)
	lines := []string{
		`dirname -- /etc/passwd/x`, `dirname /a/b/`, `dirname /a//b//`, `dirname /`, `dirname //`, `dirname a`,
		`dirname a/`, `dirname ''`, `dirname /a`, `dirname a/b c/d/e`, `dirname -- -x/y`,
		`basename -- /a/b.txt .txt`, `basename /a/b/`, `basename /`, `basename b.txt b.txt`, `basename a.tar.gz .gz`,
	}
	for _, line := range lines {
		want, err := exec.Command("/bin/sh", "-c", line).Output()
		if err != nil {
			t.Skipf("the host's %q failed (%v): coreutils' dirname and basename are the reference", line, err)
		}
		out, errOut, code := run(t, sb, line)
		if out != string(want) || code != 0 {
			t.Errorf("%q: %q (stderr %q, exit %d); coreutils says %q", line, out, errOut, code, want)
		}
	}
	for _, line := range []string{`dirname`, `dirname --`, `basename`, `basename a b c`} {
		if _, _, code := run(t, sb, line); code == 0 {
			t.Errorf("%q: exit 0, want a usage failure", line)
		}
	}
}
