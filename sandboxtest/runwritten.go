package sandboxtest

import (
	"context"
	"fmt"
	"testing"

	"github.com/sandboxkit/sandbox"
)

// testRunRightAfterWrite: a file written with WriteFile can be executed by
// the next command, while the program using the sandbox starts processes
// of its own (forkStorm). A provider that writes the file from a process
// which also forks (an in-process provider, a fake, a daemon) must not
// let a child forked mid-write hold the file open for writing: the
// command would fail with "Text file busy" at random. The storm makes
// that window wide (without the wait, a dozen rounds of two starters
// caught it here; a short run makes ten rounds with one).
func testRunRightAfterWrite(ctx context.Context, t *testing.T, s *suite) {
	sb := s.create(ctx, t, nil)
	rounds, starters := 40, 2
	switch {
	case full():
		rounds = 200
	case testing.Short():
		rounds, starters = 10, 1
	}
	stop := forkStorm(starters)
	defer stop()
	for i := range rounds {
		name := fmt.Sprintf("bin/run-%d", i%3)
		want := fmt.Sprintf("round %d\n", i)
		if err := sb.WriteFile(ctx, name, []byte("#!/bin/sh\necho '"+want[:len(want)-1]+"'\n")); err != nil {
			t.Fatalf("round %d: WriteFile %s: %v", i, name, err)
		}
		r, err := sb.Exec(ctx, sandbox.Command{Shell: "chmod +x " + name + " && ./" + name})
		if err != nil {
			t.Fatalf("round %d: Exec ./%s: %v", i, name, err)
		}
		if r.ExitCode != 0 || string(r.Stdout) != want {
			t.Fatalf("round %d: ./%s just written: exit %d, stdout %q, stderr %q; want exit 0 and %q", i, name, r.ExitCode, r.Stdout, r.Stderr, want)
		}
	}
}
