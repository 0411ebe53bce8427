package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

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
	url      string
	jsonOut  bool
	exitCode int // set by exec to pass a command's status through
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
func (a *app) run(ctx context.Context, args []string) int {
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
// with --json.
func (a *app) printError(err error) {
	code := sandbox.CodeOf(err).String()
	if _, ok := errors.AsType[*usageError](err); ok || isCobraUsage(err) {
		code = sandbox.InvalidArgument.String()
	}
	msg := strings.Join(strings.Fields(err.Error()), " ")
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
daytona:// ($DAYTONA_API_KEY).

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
	root.AddCommand(a.createCmd(), a.lsCmd(), a.infoCmd(), a.execCmd(), a.cpCmd(),
		a.pauseCmd(), a.resumeCmd(), a.rmCmd(), a.timeoutCmd(), a.runCmd(), a.mcpCmd())
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

// client opens the provider; the caller closes it.
func (a *app) client(ctx context.Context) (*sandbox.Client, error) {
	return a.open(ctx, a.providerURL())
}

// withSandbox attaches to the sandbox id and calls f with it.
func (a *app) withSandbox(ctx context.Context, id string, f func(c *sandbox.Client, sb *sandbox.Sandbox) error) error {
	c, err := a.client(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	sb, err := c.Attach(ctx, id)
	if err != nil {
		return err
	}
	return f(c, sb)
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
	return j
}

func (a *app) printJSON(v any) error {
	enc := json.NewEncoder(a.stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
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
	var template string
	var labels, env []string
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "create",
		Short: "Create a sandbox and print its id",
		Example: `  sandbox create
  sandbox create --label project=demo --timeout 30m --env LANG=C.UTF-8
  sandbox --url e2b:// create --template code-interpreter-v1`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			lm, err := parsePairs("label", labels)
			if err != nil {
				return err
			}
			em, err := parsePairs("env", env)
			if err != nil {
				return err
			}
			if timeout < 0 {
				return usagef("--timeout %v: must not be negative", timeout)
			}
			ctx := cmd.Context()
			c, err := a.client(ctx)
			if err != nil {
				return err
			}
			defer c.Close()
			sb, err := c.Create(ctx, sandbox.CreateOptions{Template: template, Labels: lm, Env: em, Timeout: timeout})
			if err != nil {
				return err
			}
			if a.jsonOut {
				return a.printJSON(toJSON(sb.Info()))
			}
			_, err = fmt.Fprintln(a.stdout, sb.ID())
			return err
		},
	}
	cmd.Flags().StringVar(&template, "template", "", "template (image) to create from; empty: the provider's default")
	cmd.Flags().StringArrayVar(&labels, "label", nil, "label KEY=VALUE (repeatable)")
	cmd.Flags().StringArrayVar(&env, "env", nil, "environment variable KEY=VALUE for every command (repeatable)")
	cmd.Flags().DurationVar(&timeout, "timeout", 0, "lease: how long the sandbox lives unless extended (0: the provider's default)")
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
				case sandbox.StateStarting, sandbox.StateRunning, sandbox.StatePaused, sandbox.StateError:
					st = append(st, sandbox.State(s))
				default:
					return usagef("--state %q: want starting, running, paused or error", s)
				}
			}
			ctx := cmd.Context()
			c, err := a.client(ctx)
			if err != nil {
				return err
			}
			defer c.Close()
			list := []infoJSON{}
			var infos []sandbox.Info
			for info, err := range c.List(ctx, sandbox.ListOptions{Labels: lm, States: st}) {
				if err != nil {
					return err
				}
				infos = append(infos, info)
				list = append(list, toJSON(info))
			}
			if a.jsonOut {
				return a.printJSON(list)
			}
			tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tSTATE\tTEMPLATE\tCREATED\tLEASE END\tLABELS")
			for _, i := range infos {
				tmpl := i.Template
				if tmpl == "" {
					tmpl = "-"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", i.ID, i.State, tmpl, formatTime(i.CreatedAt), formatTime(i.LeaseEnd), formatLabels(i.Labels))
			}
			return tw.Flush()
		},
	}
	cmd.Flags().StringArrayVar(&labels, "label", nil, "keep sandboxes with label KEY=VALUE (repeatable, all must match)")
	cmd.Flags().StringArrayVar(&states, "state", nil, "keep sandboxes in this state: starting, running, paused, error (repeatable)")
	return cmd
}

func (a *app) infoCmd() *cobra.Command {
	return &cobra.Command{
		Use:               "info ID",
		Short:             "Describe a sandbox",
		Example:           `  sandbox info sbx-1234 --json`,
		Args:              exactArgs(1, "ID"),
		ValidArgsFunction: a.completeIDs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.withSandbox(cmd.Context(), args[0], func(_ *sandbox.Client, sb *sandbox.Sandbox) error {
				i := sb.Info()
				if a.jsonOut {
					return a.printJSON(toJSON(i))
				}
				tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
				fmt.Fprintf(tw, "id:\t%s\nprovider:\t%s\nstate:\t%s\ntemplate:\t%s\ncreated:\t%s\nlease end:\t%s\nhome:\t%s\nisolation:\t%s\nlabels:\t%s\n",
					i.ID, i.Provider, i.State, i.Template, formatTime(i.CreatedAt), formatTime(i.LeaseEnd), i.Home, i.Isolation, formatLabels(i.Labels))
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

// execJSON is the --json shape of exec's result.
type execJSON struct {
	ExitCode        int    `json:"exit_code"`
	Stdout          string `json:"stdout"`
	Stderr          string `json:"stderr"`
	StdoutTruncated bool   `json:"stdout_truncated,omitempty"`
	StderrTruncated bool   `json:"stderr_truncated,omitempty"`
	TimedOut        bool   `json:"timed_out"`
	Signal          int    `json:"signal,omitempty"` // the signal that ended the command, when the provider names it
	DurationMS      int64  `json:"duration_ms"`
}

func (a *app) execCmd() *cobra.Command {
	var dir string
	var env []string
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "exec ID [flags] -- PROGRAM [ARG...]",
		Short: "Run a command in a sandbox, streaming its output, and exit with its status",
		Long: `exec runs PROGRAM with its arguments (an argv, no shell) in the sandbox and
streams its stdout and stderr live to the tool's. stdin is passed through when
it is not a terminal. The tool exits with the command's exit status, 124 when
--timeout ended it, 126/127 when the program cannot run or is missing. With
--json the output is captured and printed as one JSON object instead.`,
		Example: `  sandbox exec sbx-1234 -- python3 -c 'print(1)'
  sandbox exec sbx-1234 --dir /tmp --env DEBUG=1 -- sh -c 'ls -la'
  echo 'print(2+2)' | sandbox exec sbx-1234 -- python3 -
  sandbox exec sbx-1234 --timeout 5s -- sleep 60; echo $?   # 124`,
		Args:              minArgs(2, "ID -- PROGRAM [ARG...]"),
		ValidArgsFunction: a.completeIDs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if dash := cmd.ArgsLenAtDash(); dash > 1 {
				return usagef("exec: want ID -- PROGRAM [ARG...], got %d arguments before --", dash)
			}
			em, err := parsePairs("env", env)
			if err != nil {
				return err
			}
			if timeout < 0 {
				return usagef("--timeout %v: must not be negative", timeout)
			}
			c := sandbox.Command{Args: args[1:], Dir: dir, Env: em, Timeout: timeout}
			if !a.stdinTTY && a.stdin != nil {
				c.Stdin = a.stdin
			}
			if !a.jsonOut {
				c.Stdout, c.Stderr = a.stdout, a.stderr
			}
			return a.withSandbox(cmd.Context(), args[0], func(_ *sandbox.Client, sb *sandbox.Sandbox) error {
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
					if err := a.printJSON(execJSON{ExitCode: res.ExitCode, Stdout: string(res.Stdout), Stderr: string(res.Stderr),
						StdoutTruncated: res.StdoutTruncated, StderrTruncated: res.StderrTruncated,
						TimedOut: res.TimedOut, Signal: int(res.Signal), DurationMS: res.Duration.Milliseconds()}); err != nil {
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
	cmd.Flags().StringArrayVar(&env, "env", nil, "environment variable KEY=VALUE (repeatable)")
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
			return a.withSandbox(cmd.Context(), args[0], func(_ *sandbox.Client, sb *sandbox.Sandbox) error {
				return sb.Pause(cmd.Context())
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
			return a.withSandbox(cmd.Context(), args[0], func(_ *sandbox.Client, sb *sandbox.Sandbox) error {
				return sb.Resume(cmd.Context())
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
				if err := c.Destroy(ctx, id); err != nil && !errors.Is(err, sandbox.ErrNotFound) {
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
			return a.withSandbox(cmd.Context(), args[0], func(_ *sandbox.Client, sb *sandbox.Sandbox) error {
				if err := sb.SetTimeout(cmd.Context(), d); err != nil {
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
