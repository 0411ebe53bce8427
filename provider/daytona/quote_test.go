package daytona

import (
	"bytes"
	"errors"
	"os/exec"
	"strings"
	"testing"

	"github.com/sandboxkit/sandbox/sberrors"
)

// roundTrip runs printf '%s\0' <quoted args> through shell and returns
// the words it received.
func roundTrip(t testing.TB, shell string, args []string) []string {
	var line strings.Builder
	line.WriteString(`printf '%s\0'`)
	for _, a := range args {
		line.WriteString(" " + shellQuote(a))
	}
	out, err := exec.Command(shell, "-c", line.String()).Output()
	if err != nil {
		t.Fatalf("%s -c %q: %v", shell, line.String(), err)
	}
	words := strings.Split(string(out), "\x00")
	return words[:len(words)-1]
}

var quoteSeeds = []string{
	"", " ", "a b", "'", "''", `"`, `\`, `\'`, "$HOME", "${X:-y}", "`id`", "$(id)", "a\nb", "\t",
	"*", "?", "[a]", "~", "~root", "#c", "-n", "--", "a;b", "a&&b", "a|b", "<x", ">x", "!x", "%s",
	"é", "名前", "\xff\xfe", "\x01\x02", "it's", "'a'b'", "a=b", "{a,b}", "\x7f", " lead", "trail ",
}

// TestShellQuoteRoundTrip checks every seed through /bin/sh and, where
// present, bash (the daemon's shell), several words at a time.
func TestShellQuoteRoundTrip(t *testing.T) {
	t.Parallel()
	shells := []string{"/bin/sh"}
	if p, err := exec.LookPath("bash"); err == nil {
		shells = append(shells, p)
	}
	for _, sh := range shells {
		got := roundTrip(t, sh, quoteSeeds)
		if len(got) != len(quoteSeeds) {
			t.Fatalf("%s: %d words back for %d", sh, len(got), len(quoteSeeds))
		}
		for i := range got {
			if got[i] != quoteSeeds[i] {
				t.Errorf("%s: word %d = %q, want %q (quoted %s)", sh, i, got[i], quoteSeeds[i], shellQuote(quoteSeeds[i]))
			}
		}
	}
}

// FuzzShellQuote proves that any argv without NUL reaches a real shell
// unchanged, word for word.
func FuzzShellQuote(f *testing.F) {
	for i, s := range quoteSeeds {
		f.Add(s, quoteSeeds[(i+1)%len(quoteSeeds)])
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		if strings.ContainsRune(a, 0) || strings.ContainsRune(b, 0) {
			t.Skip("argv cannot carry NUL")
		}
		got := roundTrip(t, "/bin/sh", []string{a, b})
		if len(got) != 2 || got[0] != a || got[1] != b {
			t.Fatalf("round trip of %q %q gave %q (quoted %s %s)", a, b, got, shellQuote(a), shellQuote(b))
		}
	})
}

func TestParseErrorShapes(t *testing.T) {
	t.Parallel()
	r := &Runtime{config: config{key: "dtn_secret"}}
	cases := []struct {
		status int
		body   string
		want   error
		msg    string
	}{
		{404, `{"path":"/api/sandbox/x","timestamp":"t","statusCode":404,"error":"Not Found","message":"Sandbox with ID or name x not found"}`, sberrors.ErrNotFound, "Sandbox with ID or name x not found"},
		{400, `{"statusCode":400,"message":"bad request: failed to resolve container IP after 3 attempts: no IP address found. Is the Sandbox started?","code":"BAD_REQUEST","timestamp":"t","path":"/p","method":"GET"}`, sberrors.ErrPaused, "Is the Sandbox started?"},
		{404, ``, sberrors.ErrNotFound, "not found"},
		{400, `{"statusCode":400,"message":["cpu must be an integer","memory must be an integer"],"error":"Bad Request"}`, sberrors.ErrInvalidArgument, "cpu must be an integer, memory must be an integer"},
		{409, `{"statusCode":409,"message":"Sandbox with name n already exists","error":"Conflict"}`, sberrors.ErrAlreadyExists, "already exists"},
		{409, `{"statusCode":409,"message":"Sandbox state change in progress","error":"Conflict"}`, sberrors.ErrFailedPrecondition, "state change"},
		{429, `{"statusCode":429,"message":"ThrottlerException: Too Many Requests"}`, sberrors.ErrLimit, "Too Many"},
		{401, `{"statusCode":401,"message":"unauthorized: dtn_secret is invalid","code":"UNAUTHORIZED"}`, sberrors.ErrPermission, "[REDACTED]"},
		{403, `{"statusCode":403,"message":"Organization is suspended"}`, sberrors.ErrPermission, "suspended"},
		{502, ``, sberrors.ErrUnavailable, "bad gateway"},
		{404, "404 page not found", sberrors.ErrNotFound, "404 page not found"},
		{400, `{"statusCode":400,"message":"Total CPU limit exceeded. Maximum allowed: 10."}`, sberrors.ErrLimit, "CPU limit"},
		// The toolbox daemon's own answers (research/daemons.md).
		{400, `{"statusCode":400,"message":"bad request: command cannot be empty or whitespace-only","code":"BAD_REQUEST","timestamp":"t","path":"/process/execute","method":"POST"}`, sberrors.ErrInvalidArgument, "command cannot be empty"},
		{400, `{"statusCode":400,"message":"bad request: invalid environment variable name: '1X'","code":"BAD_REQUEST","timestamp":"t","path":"/process/execute","method":"POST"}`, sberrors.ErrInvalidArgument, "invalid environment variable name: '1X'"},
		{500, `{"statusCode":500,"message":"failed to execute command: not found: session not found","timestamp":"0001-01-01T00:00:00Z","path":""}`, sberrors.ErrNotFound, "session not found"},
		{400, ``, sberrors.ErrInvalidArgument, "bad request"},
	}
	// The daemon's timeout of /process/execute.
	if e := r.parseError("op", 408, []byte(`{"statusCode":408,"message":"request timeout: command execution timeout","code":"REQUEST_TIMEOUT","timestamp":"t","path":"/process/execute","method":"POST"}`)); sberrors.CodeOf(e) != sberrors.DeadlineExceeded || !strings.Contains(e.Error(), "command execution timeout") {
		t.Errorf("408: %v (code %v), want DeadlineExceeded naming the timeout", e, sberrors.CodeOf(e))
	}
	for _, c := range cases {
		e := r.parseError("op", c.status, []byte(c.body))
		if !errors.Is(e, c.want) || !strings.Contains(e.Error(), c.msg) {
			t.Errorf("%d %s: %v (kind %v), want %v containing %q", c.status, c.body, e, e.kind, c.want, c.msg)
		}
		if strings.Contains(e.Error(), "dtn_secret") {
			t.Errorf("key in error %q", e)
		}
	}
}

func TestParseTrailer(t *testing.T) {
	t.Parallel()
	out := "noise\nSBKXab 3 - 2 1\nYQA=\nSBKXab-E\nYg==\nSBKXab-Z\n"
	tr, ok := parseTrailer(out, "SBKXab")
	if !ok || tr.rc != 3 || !tr.inline || !bytes.Equal(tr.stdout, []byte("a\x00")) || string(tr.stderr) != "b" {
		t.Errorf("trailer %+v ok=%v", tr, ok)
	}
	tr, ok = parseTrailer("\nSBKXab 137 - 9999999 0\n", "SBKXab")
	if !ok || tr.rc != 137 || tr.inline {
		t.Errorf("large trailer %+v ok=%v", tr, ok)
	}
	if _, ok := parseTrailer("fork/exec /usr/bin/bash: no such file or directory", "SBKXab"); ok {
		t.Error("no trailer found in an error")
	}
}

func TestParseMode(t *testing.T) {
	t.Parallel()
	for s, want := range map[string]string{"-rw-r--r--": "-rw-r--r--", "drwxr-x---": "drwxr-x---", "Lrwxrwxrwx": "Lrwxrwxrwx", "dtrwxrwxrwx": "dtrwxrwxrwx", "urwxr-xr-x": "urwxr-xr-x"} {
		if got := parseMode(s).String(); got != want {
			t.Errorf("parseMode(%q) = %q", s, got)
		}
	}
}

// The Runtime's client has no global timeout (daytonaio/daytona#4750):
// deadlines come from contexts only.
func TestNoClientTimeout(t *testing.T) {
	t.Parallel()
	r, err := New(WithAPIKey("dtn_x"), WithAPIURL("http://127.0.0.1:1/api"))
	if err != nil {
		t.Fatal(err)
	}
	if r.hc.Timeout != 0 {
		t.Errorf("http.Client.Timeout = %v", r.hc.Timeout)
	}
}

func TestScratchDirValidated(t *testing.T) {
	t.Parallel()
	for _, d := range []string{"tmp/x", "/tmp/a b", "/tmp/$x", "/tmp/*", "~x", "/tmp/`id`", "/tmp/;rm"} {
		if _, err := New(WithAPIKey("dtn_x"), WithAPIURL("http://127.0.0.1:1/api"), WithScratchDir(d)); sberrors.CodeOf(err) != sberrors.InvalidArgument {
			t.Errorf("WithScratchDir(%q): %v, want InvalidArgument", d, err)
		}
	}
	for _, d := range []string{"/tmp/.sandboxkit", "~/.cache/sbk"} {
		if _, err := New(WithAPIKey("dtn_x"), WithAPIURL("http://127.0.0.1:1/api"), WithScratchDir(d)); err != nil {
			t.Errorf("WithScratchDir(%q): %v", d, err)
		}
	}
}
