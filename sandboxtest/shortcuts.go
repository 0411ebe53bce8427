package sandboxtest

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/sandboxkit/sandbox"
)

// Subtests for the shortcuts of the main job: Output and Run behave the
// same on every provider.
func init() {
	execTests = append(execTests,
		test{name: "Output", fn: testOutput},
		test{name: "Run", fn: testRun})
}

// testOutput checks that Output returns stdout, and a failed command as
// an *ExitError with its status and the end of its stderr.
func testOutput(ctx context.Context, t *testing.T, s *suite) {
	sb := s.create(ctx, t, nil)
	out, err := sb.Output(ctx, sandbox.Command{Shell: "echo out; echo err >&2"})
	if err != nil || string(out) != "out\n" {
		t.Fatalf("Output = %q, %v", out, err)
	}
	out, err = sb.Output(ctx, sandbox.Command{Shell: "echo partial; echo first >&2; echo 'last words' >&2; exit 7"})
	var ee *sandbox.ExitError
	if !errors.As(err, &ee) || ee.ExitCode != 7 || ee.TimedOut || string(out) != "partial\n" {
		t.Fatalf("exit 7: %q, %v (%+v)", out, err, ee)
	}
	if err.Error() != "exit status 7: last words" || !strings.Contains(string(ee.Stderr), "first\n") {
		t.Fatalf("message %q, stderr tail %q", err, ee.Stderr)
	}
}

// testRun checks the main job in one call: files in next to the command,
// the command, a file out; and a missing output as NotFound naming it.
func testRun(ctx context.Context, t *testing.T, s *suite) {
	sb := s.create(ctx, t, nil)
	res, err := sb.Run(ctx, sandbox.Command{Shell: "cat a.csv b.csv > out/all.csv && echo done", Dir: "job"}, sandbox.RunOptions{
		Files:   []sandbox.File{{Path: "a.csv", Data: []byte("1,2\n")}, {Path: "b.csv", Data: []byte("3,4\n")}, {Path: "out/.keep", Data: nil}},
		Outputs: []string{"out/all.csv"},
	})
	if err != nil || string(res.Files["out/all.csv"]) != "1,2\n3,4\n" || string(res.Stdout) != "done\n" {
		t.Fatalf("Run = %+v, %v", res, err)
	}
	_, err = sb.Run(ctx, sandbox.Command{Shell: "true"}, sandbox.RunOptions{Outputs: []string{"never-written.json"}})
	if !errors.Is(err, sandbox.ErrNotFound) || !strings.Contains(err.Error(), "never-written.json") {
		t.Fatalf("missing output: %v", err)
	}
}
