package sandbox_test

import (
	"context"
	"errors"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/provider/daytona"
	"github.com/sandboxkit/sandbox/provider/daytona/daytonafake"
	"github.com/sandboxkit/sandbox/provider/e2b"
	"github.com/sandboxkit/sandbox/provider/e2b/e2bfake"
	"github.com/sandboxkit/sandbox/provider/memory"
)

// errCase is one failing call of the error table: the error it gave, the
// code it must have and the input its message must name.
type errCase struct {
	name  string
	err   error
	code  sandbox.Code
	input string
	id    string
	// without lists texts the message must not hold.
	without []string
}

// failingCalls makes representative calls fail on c and returns their
// errors. Code Unknown marks a call whose code differs between providers.
func failingCalls(t *testing.T, c *sandbox.Client) []errCase {
	t.Helper()
	ctx := context.Background()
	var cases []errCase
	add := func(name string, err error, code sandbox.Code, input, id string) {
		cases = append(cases, errCase{name: name, err: err, code: code, input: input, id: id})
	}
	const missingID = "missing7f3a0e2b9c1d5" // the form of an E2B id, which E2B checks before looking it up
	_, err := c.Attach(ctx, missingID)
	add("get unknown id", err, sandbox.NotFound, missingID, missingID)

	sb, err := c.Create(ctx, sandbox.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	id := sb.ID()
	_, err = sb.ReadFile(ctx, "missing.txt")
	add("read missing file", err, sandbox.NotFound, "missing.txt", id)
	_, err = sb.ReadFile(ctx, "bad\x00path")
	add("bad path", err, sandbox.InvalidArgument, `bad\x00path`, id)
	_, err = sb.ReadDir(ctx, "nodir")
	add("readdir missing", err, sandbox.NotFound, "nodir", id)
	err = sb.MkdirAll(ctx, "/etc/passwd/x")
	add("mkdir under a file", err, sandbox.Unknown, "/etc/passwd", id)
	_, err = sb.Exec(ctx, sandbox.Command{Args: []string{"x"}, Timeout: -time.Second})
	add("negative timeout", err, sandbox.InvalidArgument, "-1s", id)
	_, err = sb.Exec(ctx, sandbox.Command{Args: []string{"x"}, Env: map[string]string{"BAD=NAME": "v"}})
	add("bad env name", err, sandbox.InvalidArgument, "BAD=NAME", id)
	tctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	_, err = sb.Exec(tctx, sandbox.Command{Shell: "sleep 10"})
	cancel()
	add("exec timeout", err, sandbox.DeadlineExceeded, id, id)

	gone, err := c.Attach(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if err := sb.Destroy(ctx); err != nil {
		t.Fatal(err)
	}
	_, err = gone.Exec(ctx, sandbox.Command{Args: []string{"true"}})
	add("exec on destroyed", err, sandbox.NotFound, id, id)
	err = gone.WriteFile(ctx, "f.txt", nil)
	add("write on destroyed", err, sandbox.NotFound, "f.txt", id)
	// A layer above (as package session does) wrapping the *Error of a
	// call in its own *Error with the same provider and sandbox.
	add("nested", &sandbox.Error{Op: "run", Provider: c.Provider(), SandboxID: id, Path: "job-1", Code: sandbox.CodeOf(err), Err: err},
		sandbox.NotFound, "job-1", id)

	// Exec on a handle after its own Destroy, with a timeout the lease
	// must be extended for: the caller hears that the sandbox is gone, as
	// for any command on a destroyed sandbox, not about the extension.
	own, err := c.Create(ctx, sandbox.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := own.Destroy(ctx); err != nil {
		t.Fatal(err)
	}
	_, err = own.Exec(ctx, sandbox.Command{Args: []string{"true"}, Timeout: 10 * time.Minute})
	cases = append(cases, errCase{name: "exec after own destroy", err: err, code: sandbox.NotFound, input: own.ID(), id: own.ID(),
		without: []string{"extending", "lease"}})

	// A command whose lease ends while it runs: one line that says so,
	// without the transport's account of the lost connection. (Only the
	// memory provider here ends a running command at a lease of seconds:
	// Daytona counts its lease in minutes.)
	if c.Provider() == "memory" {
		short, err := c.Create(ctx, sandbox.CreateOptions{Timeout: 2 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		att, err := c.Attach(ctx, short.ID())
		if err != nil {
			t.Fatal(err)
		}
		lctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		_, err = att.Exec(lctx, sandbox.Command{Shell: "sleep 60", Timeout: time.Minute})
		cancel()
		if !errors.Is(err, sandbox.ErrLeaseExpired) {
			t.Errorf("lease ended: %v, want ErrLeaseExpired", err)
		}
		cases = append(cases, errCase{name: "lease ended", err: err, code: sandbox.NotFound, input: "the lease ended at", id: short.ID(),
			without: []string{"outcome unknown", "EOF", "went away", "sandbox ended", "sandbox's lease"}})
	}

	_, err = c.Create(ctx, sandbox.CreateOptions{Labels: map[string]string{"bad key": "v"}})
	add("bad label", err, sandbox.InvalidArgument, "bad key", "")
	return cases
}

var sandboxWord = regexp.MustCompile(`(?i)\bsandbox\b`)

// TestErrorMessagesSayEachFactOnce walks the error table of each provider
// (memory, and the E2B and Daytona adapters over their fakes): the
// sandbox id at most once, the word "sandbox" at most twice, no trailing
// code text the message already states, the input named, and the code and
// *Error still there for errors.Is and errors.As.
func TestErrorMessagesSayEachFactOnce(t *testing.T) {
	// Not parallel: calls under the default bounds (10 s attach) with no deadline of their own, which a starved host can miss.
	codeText := map[sandbox.Code]string{}
	for _, s := range []error{sandbox.ErrNotFound, sandbox.ErrInvalidArgument, sandbox.ErrPermission, sandbox.ErrAlreadyExists,
		sandbox.ErrFailedPrecondition, sandbox.ErrUnimplemented, sandbox.ErrLimit, sandbox.ErrUnavailable, sandbox.ErrInternal} {
		codeText[sandbox.CodeOf(s)] = s.Error()
	}

	e2bFake := e2bfake.New(memory.New())
	defer e2bFake.Close()
	e2bRT, err := e2b.New(e2b.WithAPIKey(e2bFake.APIKey()), e2b.WithAPIURL(e2bFake.APIURL()), e2b.WithSandboxURL(e2bFake.SandboxURL()))
	if err != nil {
		t.Fatal(err)
	}
	dayFake := daytonafake.New(memory.New())
	defer dayFake.Close()
	dayRT, err := daytona.New(daytona.WithAPIKey(dayFake.APIKey()), daytona.WithAPIURL(dayFake.URL()), daytona.WithPreviewBaseURL(dayFake.PreviewURL()))
	if err != nil {
		t.Fatal(err)
	}
	defer dayRT.ResetTransport()

	for _, c := range []*sandbox.Client{sandbox.NewClient(memory.New()), sandbox.NewClient(e2bRT), sandbox.NewClient(dayRT)} {
		t.Run(c.Provider(), func(t *testing.T) {
			defer c.Close()
			for _, tc := range failingCalls(t, c) {
				if tc.err == nil {
					t.Errorf("%s: no error", tc.name)
					continue
				}
				msg := tc.err.Error()
				t.Logf("%s: %s", tc.name, msg)
				if tc.id != "" && strings.Count(msg, tc.id) > 1 {
					t.Errorf("%s: the id %s %d times: %s", tc.name, tc.id, strings.Count(msg, tc.id), msg)
				}
				if n := len(sandboxWord.FindAllString(msg, -1)); n > 2 {
					t.Errorf("%s: %q %d times: %s", tc.name, "sandbox", n, msg)
				}
				if !strings.Contains(msg, c.Provider()) || strings.Count(msg, c.Provider()+": ") > 0 {
					t.Errorf("%s: the provider is not named once, in the prefix: %s", tc.name, msg)
				}
				for _, text := range codeText {
					if rest, ok := strings.CutSuffix(msg, ": "+text); ok && strings.Contains(strings.ToLower(rest), text) {
						t.Errorf("%s: trailing %q repeats the message: %s", tc.name, text, msg)
					}
				}
				if strings.HasSuffix(msg, ": "+codeText[sandbox.InvalidArgument]) {
					t.Errorf("%s: trailing code text: %s", tc.name, msg)
				}
				for _, w := range tc.without {
					if strings.Contains(msg, w) {
						t.Errorf("%s: says %q: %s", tc.name, w, msg)
					}
				}
				if strings.Count(msg, "\n") > 0 {
					t.Errorf("%s: more than one line: %q", tc.name, msg)
				}
				if !strings.Contains(msg, tc.input) {
					t.Errorf("%s: does not name the input %q: %s", tc.name, tc.input, msg)
				}
				if tc.code != sandbox.Unknown && (sandbox.CodeOf(tc.err) != tc.code) {
					t.Errorf("%s: code %v, want %v: %s", tc.name, sandbox.CodeOf(tc.err), tc.code, msg)
				}
				var se *sandbox.Error
				if !errors.As(tc.err, &se) || se.Provider != c.Provider() {
					t.Errorf("%s: no *sandbox.Error for the provider: %#v", tc.name, tc.err)
				}
				if tc.code == sandbox.NotFound && !errors.Is(tc.err, sandbox.ErrNotFound) {
					t.Errorf("%s: does not match ErrNotFound", tc.name)
				}
			}
		})
	}
}
