package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/internal/signame"
)

func (a *app) shellCmd() *cobra.Command {
	var dir string
	var env, secretEnv []string
	var keep bool
	cmd := &cobra.Command{
		Use:   "shell [ID] [flags] [-- PROGRAM [ARG...]]",
		Short: "Open an interactive shell (a terminal) in a sandbox",
		Long: `shell opens the sandbox user's login shell (or PROGRAM) on a terminal in the
sandbox and connects it to yours: keys go to the sandbox as typed (Ctrl-C
interrupts the program in the sandbox, not the tool), its output comes back,
and window size changes are passed on. The tool exits with the shell's exit
status (128+N when signal N ended it). Your terminal is put back as it was on
every exit.

Without ID, a new sandbox is created for the shell and destroyed when the
shell exits (as "docker run --rm -it" does); --keep keeps it instead and
prints its id on stderr. With ID the sandbox is left as it is.

When stdin is not a terminal, its bytes are typed into the sandbox's terminal
as they come (no raw mode), which scripts and tests use.`,
		Example: `  sandbox shell sbx-1234
  sandbox shell                       # a throw-away sandbox
  sandbox shell sbx-1234 -- python3   # a REPL on a terminal
  sandbox shell sbx-1234 --dir /tmp --secret-env GITHUB_TOKEN`,
		Args: func(cmd *cobra.Command, args []string) error {
			if dash := cmd.ArgsLenAtDash(); dash > 1 || (dash < 0 && len(args) > 1) {
				return usagef("shell: want [ID] [-- PROGRAM [ARG...]], got %d arguments before the program", max(dash, len(args)))
			}
			return nil
		},
		ValidArgsFunction: a.completeIDs,
		RunE: func(cmd *cobra.Command, args []string) error {
			em, secrets, err := a.envFlags(env, secretEnv)
			if err != nil {
				return err
			}
			var id string
			program := args
			if dash := cmd.ArgsLenAtDash(); dash == 1 || (dash < 0 && len(args) == 1) {
				id, program = args[0], args[1:]
			} else if dash == 0 {
				program = args
			}
			opts := sandbox.TerminalOptions{Args: program, Dir: dir, Env: em, SecretEnv: secrets}
			ctx := cmd.Context()
			if id != "" {
				if keep {
					return usagef("--keep: only for a sandbox the shell creates (no ID)")
				}
				return a.withSandbox(ctx, id, secrets, func(_ *sandbox.Client, sb *sandbox.Sandbox) error {
					return a.shell(ctx, sb, opts)
				})
			}
			cctx, end := a.ctl(ctx, "creating a sandbox")
			c, err := a.client(cctx)
			if err != nil {
				return end(err)
			}
			defer c.Close()
			sb, err := c.Create(cctx, sandbox.CreateOptions{})
			if err = end(err); err != nil {
				return err
			}
			if keep {
				fmt.Fprintf(a.stderr, "sandbox: shell in %s (kept after the shell exits)\n", sb.ID())
			} else {
				defer func() {
					dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), a.timeout())
					defer cancel()
					if err := sb.Destroy(dctx); err != nil {
						a.printError(err)
					}
				}()
			}
			return a.shell(ctx, sb, opts)
		},
	}
	cmd.Flags().StringVar(&dir, "dir", "", "working directory (default: the sandbox's home)")
	cmd.Flags().StringArrayVar(&env, "env", nil, envHelp)
	cmd.Flags().StringArrayVar(&secretEnv, "secret-env", nil, secretEnvHelp)
	cmd.Flags().BoolVar(&keep, "keep", false, "without ID: keep the sandbox the shell creates (its id is printed on stderr)")
	return cmd
}

// shell runs a terminal in sb connected to the tool's streams until its
// program exits (or ctx ends), and returns its exit status as an
// *exitError.
func (a *app) shell(ctx context.Context, sb *sandbox.Sandbox, opts sandbox.TerminalOptions) error {
	in, _ := a.stdin.(*os.File)
	out, _ := a.stdout.(*os.File)
	sizeFD := -1
	switch {
	case out != nil && term.IsTerminal(int(out.Fd())):
		sizeFD = int(out.Fd())
	case in != nil && term.IsTerminal(int(in.Fd())):
		sizeFD = int(in.Fd())
	}
	if sizeFD >= 0 {
		if w, h, err := term.GetSize(sizeFD); err == nil && w > 0 && h > 0 {
			opts.Cols, opts.Rows = clampSize(w), clampSize(h)
		}
	}
	opts.Output = a.stdout
	sctx, end := a.ctl(ctx, "starting the terminal")
	t, err := sb.StartTerminal(sctx, opts)
	if err = end(err); err != nil {
		return err
	}
	defer t.Close()
	if a.stdinTTY && in != nil {
		// Raw mode: every key, Ctrl-C included, goes to the sandbox's
		// terminal, whose line discipline acts on it. Restored on every
		// way out of here (the tool's own signals end ctx, which ends
		// the wait below).
		old, err := term.MakeRaw(int(in.Fd()))
		if err != nil {
			return fmt.Errorf("shell: raw mode: %w", err)
		}
		defer func() { _ = term.Restore(int(in.Fd()), old) }()
	}
	if sizeFD >= 0 {
		stop := watchResize(func() {
			if w, h, err := term.GetSize(sizeFD); err == nil && w > 0 && h > 0 {
				rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				_ = t.Resize(rctx, clampSize(h), clampSize(w))
				cancel()
			}
		})
		defer stop()
	}
	if a.stdin != nil {
		// A Read of stdin cannot be interrupted: the copy ends at EOF, on
		// a failed Write (the terminal ended), or with the process.
		go func() {
			buf := make([]byte, 4096)
			for {
				n, err := a.stdin.Read(buf)
				if n > 0 {
					if _, werr := t.WriteContext(ctx, buf[:n]); werr != nil {
						return
					}
				}
				if err != nil {
					if !a.stdinTTY && errors.Is(err, io.EOF) {
						// Piped input ended: end of input for the
						// terminal, as Ctrl-D at an empty line.
						_, _ = t.WriteContext(ctx, []byte{4})
					}
					return
				}
			}
		}()
	}
	st, err := t.Wait(ctx)
	if err != nil {
		return err
	}
	code := st.ExitCode
	switch {
	case st.TimedOut:
		code = exitTimeout
	case st.Signal > 0 && st.Signal < exitSignalBase:
		code = exitSignalBase + int(st.Signal)
		if a.stdinTTY {
			fmt.Fprint(a.stderr, "\r\n")
		}
		fmt.Fprintf(a.stderr, "sandbox: shell: the program was killed by signal %s (%d); exiting %d\n", signame.Name(st.Signal), int(st.Signal), code)
	case code < 0 || code > 255:
		code = exitSignaled
	}
	if code != 0 {
		return &exitError{code}
	}
	return nil
}

// clampSize fits a terminal dimension into what a window size holds.
func clampSize(n int) uint16 {
	return uint16(min(max(n, 1), 0xffff))
}
