package sandbox_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/driver"
	"github.com/sandboxkit/sandbox/internal/errscrub"
	"github.com/sandboxkit/sandbox/provider/memory"
)

// TestOutputExitError: Output returns stdout on success, and an *ExitError
// with the exit status, the signal or the timeout and a bounded, redacted
// stderr tail otherwise; its message is one line.
func TestOutputExitError(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	sb, _ := newSandbox(t, sandbox.CreateOptions{})

	out, err := sb.Output(ctx, sandbox.Command{Shell: "echo hi; echo noise >&2"})
	if err != nil || string(out) != "hi\n" {
		t.Fatalf("Output = %q, %v", out, err)
	}

	out, err = sb.Output(ctx, sandbox.Command{
		Shell:     `echo partial; echo "first line" >&2; echo "key $K is bad" >&2; exit 3`,
		SecretEnv: map[string]string{"K": "sk-output-secret"},
	})
	var ee *sandbox.ExitError
	if !errors.As(err, &ee) {
		t.Fatalf("non-zero exit: %T %v, want *ExitError", err, err)
	}
	if string(out) != "partial\n" || ee.ExitCode != 3 || ee.Signal != 0 || ee.TimedOut {
		t.Errorf("out %q, ExitError %+v", out, ee)
	}
	if msg := err.Error(); msg != "exit status 3: key [REDACTED] is bad" {
		t.Errorf("message %q", msg)
	}
	if !bytes.Contains(ee.Stderr, []byte("first line")) || bytes.Contains(ee.Stderr, []byte("sk-output-secret")) {
		t.Errorf("stderr tail %q", ee.Stderr)
	}

	// The tail is the end of stderr, at most MaxStderrTail bytes.
	_, err = sb.Output(ctx, sandbox.Command{Shell: `i=0; while [ $i -lt 700 ]; do echo "line $i of the log"; i=$((i+1)); done >&2; echo "the last words" >&2; exit 1`})
	if !errors.As(err, &ee) {
		t.Fatalf("long stderr: %v", err)
	}
	if len(ee.Stderr) != sandbox.MaxStderrTail || !ee.StderrTruncated || !bytes.HasSuffix(ee.Stderr, []byte("the last words\n")) {
		t.Errorf("tail of %d bytes (truncated %v) ends %q", len(ee.Stderr), ee.StderrTruncated, ee.Stderr[max(0, len(ee.Stderr)-40):])
	}
	if msg := err.Error(); msg != "exit status 1: the last words" || strings.Contains(msg, "\n") {
		t.Errorf("message %q", msg)
	}

	// A command timeout.
	_, err = sb.Output(ctx, sandbox.Command{Shell: "echo slow >&2; sleep 5", Timeout: time.Second})
	if !errors.As(err, &ee) || !ee.TimedOut || ee.TimeoutBy != sandbox.TimeoutCommand || ee.ExitCode != -1 {
		t.Fatalf("command timeout: %v (%+v)", err, ee)
	}
	// The message ends with the stderr tail, when the command wrote one
	// before its timeout (a starved host may not have run the echo yet).
	want := "timed out after 1s (command timeout)"
	if len(ee.Stderr) > 0 {
		want += ": slow"
	}
	if !errors.Is(err, context.DeadlineExceeded) || sandbox.CodeOf(err) != sandbox.DeadlineExceeded || err.Error() != want {
		t.Errorf("command timeout: code %v, message %q, want %q", sandbox.CodeOf(err), err, want)
	}

	// The caller's deadline: the *ExitError carries the context's error.
	tctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	_, err = sb.Output(tctx, sandbox.Command{Shell: "sleep 5"})
	var se *sandbox.Error
	if !errors.As(err, &ee) || !ee.TimedOut || ee.TimeoutBy != sandbox.TimeoutContext || !errors.As(err, &se) || sandbox.CodeOf(err) != sandbox.DeadlineExceeded {
		t.Fatalf("context timeout: %v (%+v)", err, ee)
	}

	// A failure to run at all is the *Error Exec returns, not an ExitError.
	_, err = sb.Output(ctx, sandbox.Command{})
	if errors.As(err, &ee) || sandbox.CodeOf(err) != sandbox.InvalidArgument {
		t.Errorf("bad command: %T %v", err, err)
	}
}

// TestOutputSignal: a command a signal ended is an *ExitError naming it.
func TestOutputSignal(t *testing.T) {
	t.Parallel()
	c := sandbox.NewClient(&statusRuntime{Runtime: memory.New(), st: driver.ExitStatus{ExitCode: -1, Signal: syscall.SIGKILL}})
	defer c.Close()
	ctx := context.Background()
	sb, err := c.Create(ctx, sandbox.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = sb.Output(ctx, sandbox.Command{Shell: "true"})
	var ee *sandbox.ExitError
	if !errors.As(err, &ee) || ee.Signal != syscall.SIGKILL || ee.ExitCode != -1 || ee.TimedOut {
		t.Fatalf("%v (%+v)", err, ee)
	}
	if err.Error() != "killed by signal SIGKILL" || errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("message %q", err)
	}
}

// TestWriteFilesJoined: two failing files out of three give one error
// that joins both, each naming its path and matching its own code.
func TestWriteFilesJoined(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	sb, _ := newSandbox(t, sandbox.CreateOptions{})
	if err := sb.MkdirAll(ctx, "taken"); err != nil {
		t.Fatal(err)
	}
	err := sb.WriteFiles(ctx, []sandbox.File{
		{Path: "good.txt", Data: []byte("ok")},
		{Path: "taken", Data: []byte("onto a directory")},
		{Path: "bad\x00name", Data: []byte("x")},
	})
	if err == nil {
		t.Fatal("no error")
	}
	if !errors.Is(err, sandbox.ErrIsDirectory) || !errors.Is(err, sandbox.ErrInvalidArgument) {
		t.Errorf("the joined error does not match both codes: %v", err)
	}
	j, ok := err.(interface{ Unwrap() []error })
	if !ok || len(j.Unwrap()) != 2 {
		t.Fatalf("want 2 joined errors: %v", err)
	}
	errs := j.Unwrap()
	if !strings.Contains(errs[0].Error(), "/home/user/taken") || sandbox.CodeOf(errs[0]) != sandbox.FailedPrecondition {
		t.Errorf("first failure: %v", errs[0])
	}
	if !strings.Contains(errs[1].Error(), `bad\x00name`) || sandbox.CodeOf(errs[1]) != sandbox.InvalidArgument {
		t.Errorf("second failure: %v", errs[1])
	}
	if got, err := sb.ReadFile(ctx, "good.txt"); err != nil || string(got) != "ok" {
		t.Errorf("the good file: %q, %v", got, err)
	}
	if err := sb.WriteFiles(ctx, []sandbox.File{{Path: "a", Data: nil}, {Path: "b/c", Data: []byte("c")}}); err != nil {
		t.Errorf("all good: %v", err)
	}
}

// TestRun: Run writes the inputs next to the command (its Dir), runs it
// and reads back the outputs; a failed command is an *ExitError and reads
// nothing back; a missing output is NotFound naming its path; bad inputs
// are refused before anything runs.
func TestRun(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	sb, rt := newSandbox(t, sandbox.CreateOptions{})

	res, err := sb.Run(ctx, sandbox.Command{Shell: "cat in.txt > out.txt; echo ran", Dir: "work"}, sandbox.RunOptions{
		Files:   []sandbox.File{{Path: "in.txt", Data: []byte("data")}},
		Outputs: []string{"out.txt"},
	})
	if err != nil || string(res.Stdout) != "ran\n" || string(res.Files["out.txt"]) != "data" || res.ExitCode != 0 {
		t.Fatalf("Run = %+v, %v", res, err)
	}
	if got, _ := sb.ReadFile(ctx, "work/in.txt"); string(got) != "data" {
		t.Errorf("the input is not in the command's dir: %q", got)
	}
	res, err = sb.Run(ctx, sandbox.Command{Shell: "cat ~/home.txt /tmp/abs.txt > ~/o.txt", Dir: "work"}, sandbox.RunOptions{
		Files:   []sandbox.File{{Path: "~/home.txt", Data: []byte("h")}, {Path: "/tmp/abs.txt", Data: []byte("a")}},
		Outputs: []string{"~/o.txt"},
	})
	if err != nil || string(res.Files["~/o.txt"]) != "ha" {
		t.Fatalf("home and absolute paths: %+v, %v", res, err)
	}

	res, err = sb.Run(ctx, sandbox.Command{Shell: "echo out; echo boom >&2; echo x > o; exit 2"}, sandbox.RunOptions{Outputs: []string{"o"}})
	var ee *sandbox.ExitError
	if !errors.As(err, &ee) || ee.ExitCode != 2 || res == nil || string(res.Stdout) != "out\n" || res.Files != nil {
		t.Fatalf("failed command: %+v, %v", res, err)
	}
	if err.Error() != "exit status 2: boom" {
		t.Errorf("message %q", err)
	}

	res, err = sb.Run(ctx, sandbox.Command{Shell: "echo y > one"}, sandbox.RunOptions{Outputs: []string{"one", "missing1", "/tmp/missing2"}})
	if !errors.Is(err, sandbox.ErrNotFound) || !strings.Contains(err.Error(), "missing1") || !strings.Contains(err.Error(), "/tmp/missing2") || string(res.Files["one"]) != "y\n" {
		t.Fatalf("missing outputs: %+v, %v", res, err)
	}

	before := len(rt.Calls())
	for name, opts := range map[string]sandbox.RunOptions{
		"same file twice": {Files: []sandbox.File{{Path: "x", Data: nil}, {Path: "/home/user/x", Data: nil}}},
		"bad output":      {Outputs: []string{"o\x00"}},
		"bad file":        {Files: []sandbox.File{{Path: "", Data: nil}}},
	} {
		_, err := sb.Run(ctx, sandbox.Command{Shell: "true"}, opts)
		if sandbox.CodeOf(err) != sandbox.InvalidArgument {
			t.Errorf("%s: %v", name, err)
		}
	}
	if got := rt.Calls()[before:]; len(got) != 0 {
		t.Errorf("refused inputs reached the provider: %v", got)
	}
}

// TestExitErrorRedactedChain: a layer that redacts an error chain (as
// Sandbox does with its secrets) keeps the *ExitError for errors.As, with
// the secret gone from its stderr tail and its message.
func TestExitErrorRedactedChain(t *testing.T) {
	t.Parallel()
	sb, _ := newSandbox(t, sandbox.CreateOptions{})
	_, err := sb.Output(context.Background(), sandbox.Command{Shell: "echo 'token tok-9a7c2 refused' >&2; exit 1"})
	red := errscrub.Chain(fmt.Errorf("step 2: %w", err), func(s string) string { return strings.ReplaceAll(s, "tok-9a7c2", "[REDACTED]") })
	var ee *sandbox.ExitError
	if !errors.As(red, &ee) || ee.ExitCode != 1 || bytes.Contains(ee.Stderr, []byte("tok-9a7c2")) || strings.Contains(red.Error(), "tok-9a7c2") {
		t.Fatalf("redacted chain: %v (%+v)", red, ee)
	}
	if red.Error() != "step 2: exit status 1: token [REDACTED] refused" {
		t.Errorf("message %q", red)
	}
}
