package main

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/internal/lostcreate"
	"github.com/sandboxkit/sandbox/provider/daytona/daytonafake"
	"github.com/sandboxkit/sandbox/provider/e2b/e2bfake"
	"github.com/sandboxkit/sandbox/provider/memory"
	"github.com/sandboxkit/sandbox/run"
)

// invokeEnv runs the tool with env as its environment.
func invokeEnv(t *testing.T, url string, env map[string]string, stdin *strings.Reader, args ...string) cliRun {
	t.Helper()
	var out, errb bytes.Buffer
	a := newApp(nil, &out, &errb)
	if stdin != nil {
		a.stdin = stdin
	}
	a.getenv = func(k string) string { return env[k] }
	return invokeApp(t, a, url, args...)
}

// TestCLISecretEnv checks --secret-env: the value comes from the tool's
// environment (never argv), reaches the command, and is redacted from
// everything the tool prints: streamed stdout and stderr, --json fields,
// and error messages (plain and --json), whichever verb prints them.
func TestCLISecretEnv(t *testing.T) {
	t.Parallel()
	const secret = "s3cr3t-Value-4242"
	env := map[string]string{"TOKEN": secret, "PLAIN": "from-env"}
	noLeak := func(t *testing.T, what string, r cliRun) {
		t.Helper()
		if strings.Contains(r.stdout, secret) || strings.Contains(r.stderr, secret) {
			t.Errorf("%s leaked the secret: stdout %q stderr %q", what, r.stdout, r.stderr)
		}
	}
	for name, url := range providers(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			id := createSandbox(t, url)

			// The command sees the value; streamed output has it redacted.
			r := invokeEnv(t, url, env, nil, "exec", id, "--secret-env", "TOKEN", "--",
				"sh", "-c", `echo "out $TOKEN"; echo "err $TOKEN" >&2; [ ${#TOKEN} -eq 17 ] && echo len-ok`)
			noLeak(t, "exec", r)
			if r.code != 0 || r.stdout != "out [REDACTED]\nlen-ok\n" || r.stderr != "err [REDACTED]\n" {
				t.Errorf("exec --secret-env: exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
			}

			// --json fields.
			r = invokeEnv(t, url, env, nil, "--json", "exec", id, "--secret-env", "TOKEN", "--",
				"sh", "-c", `echo "out $TOKEN"; echo "err $TOKEN" >&2`)
			noLeak(t, "exec --json", r)
			var res map[string]any
			if err := json.Unmarshal([]byte(r.stdout), &res); err != nil || res["stdout"] != "out [REDACTED]\n" || res["stderr"] != "err [REDACTED]\n" {
				t.Errorf("exec --json --secret-env: %v %q", err, r.stdout)
			}

			// Output that is not UTF-8 is redacted before it is encoded.
			mustOK(t, invoke(t, url, strings.NewReader("\xff\xfe"), "cp", "-", id+":nonutf8"), "cp")
			r = invokeEnv(t, url, env, nil, "--json", "exec", id, "--secret-env", "TOKEN", "--",
				"sh", "-c", `cat nonutf8; echo "$TOKEN"`)
			noLeak(t, "exec --json of non-UTF-8 output", r)
			res = nil
			if err := json.Unmarshal([]byte(r.stdout), &res); err != nil {
				t.Fatalf("exec --json: %v in %q", err, r.stdout)
			}
			if got, err := decodeStream(res, "stdout"); err != nil || got != "\xff\xfe[REDACTED]\n" {
				t.Errorf("exec --json of non-UTF-8 output with a secret: %q %v", got, err)
			}

			// An error that quotes the value (here a working directory
			// named after it), plain and --json.
			for _, args := range [][]string{
				{"exec", id, "--secret-env", "TOKEN", "--dir", "/nonexistent/" + secret, "--", "true"},
				{"--json", "exec", id, "--secret-env", "TOKEN", "--dir", "/nonexistent/" + secret, "--", "true"},
			} {
				r = invokeEnv(t, url, env, nil, args...)
				noLeak(t, strings.Join(args, " "), r)
				if r.code != exitToolFailure || !strings.Contains(r.stderr, "[REDACTED]") {
					t.Errorf("%q: exit %d stderr %q, want 125 and the value redacted", args, r.code, r.stderr)
				}
			}

			// create --secret-env: every command of the sandbox gets it; a
			// later invocation redacts it when told its name again.
			r = mustOK(t, invokeEnv(t, url, env, nil, "create", "--secret-env", "TOKEN"), "create --secret-env")
			noLeak(t, "create", r)
			sid := strings.TrimSpace(r.stdout)
			r = invokeEnv(t, url, env, nil, "exec", sid, "--secret-env", "TOKEN", "--", "sh", "-c", `echo "$TOKEN"`)
			if r.code != 0 || r.stdout != "[REDACTED]\n" {
				t.Errorf("exec in a sandbox created with --secret-env: exit %d %q %q", r.code, r.stdout, r.stderr)
			}
			r = invokeEnv(t, url, nil, nil, "exec", sid, "--", "sh", "-c", `[ ${#TOKEN} -eq 17 ] && echo set`)
			if r.stdout != "set\n" {
				t.Errorf("create --secret-env did not reach commands: %q %q", r.stdout, r.stderr)
			}

			// --env NAME without a value takes it from the environment.
			r = invokeEnv(t, url, env, nil, "exec", id, "--env", "PLAIN", "--", "sh", "-c", `echo "$PLAIN"`)
			if r.code != 0 || r.stdout != "from-env\n" {
				t.Errorf("exec --env PLAIN: exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
			}

			// Bad names and unset variables are usage errors naming them,
			// before anything runs.
			for _, args := range [][]string{
				{"exec", id, "--secret-env", "MISSING", "--", "true"},
				{"exec", id, "--secret-env", "BAD-NAME", "--", "true"},
				{"exec", id, "--secret-env", "TOKEN", "--env", "TOKEN=x", "--", "true"},
				{"exec", id, "--env", "MISSING", "--", "true"},
				{"create", "--secret-env", "MISSING"},
			} {
				r = invokeEnv(t, url, env, nil, args...)
				name := args[len(args)-1]
				if i := slices.Index(args, "--secret-env"); i >= 0 {
					name = args[i+1]
				} else if i := slices.Index(args, "--env"); i >= 0 {
					name = args[i+1]
				}
				if r.code != exitToolFailure || !strings.HasPrefix(r.stderr, "sandbox: InvalidArgument: ") || !strings.Contains(r.stderr, name) {
					t.Errorf("%q: exit %d stderr %q, want 125 InvalidArgument naming %s", args, r.code, r.stderr, name)
				}
			}

			if name != "local" {
				return
			}
			// A background run: its logs are redacted when read with the name.
			r = invokeEnv(t, url, env, nil, "run", "start", id, "job", "--secret-env", "TOKEN", "--", "sh", "-c", `echo "run $TOKEN"`)
			noLeak(t, "run start", r)
			if r.code != 0 {
				t.Fatalf("run start --secret-env: exit %d %q", r.code, r.stderr)
			}
			deadline := time.Now().Add(time.Minute)
			for {
				r = invokeEnv(t, url, env, nil, "run", "logs", "--secret-env", "TOKEN", id, "job")
				if r.stdout != "" || time.Now().After(deadline) {
					break
				}
				time.Sleep(50 * time.Millisecond)
			}
			noLeak(t, "run logs", r)
			if r.stdout != "run [REDACTED]\n" {
				t.Errorf("run logs --secret-env = %q (stderr %q)", r.stdout, r.stderr)
			}

			// A secret that straddles two reads of the logs (a read returns
			// at most run.MaxLogBytes) is redacted whole, not in halves.
			pad := run.MaxLogBytes - 5
			r = invokeEnv(t, url, env, nil, "run", "start", id, "straddle", "--secret-env", "TOKEN", "--", "sh", "-c",
				fmt.Sprintf(`head -c %d /dev/zero | tr '\000' a; printf '%%s\n' "$TOKEN"`, pad))
			if r.code != 0 {
				t.Fatalf("run start: exit %d %q", r.code, r.stderr)
			}
			mustOK(t, invoke(t, url, nil, "run", "logs", "-f", "--poll", "50ms", id, "straddle"), "wait for the run")
			r = invokeEnv(t, url, env, nil, "run", "logs", "--secret-env", "TOKEN", id, "straddle")
			if strings.Contains(r.stdout, secret[:5]) || strings.Contains(r.stdout, secret[5:]) || r.stdout != strings.Repeat("a", pad)+"[REDACTED]\n" {
				t.Errorf("run logs of a secret across two reads: %d bytes ending %q, want %d a's and [REDACTED]", len(r.stdout), r.stdout[max(0, len(r.stdout)-40):], pad)
			}
		})
	}
}

// TestCLIExecJSONBytes checks that exec --json carries output bytes
// exactly: as a string when they are valid UTF-8, else base64 in
// stdout_base64/stderr_base64, flagged by stdout_encoding/stderr_encoding.
func TestCLIExecJSONBytes(t *testing.T) {
	t.Parallel()
	bin := "a\xff\xfeb\x00c\xc3(\n"
	text := "h\u00e9llo \u2028 <&> \x01\n"
	for name, url := range providers(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			id := createSandbox(t, url)
			mustOK(t, invoke(t, url, strings.NewReader(bin), "cp", "-", id+":bin"), "cp bin")
			mustOK(t, invoke(t, url, strings.NewReader(text), "cp", "-", id+":text"), "cp text")
			for _, tc := range []struct{ out, err string }{{bin, text}, {text, bin}, {"", ""}} {
				cmds := map[string]string{bin: "cat bin", text: "cat text", "": "true"}
				r := invoke(t, url, nil, "--json", "exec", id, "--", "sh", "-c", cmds[tc.out]+"; "+cmds[tc.err]+" >&2")
				if r.code != 0 {
					t.Fatalf("exec --json: exit %d %q", r.code, r.stderr)
				}
				var res map[string]any
				if err := json.Unmarshal([]byte(r.stdout), &res); err != nil {
					t.Fatalf("exec --json: %v in %q", err, r.stdout)
				}
				for stream, want := range map[string]string{"stdout": tc.out, "stderr": tc.err} {
					got, err := decodeStream(res, stream)
					if err != nil || got != want {
						t.Errorf("%s of %q: got %q (%v), want %q; JSON %s", stream, want, got, err, want, r.stdout)
					}
				}
			}
		})
	}
	r := mustOK(t, invoke(t, "memory://", nil, "exec", "--help"), "exec --help")
	for _, w := range []string{"stdout_base64", "stdout_encoding"} {
		if !strings.Contains(r.stdout, w) {
			t.Errorf("exec --help does not document %s:\n%s", w, r.stdout)
		}
	}
}

// decodeStream reads stream's bytes from an exec --json object.
func decodeStream(res map[string]any, stream string) (string, error) {
	switch enc := res[stream+"_encoding"]; enc {
	case "base64":
		s, _ := res[stream+"_base64"].(string)
		if _, ok := res[stream]; ok {
			return "", errorString(stream + " present beside " + stream + "_base64")
		}
		b, err := base64.StdEncoding.DecodeString(s)
		return string(b), err
	case "utf-8":
		s, ok := res[stream].(string)
		if !ok {
			return "", errorString(stream + " missing")
		}
		return s, nil
	default:
		return "", errorString(stream + "_encoding is " + strings.TrimSpace(string(must(json.Marshal(enc)))))
	}
}

type errorString string

func (e errorString) Error() string { return string(e) }

func must[T any](v T, _ error) T { return v }

// TestCLIProvidersRegistered checks that every provider the README's
// providers table lists is registered in the tool, so its URL opens or
// fails for a reason of its own, never as an unknown scheme.
func TestCLIProvidersRegistered(t *testing.T) {
	f, err := os.Open(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	row := regexp.MustCompile("^\\| `([a-z0-9]+)://`")
	var schemes []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if m := row.FindStringSubmatch(sc.Text()); m != nil {
			schemes = append(schemes, m[1])
		}
	}
	if len(schemes) < 5 {
		t.Fatalf("found %d providers in README.md's table (%q); want at least local, e2b, daytona, docker, memory", len(schemes), schemes)
	}
	registered := sandbox.Schemes()
	for _, s := range schemes {
		if !slices.Contains(registered, s) {
			t.Errorf("README lists %s:// but the tool does not register it (registered: %q)", s, registered)
		}
	}
	// Each opens, or fails for its own reason: no key, no engine.
	t.Setenv("E2B_API_KEY", "")
	t.Setenv("DAYTONA_API_KEY", "")
	urls := map[string]string{
		"memory":  "memory://registered",
		"local":   "local://" + t.TempDir(),
		"e2b":     "e2b://",
		"daytona": "daytona://",
		"docker":  "docker://?host=unix://" + filepath.Join(t.TempDir(), "no-engine.sock"),
	}
	for _, s := range schemes {
		u, ok := urls[s]
		if !ok {
			u = s + "://"
		}
		start := time.Now()
		r := invoke(t, u, nil, "--call-timeout", "10s", "ls")
		want := map[string]string{"e2b": "PermissionDenied", "daytona": "PermissionDenied", "docker": "Unavailable"}[s]
		if strings.Contains(r.stderr, "not registered") || want == "" && r.code != 0 ||
			want != "" && (r.code != exitToolFailure || !strings.HasPrefix(r.stderr, "sandbox: "+want+": ")) {
			t.Errorf("%s: ls: exit %d %q, want %s", u, r.code, r.stderr, map[bool]string{true: "success", false: want}[want == ""])
		}
		t.Logf("%s: ls: exit %d in %v: %s", u, r.code, time.Since(start).Round(time.Millisecond), strings.TrimSpace(r.stderr))
	}
}

// unreachableAddr returns a loopback address nothing listens on.
func unreachableAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// TestCLICallTimeout checks that the control-plane waits of every verb are
// bounded by --call-timeout: against a Daytona and an E2B whose API always
// answers 502/429, never answers, or cannot be reached, each verb returns
// within 5x the bound with an error that says it timed out.
//
// Each fault has a fake of its own (the fakes of one provider share an API
// key, which the providers read from the process environment, set once by
// TestMain), so the checks run side by side, a few at a time, and the test
// beside the package's other parallel tests: each waits out its bound (a
// hung create 15 s longer), and one after another, or as a serial test,
// they were the package's longest wait. The time a check measures starts
// when it runs.
func TestCLICallTimeout(t *testing.T) {
	t.Parallel()
	const bound = time.Second
	// At most this many invocations at once: their waits overlap while
	// each still gets the CPU it needs to answer within its bound.
	const atOnce = 12

	verbs := func(id string) [][]string {
		return [][]string{
			{"create"},
			{"ls"},
			{"info", id},
			{"pause", id},
			{"resume", id},
			{"timeout", id, "1h"},
			{"rm", id},
			{"exec", id, "--", "true"},
			{"cp", id + ":f", "-"},
			{"run", "status", id, "job"},
			{"run", "kill", id, "job"},
			{"run", "start", id, "job", "--", "true"},
		}
	}
	// lostCreate is how long the providers look for a sandbox whose create
	// response never came (a hung create), before the tool may exit: the
	// price of leaving no sandbox behind (see the root command's help;
	// shortened for the package's tests in TestMain).
	lostCreate := lostcreate.Budget
	check := func(t *testing.T, url string, args []string, wantTimeout bool, allow time.Duration) {
		t.Helper()
		start := time.Now()
		r := invoke(t, url, nil, append([]string{"--call-timeout", bound.String()}, args...)...)
		took := time.Since(start)
		if took > 5*bound+allow {
			t.Errorf("%q took %v, want under %v", args, took, 5*bound+allow)
		}
		if r.code != exitToolFailure || strings.Count(r.stderr, "\n") != 1 {
			t.Errorf("%q: exit %d stderr %q, want 125 and one line", args, r.code, r.stderr)
		}
		if wantTimeout && (!strings.HasPrefix(r.stderr, "sandbox: DeadlineExceeded: ") || !strings.Contains(r.stderr, "timed out") || !strings.Contains(r.stderr, "1s")) {
			t.Errorf("%q: stderr %q, want DeadlineExceeded saying it timed out with the 1s bound", args, r.stderr)
		}
		t.Logf("%q: %v: %s", args, took.Round(time.Millisecond), strings.TrimSpace(r.stderr))
	}

	// The cases, set up first: a fake per fault, with a sandbox made
	// before the fault for the verbs that take one.
	type callCase struct {
		name        string
		url         string
		args        []string
		wantTimeout bool
		allow       time.Duration
	}
	var cases []callCase
	add := func(group, url string, args []string, wantTimeout bool, allow time.Duration) {
		verb := args[0]
		if verb == "run" {
			verb += "_" + args[1]
		}
		cases = append(cases, callCase{group + "/" + verb, url, args, wantTimeout, allow})
	}
	allowFor := func(hang bool, args []string) time.Duration {
		if hang && args[0] == "create" {
			return lostCreate
		}
		return 0
	}

	dKey := testDaytonaKey
	daytona := func() (*daytonafake.Server, string, string) {
		dfake := daytonafake.New(memory.New(), daytonafake.WithAPIKey(dKey))
		t.Cleanup(dfake.Close)
		url := "daytona://?api_url=" + dfake.URL()
		return dfake, url, createSandbox(t, url)
	}
	for _, f := range []struct {
		name  string
		fault daytonafake.Fault
	}{{"502", daytonafake.Fault502}, {"429", daytonafake.Fault429}, {"hang", daytonafake.FaultHang}} {
		dfake, url, id := daytona()
		dfake.FailEvery("", "", f.fault)
		hang := f.fault == daytonafake.FaultHang
		for _, args := range verbs(id) {
			add("daytona-"+f.name, url, args, hang || args[0] == "create", allowFor(hang, args))
		}
	}
	// The verb's own call hangs after the attach succeeded.
	dfake, url, id := daytona()
	for _, m := range []string{"POST", "PUT", "PATCH", "DELETE"} {
		dfake.FailEvery(m, "", daytonafake.FaultHang)
	}
	for _, args := range [][]string{{"pause", id}, {"timeout", id, "2h"}, {"rm", id}} {
		add("daytona-op-hangs", url, args, true, 0)
	}

	eKey := testE2BKey
	for _, k := range []struct {
		name string
		kind e2bfake.FaultKind
	}{{"502", e2bfake.ProxyBadGateway}, {"429", e2bfake.TooManyRequests}, {"hang", e2bfake.Hang}} {
		efake := e2bfake.New(memory.New(), e2bfake.WithAPIKey(eKey))
		t.Cleanup(efake.Close)
		url := "e2b://?api_url=" + efake.APIURL() + "&sandbox_url=" + efake.SandboxURL()
		id := createSandbox(t, url)
		efake.Inject(&e2bfake.Fault{Kind: k.kind, Times: 1 << 30})
		hang := k.kind == e2bfake.Hang
		for _, args := range verbs(id) {
			add("e2b-"+k.name, url, args, hang || args[0] == "create", allowFor(hang, args))
		}
	}

	addr := unreachableAddr(t)
	for name, url := range map[string]string{
		"daytona": "daytona://?api_url=http://" + addr + "/api",
		"e2b":     "e2b://?api_url=http://" + addr + "&sandbox_url=http://" + addr,
	} {
		for _, args := range verbs("sbx-unreachable") {
			add("unreachable-"+name, url, args, args[0] == "create", 0)
		}
	}

	// The longest first, so that they overlap the rest.
	slices.SortStableFunc(cases, func(a, b callCase) int { return int(b.allow - a.allow) })
	sem := make(chan struct{}, atOnce)
	var wg sync.WaitGroup
	for _, c := range cases {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			t.Run(c.name, func(t *testing.T) { check(t, c.url, c.args, c.wantTimeout, c.allow) })
		})
	}
	wg.Wait()

	// A bound that is not positive is a usage error.
	for _, v := range []string{"0s", "-1s"} {
		r := invoke(t, "memory://", nil, "--call-timeout", v, "ls")
		if r.code != exitToolFailure || !strings.HasPrefix(r.stderr, "sandbox: InvalidArgument: ") || !strings.Contains(r.stderr, "--call-timeout") {
			t.Errorf("--call-timeout %s: exit %d stderr %q", v, r.code, r.stderr)
		}
	}

	// The default bound is documented.
	r := mustOK(t, invoke(t, "memory://", nil, "--help"), "--help")
	if !strings.Contains(r.stdout, "--call-timeout") || !strings.Contains(r.stdout, "2m") {
		t.Errorf("--help does not document --call-timeout and its default:\n%s", r.stdout)
	}
}

// TestRedactWriterSplits checks that redactWriter redacts a secret
// whatever the write boundaries: every split of streams that hold secrets
// (overlapping ones, one inside another, near misses) gives the output of
// redacting the whole stream at once.
func TestRedactWriterSplits(t *testing.T) {
	t.Parallel()
	secrets := map[string]string{"A": "tok-123", "B": "tok-123456", "C": "xyz"}
	streams := []string{
		"tok-123456 and tok-123 and tok-12 and xyz",
		"tok-tok-123tok-1234567xyzxy",
		"no secret at all",
		"tok-12",
		"xyxyz",
	}
	whole := func(s string) string {
		var b bytes.Buffer
		w := newRedactWriter(&b, secrets)
		w.Write([]byte(s))
		w.Flush()
		return b.String()
	}
	if got, want := whole(streams[0]), "[REDACTED] and [REDACTED] and tok-12 and [REDACTED]"; got != want {
		t.Fatalf("whole stream: %q, want %q", got, want)
	}
	for _, s := range streams {
		want := whole(s)
		for i := 0; i <= len(s); i++ {
			for j := i; j <= len(s); j++ {
				var b bytes.Buffer
				w := newRedactWriter(&b, secrets)
				for _, part := range []string{s[:i], s[i:j], s[j:]} {
					if n, err := w.Write([]byte(part)); n != len(part) || err != nil {
						t.Fatalf("Write: %d %v", n, err)
					}
				}
				if err := w.Flush(); err != nil {
					t.Fatal(err)
				}
				if b.String() != want {
					t.Fatalf("%q split at %d,%d: %q, want %q", s, i, j, b.String(), want)
				}
			}
		}
	}
}

// TestRedactSecretsCut checks that an error message that shortens a long
// input does not give away the piece of a secret at the cut.
func TestRedactSecretsCut(t *testing.T) {
	t.Parallel()
	secrets := map[string]string{"K": "s3cr3t-Value-4242", "Q": `quo"ted`}
	for msg, want := range map[string]string{
		`path "/x/s3cr3t-Val..." is too long`:      `path "/x/[REDACTED]" is too long`,
		`path "/x/s3cr3t-Value-4242/y" not found`:  `path "/x/[REDACTED]/y" not found`,
		`path "…lue-4242/y" is too long`:           `path "[REDACTED]/y" is too long`,
		`value "quo\"ted" and quo"ted`:             `value "[REDACTED]" and [REDACTED]`,
		`nothing here: s3c... is too short to say`: `nothing here: s3c... is too short to say`,
	} {
		if got := redactSecrets(msg, secrets); got != want {
			t.Errorf("redactSecrets(%q) = %q, want %q", msg, got, want)
		}
	}
}

// TestCLISecretEnvFromProcessEnv checks that --secret-env and --env NAME
// read the tool's real process environment (the default getenv).
func TestCLISecretEnvFromProcessEnv(t *testing.T) {
	const secret = "proc-env-Secret-77"
	t.Setenv("SANDBOX_CLI_TEST_TOKEN", secret)
	t.Setenv("SANDBOX_CLI_TEST_PLAIN", "plain-value")
	url := providers(t)["memory"]
	id := createSandbox(t, url)
	var out, errb bytes.Buffer
	a := newApp(nil, &out, &errb)
	r := invokeApp(t, a, url, "exec", id, "--secret-env", "SANDBOX_CLI_TEST_TOKEN", "--env", "SANDBOX_CLI_TEST_PLAIN", "--",
		"sh", "-c", `echo "$SANDBOX_CLI_TEST_TOKEN $SANDBOX_CLI_TEST_PLAIN"`)
	if r.code != 0 || r.stdout != "[REDACTED] plain-value\n" || strings.Contains(r.stderr, secret) {
		t.Errorf("exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
	}
}
