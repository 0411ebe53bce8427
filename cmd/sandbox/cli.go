package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/internal/signame"
)

// Exit statuses of the tool itself. A command's own status passes through
// exec unchanged; these never collide with it (see the package doc).
const (
	exitTimeout     = 124 // the command's timeout ended it, as timeout(1)
	exitToolFailure = 125 // the tool failed (usage, provider, I/O)
	exitInterrupted = 130 // the tool was interrupted (SIGINT/SIGTERM)
	exitSignaled    = 137 // a signal the provider does not name ended the command
	exitSignalBase  = 128 // plus the signal's number, when the provider names it

)

// app is one invocation of the tool: its streams, its environment and how it
// reaches a provider. Tests build one with their own streams.
type app struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	// stdinTTY and stderrTTY report whether stdin and stderr are terminals:
	// exec passes stdin through only when it is not one, cp draws a
	// progress bar only when stderr is one.
	stdinTTY, stderrTTY bool
	getenv              func(string) string
	// open opens the provider named by a URL; sandbox.Open by default.
	open func(ctx context.Context, url string, opts ...sandbox.Option) (*sandbox.Client, error)

	// Global flags.
	url         string
	jsonOut     bool
	callTimeout time.Duration // --call-timeout
	exitCode    int           // set by exec to pass a command's status through

	// secrets holds the values of the variables named by --secret-env in
	// this invocation, so that printError redacts them too.
	secrets map[string]string
	// redactors wrap stdout and stderr from the first secret envFlags
	// reads to the end of run; envFlags gives them each secret.
	redactors []*redactWriter
}

func newApp(stdin io.Reader, stdout, stderr io.Writer) *app {
	return &app{
		stdin: stdin, stdout: stdout, stderr: stderr,
		stdinTTY:  isTerminal(stdin),
		stderrTTY: isTerminal(stderr),
		getenv:    os.Getenv,
		open:      sandbox.Open,
	}
}

func isTerminal(v any) bool {
	f, ok := v.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// exitError carries a status to exit with, without printing anything: a
// command's exit code passed through by exec.
type exitError struct{ code int }

func (e *exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

// usageError marks bad usage (flags, arguments) so it is reported with the
// InvalidArgument code.
type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

func usagef(format string, args ...any) error {
	return &usageError{fmt.Errorf(format, args...)}
}

// run executes the tool with args (without the program name) and returns
// the process exit status.
//
// Once a verb reads a --secret-env variable, everything the tool prints
// goes through redactWriters that replace its value, on top of the
// library's own redaction of command output and errors: no path to stdout
// or stderr can carry a secret whole.
func (a *app) run(ctx context.Context, args []string) int {
	stdout, stderr := a.stdout, a.stderr
	defer func() {
		for _, r := range a.redactors {
			r.Flush()
		}
		a.stdout, a.stderr, a.redactors = stdout, stderr, nil
	}()
	root := a.rootCmd()
	root.SetArgs(args)
	root.SetIn(a.stdin)
	root.SetOut(a.stdout)
	root.SetErr(a.stderr)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return 0
	}
	if ee, ok := errors.AsType[*exitError](err); ok {
		return ee.code
	}
	a.printError(err)
	if ctx.Err() != nil && errors.Is(err, context.Canceled) {
		return exitInterrupted
	}
	return exitToolFailure
}

// printError writes err as one line naming its code, or as a JSON object
// with --json. The values of --secret-env variables are redacted from it.
func (a *app) printError(err error) {
	code := sandbox.CodeOf(err).String()
	if _, ok := errors.AsType[*usageError](err); ok || isCobraUsage(err) {
		code = sandbox.InvalidArgument.String()
	}
	if _, ok := errors.AsType[*callTimeoutError](err); ok {
		code = sandbox.DeadlineExceeded.String()
	}
	msg := strings.Join(strings.Fields(redactSecrets(err.Error(), a.secrets)), " ")
	if a.jsonOut {
		b, _ := json.Marshal(map[string]any{"error": map[string]string{"code": code, "message": msg}})
		fmt.Fprintf(a.stderr, "%s\n", b)
		return
	}
	fmt.Fprintf(a.stderr, "sandbox: %s: %s\n", code, msg)
}

// isCobraUsage recognises the errors cobra returns for unknown commands and
// flags, which are not typed.
func isCobraUsage(err error) bool {
	s := err.Error()
	for _, p := range []string{"unknown command", "unknown flag", "unknown shorthand", "invalid argument", "flag needs an argument", "accepts ", "requires at least", "required flag"} {
		if strings.Contains(s, p) {
			return true
		}
	}
	return false
}

func (a *app) rootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "sandbox",
		Short: "Create and drive code-execution sandboxes on any provider",
		Long: `sandbox creates, inspects and drives sandboxes on any provider of
github.com/sandboxkit/sandbox, and serves them to models as an MCP server.

The provider is --url, else $SANDBOX_URL, else local:// (the embedded local
provider). Other URLs: memory:// (in-process fake), e2b:// ($E2B_API_KEY),
daytona:// ($DAYTONA_API_KEY), docker:// (the engine at $DOCKER_HOST).

Every wait on the provider's control plane (connecting, create with its
retries of a busy or unreachable provider, attach, ls, info, pause, resume,
rm, timeout, run start, run status, run kill) is bounded by --call-timeout,
2m unless given: past it the tool fails with DeadlineExceeded saying what
timed out. A create the provider keeps refusing for a transient reason (busy,
rate limited, unreachable) is retried with backoff for as long as a try can
start within the bound. When a create times out after its request was sent,
the tool first makes sure the provider left no sandbox behind (the providers
look for it for up to 15s, then destroy it), so it may exit that much later.
A command run by exec is bounded by its own --timeout instead, and a cp by
its progress (it fails when no bytes move for 2m).

Exit status: the tool's own failures exit 125 after one line naming the error's
code; exec exits with the command's status (124 when its timeout ended it, 126
and 127 as shells report a program that cannot run or is missing, 128+N when
signal N ended it, 137 when a signal the provider does not name ended it).`,
		Example: `  id=$(sandbox create --label owner=me)
  sandbox exec "$id" -- python3 -c 'print(1)'
  sandbox cp ./data.csv "$id":data.csv
  sandbox rm "$id"`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &usageError{err} })
	root.PersistentFlags().StringVar(&a.url, "url", "", "provider URL (default $SANDBOX_URL, else local://)")
	root.PersistentFlags().BoolVar(&a.jsonOut, "json", false, "print machine-readable JSON")
	root.PersistentFlags().DurationVar(&a.callTimeout, "call-timeout", defaultCallTimeout, "bound on each wait for the provider's control plane (connect, create and its retries, attach, ls, info, pause, resume, rm, timeout, run start/status/kill)")
	root.PersistentPreRunE = func(*cobra.Command, []string) error {
		if a.callTimeout <= 0 {
			return usagef("--call-timeout %v: must be positive", a.callTimeout)
		}
		return nil
	}
	root.AddCommand(a.createCmd(), a.lsCmd(), a.infoCmd(), a.execCmd(), a.cpCmd(),
		a.pauseCmd(), a.resumeCmd(), a.rmCmd(), a.timeoutCmd(), a.runCmd(), a.shellCmd(), a.mcpCmd(),
		a.watchCmd(), a.psCmd(), a.topCmd(),
		a.snapshotCmd(), a.snapshotsCmd(), a.snapshotRmCmd(), a.forkCmd())
	return root
}

// providerURL is --url, else $SANDBOX_URL, else local://.
func (a *app) providerURL() string {
	if a.url != "" {
		return a.url
	}
	if u := a.getenv("SANDBOX_URL"); u != "" {
		return u
	}
	return "local://"
}

// client opens the provider, within --call-timeout; the caller closes it.
// Create's retries of a transient refusal may last as long as the bound.
func (a *app) client(ctx context.Context) (*sandbox.Client, error) {
	ctx, end := a.ctl(ctx, "connecting to "+a.providerScheme())
	c, err := a.open(ctx, a.providerURL(), sandbox.WithCallTimeouts(sandbox.CallTimeouts{CreateRetry: a.timeout()}))
	return c, end(err)
}

// providerScheme names the provider for messages: its URL's scheme, never
// the rest of the URL (which may hold credentials).
func (a *app) providerScheme() string {
	u := a.providerURL()
	if i := strings.Index(u, "://"); i > 0 && i <= 32 {
		return u[:i] + "://"
	}
	return "the provider"
}

// withSandbox opens the provider and attaches to the sandbox id, within
// --call-timeout, and calls f with it; f runs on ctx, without that bound.
// secrets are the --secret-env values the handle redacts from the output
// and errors of what f does with it.
func (a *app) withSandbox(ctx context.Context, id string, secrets map[string]string, f func(c *sandbox.Client, sb *sandbox.Sandbox) error) error {
	return a.attach(ctx, id, sandbox.AttachOptions{SecretEnv: secrets}, f)
}

// attach is withSandbox with the attach options spelled out.
func (a *app) attach(ctx context.Context, id string, opts sandbox.AttachOptions, f func(c *sandbox.Client, sb *sandbox.Sandbox) error) error {
	actx, end := a.ctl(ctx, "attaching to "+id)
	c, err := a.client(actx)
	if err != nil {
		return end(err)
	}
	defer c.Close()
	sb, err := c.AttachWith(actx, id, opts)
	if err = end(err); err != nil {
		return err
	}
	return f(c, sb)
}

// withSandboxCtl is withSandbox for a verb that is a control-plane call
// itself (info, pause, resume, timeout): the whole of it, f included, is
// bounded by --call-timeout, and f gets the bounded context. The handle
// owns the sandbox (AttachOptions.Own): naming a sandbox to pause, resume
// or extend is the deliberate act that takes charge of it.
func (a *app) withSandboxCtl(ctx context.Context, what, id string, f func(ctx context.Context, sb *sandbox.Sandbox) error) error {
	ctx, end := a.ctl(ctx, what)
	return end(a.attach(ctx, id, sandbox.AttachOptions{Own: true}, func(_ *sandbox.Client, sb *sandbox.Sandbox) error { return f(ctx, sb) }))
}

// completeIDs completes a sandbox id argument from the provider's list.
func (a *app) completeIDs(cmd *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
	ctx, cancel := context.WithTimeout(cmd.Context(), 5*time.Second)
	defer cancel()
	c, err := a.client(ctx)
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	defer c.Close()
	var out []cobra.Completion
	for info, err := range c.List(ctx, sandbox.ListOptions{}) {
		if err != nil {
			break
		}
		if strings.HasPrefix(info.ID, toComplete) {
			out = append(out, cobra.CompletionWithDesc(info.ID, string(info.State)))
		}
	}
	return out, cobra.ShellCompDirectiveNoFileComp
}

// parsePairs parses k=v flags into a map; what names the flag in errors.
func parsePairs(what string, pairs []string) (map[string]string, error) {
	if len(pairs) == 0 {
		return nil, nil
	}
	m := make(map[string]string, len(pairs))
	for _, p := range pairs {
		k, v, ok := strings.Cut(p, "=")
		if !ok || k == "" {
			return nil, usagef("--%s %q: want KEY=VALUE", what, p)
		}
		m[k] = v
	}
	return m, nil
}

// envNameRE is what an environment variable's name may look like (the
// library's rule).
var envNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// envFlags reads the command's environment from --env and --secret-env.
// --env takes KEY=VALUE, or KEY alone for the value of KEY in the tool's
// own environment (as docker run -e KEY does), which keeps the value out
// of the process list. --secret-env takes names only: each value comes
// from the tool's environment, is never on the command line, and is
// recorded so that every error the tool prints redacts it; the caller
// passes the secrets to the library, which redacts them from output.
func (a *app) envFlags(env, secretNames []string) (plain, secret map[string]string, err error) {
	for _, p := range env {
		k, v, ok := strings.Cut(p, "=")
		if !ok {
			if !envNameRE.MatchString(k) {
				return nil, nil, usagef("--env %q: want KEY=VALUE, or the name of a variable of the tool's environment", p)
			}
			if v = a.getenv(k); v == "" {
				return nil, nil, usagef("--env %s: %s is unset or empty in the tool's environment (give %s=VALUE for a value of your own)", k, k, k)
			}
		} else if k == "" {
			return nil, nil, usagef("--env %q: want KEY=VALUE", p)
		}
		if plain == nil {
			plain = map[string]string{}
		}
		plain[k] = v
	}
	for _, k := range secretNames {
		if !envNameRE.MatchString(k) {
			return nil, nil, usagef("--secret-env %q: want the name of an environment variable (%s)", printableArg(k), envNameRE)
		}
		if _, dup := plain[k]; dup {
			return nil, nil, usagef("--secret-env %s: %s is given by --env too", k, k)
		}
		v := a.getenv(k)
		if v == "" {
			return nil, nil, usagef("--secret-env %s: %s is unset or empty in the tool's environment", k, k)
		}
		if secret == nil {
			secret = map[string]string{}
		}
		secret[k] = v
		a.addSecret(k, v, true)
	}
	return plain, secret, nil
}

// addSecret records the secret value v, known as key, so that the errors
// the tool prints redact it, and with streams everything else it prints
// from now on (not for mcp, whose stdout is the protocol: its server
// redacts its results itself).
func (a *app) addSecret(key, v string, streams bool) {
	if a.secrets == nil {
		a.secrets = map[string]string{}
	}
	a.secrets[key] = v
	if !streams {
		return
	}
	if a.redactors == nil {
		a.redactors = []*redactWriter{newRedactWriter(a.stdout, nil), newRedactWriter(a.stderr, nil)}
		a.stdout, a.stderr = a.redactors[0], a.redactors[1]
	}
	for _, r := range a.redactors {
		r.add(v)
	}
}

// printableArg shortens and quotes an argument for an error message.
func printableArg(s string) string {
	const max = 64
	if len(s) > max {
		s = s[:max] + "..."
	}
	return strings.Trim(strconv.Quote(s), `"`)
}

// printable returns s as it is when every rune of it prints, else
// Go-quoted (without the surrounding quotes): a table cell holds what a
// provider or a sandbox chose (ids, states, labels), and a control
// character in it (an ESC starting an OSC 52 clipboard write or a CSI
// screen rewrite, a tab shifting the columns) must never reach the
// terminal raw.
func printable(s string) string {
	if !strings.ContainsFunc(s, func(r rune) bool { return !unicode.IsPrint(r) }) {
		return s
	}
	q := strconv.Quote(s)
	return q[1 : len(q)-1]
}

// redactSecrets replaces each secret value in s with [REDACTED], longest
// first so that a secret containing another is replaced whole, in the
// forms it takes in plain text and inside a Go- or JSON-quoted string (an
// error message quotes what it is about). A message that shortens a long
// input cuts it with "..." or "…": a piece of a secret (4 bytes or more)
// that ends at such a cut, or starts right after one, is redacted too.
func redactSecrets(s string, secrets map[string]string) string {
	const minPiece = 4
	var forms []string
	for _, v := range secrets {
		if v == "" {
			continue
		}
		vs := []string{v}
		if q := strconv.Quote(v); q[1:len(q)-1] != v {
			vs = append(vs, q[1:len(q)-1])
		}
		if b, err := json.Marshal(v); err == nil && string(b[1:len(b)-1]) != v {
			vs = append(vs, string(b[1:len(b)-1]))
		}
		for _, f := range vs {
			forms = append(forms, f)
			for k := minPiece; k < len(f); k++ {
				for _, cut := range []string{"...", "…"} {
					forms = append(forms, f[:k]+cut, cut+f[len(f)-k:])
				}
			}
		}
	}
	if len(forms) == 0 {
		return s
	}
	sort.Slice(forms, func(i, j int) bool { return len(forms[i]) > len(forms[j]) })
	pairs := make([]string, 0, 2*len(forms))
	for _, f := range forms {
		pairs = append(pairs, f, "[REDACTED]")
	}
	return strings.NewReplacer(pairs...).Replace(s)
}

// redactWriter replaces secret values in a byte stream before passing it
// on, whatever the writes' boundaries: it holds back only a tail that may
// still grow into a secret (a proper prefix of one) until the next Write
// or Flush. It is safe for concurrent use.
type redactWriter struct {
	mu      sync.Mutex
	w       io.Writer
	secrets [][]byte // longest first
	pending []byte
}

// newRedactWriter returns w redacting the values of secrets; call Flush at
// the end of the stream.
func newRedactWriter(w io.Writer, secrets map[string]string) *redactWriter {
	r := &redactWriter{w: w}
	for _, v := range secrets {
		r.add(v)
	}
	return r
}

// add makes r redact the value v too from now on.
func (r *redactWriter) add(v string) {
	if v == "" {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.secrets = append(r.secrets, []byte(v))
	sort.SliceStable(r.secrets, func(i, j int) bool { return len(r.secrets[i]) > len(r.secrets[j]) })
}

// Write redacts p, with what an earlier Write held back, and writes all
// but a tail that may be the start of a secret.
func (r *redactWriter) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.secrets) == 0 && len(r.pending) == 0 {
		return r.w.Write(p)
	}
	r.pending = append(r.pending, p...)
	out, rest := r.scan(false)
	r.pending = append(r.pending[:0], rest...)
	if len(out) > 0 {
		if _, err := r.w.Write(out); err != nil {
			return 0, err
		}
	}
	return len(p), nil
}

// Flush writes what Write held back.
func (r *redactWriter) Flush() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.pending) == 0 {
		return nil
	}
	out, _ := r.scan(true)
	r.pending = r.pending[:0]
	_, err := r.w.Write(out)
	return err
}

// scan copies pending with every secret replaced, trying the longest
// first at each position; unless final it stops where the rest of pending
// is a proper prefix of a secret, and returns that rest.
func (r *redactWriter) scan(final bool) (out, rest []byte) {
	b := r.pending
	out = make([]byte, 0, len(b))
	for i := 0; i < len(b); {
		matched := false
		for _, s := range r.secrets {
			if bytes.HasPrefix(b[i:], s) {
				out = append(out, "[REDACTED]"...)
				i += len(s)
				matched = true
				break
			}
			if !final && len(b)-i < len(s) && bytes.HasPrefix(s, b[i:]) {
				return out, b[i:]
			}
		}
		if !matched {
			out = append(out, b[i])
			i++
		}
	}
	return out, nil
}

// defaultCallTimeout bounds each control-plane wait unless --call-timeout
// says otherwise: as long as a cold start of a remote sandbox may take.
const defaultCallTimeout = 2 * time.Minute

// callTimeoutError reports a control-plane wait that --call-timeout ended.
type callTimeoutError struct {
	what   string
	d      time.Duration
	err    error         // what the call returned when its time was up
	gaveUp time.Duration // set when retries stopped short of the bound, since the next would pass it
}

func (e *callTimeoutError) Error() string {
	if e.gaveUp > 0 {
		return fmt.Sprintf("%s timed out: the provider refused it for a transient reason until another try could no longer start within --call-timeout %v (gave up after %v): %v",
			e.what, e.d, e.gaveUp.Round(time.Millisecond), e.err)
	}
	return fmt.Sprintf("%s timed out after %v (--call-timeout): %v", e.what, e.d, e.err)
}

// Unwrap makes the error match context.DeadlineExceeded and the call's own
// error.
func (e *callTimeoutError) Unwrap() []error { return []error{context.DeadlineExceeded, e.err} }

// retriesExhausted reports a create the library stopped retrying because
// the next try could not start within --call-timeout (a transient refusal:
// Unavailable or ResourceExhausted, with nothing created) as a timeout,
// which is what ended it.
func (a *app) retriesExhausted(what string, start time.Time, err error) error {
	if _, ok := errors.AsType[*callTimeoutError](err); ok || errors.Is(err, sandbox.ErrOutcomeUnknown) {
		return err
	}
	switch sandbox.CodeOf(err) {
	case sandbox.Unavailable, sandbox.ResourceExhausted:
		return &callTimeoutError{what: what, d: a.timeout(), err: err, gaveUp: max(time.Since(start), time.Millisecond)}
	}
	return err
}

// timeout is the bound of each control-plane wait.
func (a *app) timeout() time.Duration {
	if a.callTimeout > 0 {
		return a.callTimeout
	}
	return defaultCallTimeout
}

// ctl bounds the control-plane wait what (connecting, create with its
// retries, attach, list, pause, resume, destroy, lease) by --call-timeout.
// end releases the context and turns an error the bound caused into one
// that says the wait timed out. Bounds nest: the outermost one that
// expired reports it.
func (a *app) ctl(ctx context.Context, what string) (context.Context, func(error) error) {
	d := a.timeout()
	cctx, cancel := context.WithTimeout(ctx, d)
	return cctx, func(err error) error {
		defer cancel()
		if err == nil || ctx.Err() != nil || cctx.Err() == nil {
			return err
		}
		if _, ok := errors.AsType[*callTimeoutError](err); ok {
			return err
		}
		switch sandbox.CodeOf(err) {
		case sandbox.InvalidArgument, sandbox.NotFound, sandbox.AlreadyExists, sandbox.PermissionDenied,
			sandbox.FailedPrecondition, sandbox.Unimplemented:
			return err // a definite answer, not a wait cut short
		}
		return &callTimeoutError{what: what, d: d, err: err}
	}
}

// infoJSON is the --json shape of a sandbox.
type infoJSON struct {
	ID        string            `json:"id"`
	Provider  string            `json:"provider"`
	Template  string            `json:"template,omitempty"`
	State     string            `json:"state"`
	Labels    map[string]string `json:"labels,omitempty"`
	CreatedAt *time.Time        `json:"created_at,omitempty"`
	LeaseEnd  *time.Time        `json:"lease_end,omitempty"`
	Home      string            `json:"home,omitempty"`
	Isolation string            `json:"isolation,omitempty"`
	Detail    map[string]string `json:"detail,omitempty"`
	// Network is the egress policy in force, as the provider reports it.
	Network *networkJSON `json:"network,omitempty"`
	// BrokeredSecrets says where each brokered secret goes, never its value.
	BrokeredSecrets []brokeredJSON `json:"brokered_secrets,omitempty"`
}

// networkJSON is a NetworkPolicy in the JSON output.
type networkJSON struct {
	Mode  string   `json:"mode"`
	Allow []string `json:"allow,omitempty"`
	Deny  []string `json:"deny,omitempty"`
}

// brokeredJSON is a brokered secret in the JSON output: no value.
type brokeredJSON struct {
	Hosts       []string `json:"hosts"`
	Header      string   `json:"header"`
	Env         string   `json:"env,omitempty"`
	Placeholder string   `json:"placeholder,omitempty"`
}

func toJSON(i sandbox.Info) infoJSON {
	j := infoJSON{ID: i.ID, Provider: i.Provider, Template: i.Template, State: string(i.State),
		Labels: i.Labels, Home: i.Home, Isolation: i.Isolation, Detail: i.Detail}
	if !i.CreatedAt.IsZero() {
		t := i.CreatedAt.UTC()
		j.CreatedAt = &t
	}
	if !i.LeaseEnd.IsZero() {
		t := i.LeaseEnd.UTC()
		j.LeaseEnd = &t
	}
	if n := i.Network; n != nil {
		j.Network = &networkJSON{Mode: string(n.Mode), Allow: n.Allow, Deny: n.Deny}
	}
	for _, b := range i.BrokeredSecrets {
		j.BrokeredSecrets = append(j.BrokeredSecrets, brokeredJSON{Hosts: b.Hosts, Header: b.Header, Env: b.Env, Placeholder: b.Placeholder})
	}
	return j
}

// printJSON prints v as indented JSON, with the values of --secret-env
// variables redacted in the forms JSON gives them.
func (a *app) printJSON(v any) error {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("encoding JSON: %w", err)
	}
	out := b.Bytes()
	if len(a.secrets) > 0 {
		out = []byte(redactSecrets(b.String(), a.secrets))
	}
	if _, err := a.stdout.Write(out); err != nil {
		return fmt.Errorf("writing JSON: %w", err)
	}
	return nil
}

func formatLabels(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + m[k]
	}
	return strings.Join(parts, ",")
}

func formatTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

func (a *app) createCmd() *cobra.Command {
	var template, fromSnapshot string
	var labels, env, secretEnv []string
	var timeout time.Duration
	var nf netFlags
	cmd := &cobra.Command{
		Use:   "create",
		Short: "Create a sandbox and print its id",
		Example: `  sandbox create
  sandbox create --label project=demo --timeout 30m --env LANG=C.UTF-8
  OPENAI_API_KEY=... sandbox create --secret-env OPENAI_API_KEY
  API_KEY=... sandbox create --allow-host pypi.org --allow-host '*.pythonhosted.org' \
      --allow-host api.example.com --broker-secret API_KEY=api.example.com
  sandbox --url e2b:// create --template code-interpreter-v1
  sandbox create --from-snapshot snap-1234`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			lm, err := parsePairs("label", labels)
			if err != nil {
				return err
			}
			em, secrets, err := a.envFlags(env, secretEnv)
			if err != nil {
				return err
			}
			if timeout < 0 {
				return usagef("--timeout %v: must not be negative", timeout)
			}
			if template != "" && fromSnapshot != "" {
				return usagef("--template %q and --from-snapshot %q: a sandbox starts from one or the other", template, fromSnapshot)
			}
			opts := sandbox.CreateOptions{Template: template, FromSnapshot: fromSnapshot, Labels: lm, Env: em, SecretEnv: secrets, Timeout: timeout}
			if err := nf.options(a, &opts, em, secrets, true); err != nil {
				return err
			}
			ctx, end := a.ctl(cmd.Context(), "create")
			c, err := a.client(ctx)
			if err != nil {
				return end(err)
			}
			defer c.Close()
			start := time.Now()
			sb, err := c.Create(ctx, opts)
			if err = end(err); err != nil {
				return a.retriesExhausted("create", start, err)
			}
			if a.jsonOut {
				return a.printJSON(toJSON(sb.Info()))
			}
			_, err = fmt.Fprintln(a.stdout, sb.ID())
			return err
		},
	}
	cmd.Flags().StringVar(&template, "template", "", "template (image) to create from; empty: the provider's default")
	cmd.Flags().StringVar(&fromSnapshot, "from-snapshot", "", "id of a snapshot (sandbox snapshot) to create from, instead of a template")
	cmd.Flags().StringArrayVar(&labels, "label", nil, "label KEY=VALUE (repeatable)")
	cmd.Flags().StringArrayVar(&env, "env", nil, "environment variable KEY=VALUE for every command, or KEY for the value of KEY in the tool's environment (repeatable; a VALUE given here is visible to other users in the process list)")
	cmd.Flags().StringArrayVar(&secretEnv, "secret-env", nil, secretEnvHelp)
	cmd.Flags().DurationVar(&timeout, "timeout", 0, "lease: how long the sandbox lives unless extended (0: the provider's default)")
	nf.add(cmd.Flags())
	return cmd
}

func (a *app) lsCmd() *cobra.Command {
	var labels, states []string
	cmd := &cobra.Command{
		Use:     "ls",
		Aliases: []string{"list"},
		Short:   "List sandboxes",
		Example: `  sandbox ls
  sandbox ls --label project=demo --state running
  sandbox ls --json | jq -r '.[].id'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			lm, err := parsePairs("label", labels)
			if err != nil {
				return err
			}
			var st []sandbox.State
			for _, s := range states {
				switch sandbox.State(s) {
				case sandbox.StateStarting, sandbox.StateRunning, sandbox.StatePaused, sandbox.StateError, sandbox.StateUnknown:
					st = append(st, sandbox.State(s))
				default:
					return usagef("--state %q: want starting, running, paused, error or unknown", s)
				}
			}
			list := []infoJSON{}
			var infos []sandbox.Info
			ctx, end := a.ctl(cmd.Context(), "ls")
			err = end(func() error {
				c, err := a.client(ctx)
				if err != nil {
					return err
				}
				defer c.Close()
				for info, err := range c.List(ctx, sandbox.ListOptions{Labels: lm, States: st}) {
					if err != nil {
						return err
					}
					infos = append(infos, info)
					list = append(list, toJSON(info))
				}
				return nil
			}())
			if err != nil {
				return err
			}
			if a.jsonOut {
				return a.printJSON(list)
			}
			return printInfos(a.stdout, infos)
		},
	}
	cmd.Flags().StringArrayVar(&labels, "label", nil, "keep sandboxes with label KEY=VALUE (repeatable, all must match)")
	cmd.Flags().StringArrayVar(&states, "state", nil, "keep sandboxes in this state: starting, running, paused, error (repeatable)")
	return cmd
}

// printInfos writes ls's table. Each cell holds what a provider chose
// (ids, states, templates): printable escapes its control characters.
func printInfos(w io.Writer, infos []sandbox.Info) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTATE\tTEMPLATE\tCREATED\tLEASE END\tLABELS")
	for _, i := range infos {
		tmpl := i.Template
		if tmpl == "" {
			tmpl = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", printable(i.ID), printable(string(i.State)), printable(tmpl), formatTime(i.CreatedAt), formatTime(i.LeaseEnd), printable(formatLabels(i.Labels)))
	}
	return tw.Flush()
}

func (a *app) infoCmd() *cobra.Command {
	return &cobra.Command{
		Use:               "info ID",
		Short:             "Describe a sandbox",
		Example:           `  sandbox info sbx-1234 --json`,
		Args:              exactArgs(1, "ID"),
		ValidArgsFunction: a.completeIDs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.withSandboxCtl(cmd.Context(), "info", args[0], func(_ context.Context, sb *sandbox.Sandbox) error {
				i := sb.Info()
				if a.jsonOut {
					return a.printJSON(toJSON(i))
				}
				tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
				fmt.Fprintf(tw, "id:\t%s\nprovider:\t%s\nstate:\t%s\ntemplate:\t%s\ncreated:\t%s\nlease end:\t%s\nhome:\t%s\nisolation:\t%s\nlabels:\t%s\n",
					i.ID, i.Provider, i.State, i.Template, formatTime(i.CreatedAt), formatTime(i.LeaseEnd), i.Home, i.Isolation, formatLabels(i.Labels))
				if n := i.Network; n != nil {
					fmt.Fprintf(tw, "network:\t%s", n.Mode)
					if len(n.Allow) > 0 {
						fmt.Fprintf(tw, " allow=%s", strings.Join(n.Allow, ","))
					}
					if len(n.Deny) > 0 {
						fmt.Fprintf(tw, " deny=%s", strings.Join(n.Deny, ","))
					}
					fmt.Fprintln(tw)
				}
				for _, b := range i.BrokeredSecrets {
					fmt.Fprintf(tw, "brokered secret:\t%s to %s", b.Header, strings.Join(b.Hosts, ","))
					if b.Env != "" {
						fmt.Fprintf(tw, " (env %s)", b.Env)
					}
					fmt.Fprintln(tw)
				}
				keys := make([]string, 0, len(i.Detail))
				for k := range i.Detail {
					keys = append(keys, k)
				}
				sort.Strings(keys)
				for _, k := range keys {
					fmt.Fprintf(tw, "detail.%s:\t%s\n", k, i.Detail[k])
				}
				return tw.Flush()
			})
		},
	}
}

// exactArgs is cobra.ExactArgs with an error that names the arguments.
func exactArgs(n int, names string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != n {
			return usagef("%s: want %s, got %d argument(s)", cmd.CommandPath(), names, len(args))
		}
		return nil
	}
}

func minArgs(n int, names string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) < n {
			return usagef("%s: want %s, got %d argument(s)", cmd.CommandPath(), names, len(args))
		}
		return nil
	}
}

// execJSON is the --json shape of exec's result. Each stream is carried
// exactly: as a string in Stdout (Stderr) when its bytes are valid UTF-8,
// else base64 in StdoutBase64 (StderrBase64), since a JSON string cannot
// hold other bytes; StdoutEncoding (StderrEncoding) says which, "utf-8" or
// "base64".
type execJSON struct {
	ExitCode        int     `json:"exit_code"`
	Stdout          *string `json:"stdout,omitempty"`
	StdoutBase64    *string `json:"stdout_base64,omitempty"`
	StdoutEncoding  string  `json:"stdout_encoding"`
	Stderr          *string `json:"stderr,omitempty"`
	StderrBase64    *string `json:"stderr_base64,omitempty"`
	StderrEncoding  string  `json:"stderr_encoding"`
	StdoutTruncated bool    `json:"stdout_truncated,omitempty"`
	StderrTruncated bool    `json:"stderr_truncated,omitempty"`
	TimedOut        bool    `json:"timed_out"`
	Signal          int     `json:"signal,omitempty"` // the signal that ended the command, when the provider names it
	DurationMS      int64   `json:"duration_ms"`
}

// The values of stdout_encoding and stderr_encoding.
const (
	encodingUTF8   = "utf-8"
	encodingBase64 = "base64"
)

// encodeStream returns b as exec --json carries it: the text, or its
// base64 when b is not valid UTF-8, and the encoding's name.
func encodeStream(b []byte) (text, b64 *string, encoding string) {
	if utf8.Valid(b) {
		s := string(b)
		return &s, nil, encodingUTF8
	}
	s := base64.StdEncoding.EncodeToString(b)
	return nil, &s, encodingBase64
}

func toExecJSON(res *sandbox.Result) execJSON {
	j := execJSON{ExitCode: res.ExitCode, StdoutTruncated: res.StdoutTruncated, StderrTruncated: res.StderrTruncated,
		TimedOut: res.TimedOut, Signal: int(res.Signal), DurationMS: res.Duration.Milliseconds()}
	j.Stdout, j.StdoutBase64, j.StdoutEncoding = encodeStream(res.Stdout)
	j.Stderr, j.StderrBase64, j.StderrEncoding = encodeStream(res.Stderr)
	return j
}

// envHelp describes --env on the verbs that start commands.
const envHelp = "environment variable KEY=VALUE, or KEY for the value of KEY in the tool's environment (repeatable; a VALUE given here is visible to other users in the process list)"

// secretEnvHelp describes --secret-env on the verbs that start commands.
const secretEnvHelp = "name of a variable of the tool's environment to pass to the command, its value redacted as [REDACTED] from everything the tool prints (repeatable; the value is never on the command line)"

func (a *app) execCmd() *cobra.Command {
	var dir string
	var env, secretEnv []string
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "exec ID [flags] -- PROGRAM [ARG...]",
		Short: "Run a command in a sandbox, streaming its output, and exit with its status",
		Long: `exec runs PROGRAM with its arguments (an argv, no shell) in the sandbox and
streams its stdout and stderr live to the tool's. stdin is passed through when
it is not a terminal. The tool exits with the command's exit status, 124 when
--timeout ended it, 126/127 when the program cannot run or is missing.

--env KEY=VALUE sets a variable; its value is visible to other local users in
the process list. --env KEY takes the value of KEY in the tool's environment
instead, and --secret-env KEY does too and also redacts the value (as
[REDACTED]) from the command's output and from every message the tool prints.
The tool keeps no secrets between invocations: to redact a variable given to
"sandbox create --secret-env", name it with --secret-env again here.

With --json the output is captured and printed as one JSON object:
  {"exit_code": 0, "stdout": "...", "stdout_encoding": "utf-8",
   "stderr_base64": "...", "stderr_encoding": "base64", "timed_out": false,
   "duration_ms": 12}
Each stream is carried byte for byte: when its bytes are valid UTF-8,
stdout_encoding is "utf-8" and stdout holds them as a string; otherwise
stdout_encoding is "base64" and stdout_base64 holds them in standard base64
(RFC 4648, padded), and stdout is absent. The same holds for stderr.
stdout_truncated and stderr_truncated are true when output past the capture
cap (10 MiB per stream) was dropped; signal names the signal that ended the
command when the provider knows it.`,
		Example: `  sandbox exec sbx-1234 -- python3 -c 'print(1)'
  sandbox exec sbx-1234 --dir /tmp --env DEBUG=1 -- sh -c 'ls -la'
  sandbox exec sbx-1234 --secret-env GITHUB_TOKEN -- git clone https://github.com/org/private
  sandbox --json exec sbx-1234 -- cat image.png | jq -r .stdout_base64 | base64 -d > image.png
  echo 'print(2+2)' | sandbox exec sbx-1234 -- python3 -
  sandbox exec sbx-1234 --timeout 5s -- sleep 60; echo $?   # 124`,
		Args:              minArgs(2, "ID -- PROGRAM [ARG...]"),
		ValidArgsFunction: a.completeIDs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if dash := cmd.ArgsLenAtDash(); dash > 1 {
				return usagef("exec: want ID -- PROGRAM [ARG...], got %d arguments before --", dash)
			}
			em, secrets, err := a.envFlags(env, secretEnv)
			if err != nil {
				return err
			}
			if timeout < 0 {
				return usagef("--timeout %v: must not be negative", timeout)
			}
			c := sandbox.Command{Args: args[1:], Dir: dir, Env: em, SecretEnv: secrets, Timeout: timeout}
			if !a.stdinTTY && a.stdin != nil {
				c.Stdin = a.stdin
			}
			if !a.jsonOut {
				c.Stdout, c.Stderr = a.stdout, a.stderr
			}
			return a.withSandbox(cmd.Context(), args[0], secrets, func(_ *sandbox.Client, sb *sandbox.Sandbox) error {
				res, err := sb.Exec(cmd.Context(), c)
				if err != nil {
					return err
				}
				code := res.ExitCode
				switch {
				case res.TimedOut:
					code = exitTimeout
				case res.Signal > 0 && res.Signal < exitSignalBase:
					// As a shell reports a command a signal ended.
					code = exitSignalBase + int(res.Signal)
					fmt.Fprintf(a.stderr, "sandbox: exec: the command was killed by signal %s (%d); exiting %d\n", signame.Name(res.Signal), int(res.Signal), code)
				case code < 0 || code > 255:
					// A signal ended the command and the provider does not
					// say which: report it as a shell reports SIGKILL.
					fmt.Fprintln(a.stderr, "sandbox: exec: the command was ended by a signal (the provider does not say which); exiting 137")
					code = exitSignaled
				}
				if a.jsonOut {
					if err := a.printJSON(toExecJSON(res)); err != nil {
						return err
					}
				}
				if code != 0 {
					return &exitError{code}
				}
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&dir, "dir", "", "working directory (default: the sandbox's home)")
	cmd.Flags().StringArrayVar(&env, "env", nil, envHelp)
	cmd.Flags().StringArrayVar(&secretEnv, "secret-env", nil, secretEnvHelp)
	cmd.Flags().DurationVar(&timeout, "timeout", 0, "end the command after this long and exit 124 (0: the client's default, 10m)")
	return cmd
}

func (a *app) pauseCmd() *cobra.Command {
	return &cobra.Command{
		Use:               "pause ID",
		Short:             "Pause (freeze) a sandbox",
		Example:           `  sandbox pause sbx-1234`,
		Args:              exactArgs(1, "ID"),
		ValidArgsFunction: a.completeIDs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.withSandboxCtl(cmd.Context(), "pause", args[0], func(ctx context.Context, sb *sandbox.Sandbox) error {
				return sb.Pause(ctx)
			})
		},
	}
}

func (a *app) resumeCmd() *cobra.Command {
	return &cobra.Command{
		Use:               "resume ID",
		Short:             "Resume a paused sandbox",
		Example:           `  sandbox resume sbx-1234`,
		Args:              exactArgs(1, "ID"),
		ValidArgsFunction: a.completeIDs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.withSandboxCtl(cmd.Context(), "resume", args[0], func(ctx context.Context, sb *sandbox.Sandbox) error {
				return sb.Resume(ctx)
			})
		},
	}
}

func (a *app) rmCmd() *cobra.Command {
	return &cobra.Command{
		Use:     "rm ID...",
		Aliases: []string{"destroy"},
		Short:   "Destroy sandboxes (a sandbox already gone is not an error)",
		Example: `  sandbox rm sbx-1234 sbx-5678
  sandbox ls --label project=demo --json | jq -r '.[].id' | xargs sandbox rm`,
		Args:              minArgs(1, "ID..."),
		ValidArgsFunction: a.completeIDs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			c, err := a.client(ctx)
			if err != nil {
				return err
			}
			defer c.Close()
			var errs []error
			for _, id := range args {
				dctx, end := a.ctl(ctx, "rm "+id)
				if err := end(c.Destroy(dctx, id)); err != nil && !errors.Is(err, sandbox.ErrNotFound) {
					errs = append(errs, err)
				}
			}
			return errors.Join(errs...)
		},
	}
}

func (a *app) timeoutCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "timeout ID DURATION",
		Short: "Extend a sandbox's lease to end no sooner than DURATION from now",
		Long: `timeout makes the sandbox's lease end no sooner than DURATION from now. It only
ever extends: a lease that already ends later is left as it is.`,
		Example:           `  sandbox timeout sbx-1234 1h`,
		Args:              exactArgs(2, "ID DURATION"),
		ValidArgsFunction: a.completeIDs,
		RunE: func(cmd *cobra.Command, args []string) error {
			d, err := time.ParseDuration(args[1])
			if err != nil || d <= 0 {
				return usagef("timeout: DURATION %q: want a positive duration such as 30m or 2h", args[1])
			}
			return a.withSandboxCtl(cmd.Context(), "extending the lease", args[0], func(ctx context.Context, sb *sandbox.Sandbox) error {
				if err := sb.SetTimeout(ctx, d); err != nil {
					return err
				}
				if a.jsonOut {
					return a.printJSON(toJSON(sb.Info()))
				}
				return nil
			})
		},
	}
}
