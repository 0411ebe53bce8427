package main

import (
	"context"
	"fmt"
	"maps"
	"time"

	"github.com/spf13/cobra"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/run"
)

// runJSON is the --json shape of a run's status.
type runJSON struct {
	ID             string `json:"id"`
	State          string `json:"state"`
	PID            int    `json:"pid,omitempty"`
	ExitCode       *int   `json:"exit_code,omitempty"`
	Killed         bool   `json:"killed,omitempty"`
	BudgetExceeded bool   `json:"budget_exceeded,omitempty"`
}

func toRunJSON(id string, st run.Status) runJSON {
	j := runJSON{ID: id, State: string(st.State), PID: st.PID, Killed: st.Killed, BudgetExceeded: st.BudgetExceeded}
	if st.State == run.Exited || st.State == run.Lost {
		code := st.ExitCode
		j.ExitCode = &code
	}
	return j
}

func (a *app) printRunStatus(id string, st run.Status) error {
	if a.jsonOut {
		return a.printJSON(toRunJSON(id, st))
	}
	line := string(st.State)
	if st.State == run.Exited || st.State == run.Lost {
		line += fmt.Sprintf(" exit=%d", st.ExitCode)
	}
	if st.Killed {
		line += " killed"
	}
	if st.BudgetExceeded {
		line += " budget-exceeded"
	}
	if st.PID != 0 {
		line += fmt.Sprintf(" pid=%d", st.PID)
	}
	_, err := fmt.Fprintln(a.stdout, line)
	return err
}

func (a *app) runCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "run",
		Short: "Durable background runs: start, status, logs, kill",
		Long: `run drives durable background runs (the run package): a command that outlives
the tool, started at most once per run id, whose status and output live in the
sandbox so that any later invocation can find them.`,
		Example: `  sandbox run start sbx-1234 train -- python3 train.py
  sandbox run status sbx-1234 train
  sandbox run logs -f sbx-1234 train
  sandbox run kill sbx-1234 train`,
	}
	cmd.AddCommand(a.runStartCmd(), a.runStatusCmd(), a.runLogsCmd(), a.runKillCmd())
	return cmd
}

// withRun attaches to the sandbox id (redacting secrets from what the
// handle returns) and opens its run runID.
func (a *app) withRun(ctx context.Context, id, runID string, secrets map[string]string, f func(r *run.Run) error) error {
	return a.withSandbox(ctx, id, secrets, func(_ *sandbox.Client, sb *sandbox.Sandbox) error {
		r, err := run.Open(ctx, sb, runID)
		if err != nil {
			return err
		}
		return f(r)
	})
}

func (a *app) runStartCmd() *cobra.Command {
	var dir string
	var env, secretEnv []string
	var budget time.Duration
	cmd := &cobra.Command{
		Use:   "start ID RUN-ID [flags] -- PROGRAM [ARG...]",
		Short: "Start a background run (starting the same run id again returns it)",
		Example: `  sandbox run start sbx-1234 build -- make -j4
  sandbox run start sbx-1234 job-7 --budget 2h --dir /work -- sh -c './long.sh > out.txt'
  sandbox run start sbx-1234 deploy --secret-env DEPLOY_TOKEN -- ./deploy.sh
  sandbox run logs --secret-env DEPLOY_TOKEN sbx-1234 deploy`,
		Args:              minArgs(3, "ID RUN-ID -- PROGRAM [ARG...]"),
		ValidArgsFunction: a.completeIDs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if dash := cmd.ArgsLenAtDash(); dash > 2 {
				return usagef("run start: want ID RUN-ID -- PROGRAM [ARG...], got %d arguments before --", dash)
			}
			em, secrets, err := a.envFlags(env, secretEnv)
			if err != nil {
				return err
			}
			if budget < 0 {
				return usagef("--budget %v: must not be negative", budget)
			}
			if len(secrets) > 0 {
				all := make(map[string]string, len(em)+len(secrets))
				maps.Copy(all, em)
				maps.Copy(all, secrets)
				em = all
			}
			// Starting is a short control action, bounded like the
			// control plane's; starting the same id again is safe.
			ctx, end := a.ctl(cmd.Context(), "run start")
			return end(a.withSandbox(ctx, args[0], secrets, func(_ *sandbox.Client, sb *sandbox.Sandbox) error {
				r, err := run.Start(ctx, sb, run.Request{ID: args[1], Command: args[2:], Dir: dir, Env: em, Budget: budget})
				if err != nil {
					return err
				}
				st, err := r.Status(ctx)
				if err != nil {
					return err
				}
				return a.printRunStatus(r.ID(), st)
			}))
		},
	}
	cmd.Flags().StringVar(&dir, "dir", "", "working directory (default: the sandbox's home)")
	cmd.Flags().StringArrayVar(&env, "env", nil, envHelp)
	cmd.Flags().StringArrayVar(&secretEnv, "secret-env", nil, "name of a variable of the tool's environment to pass to the run, its value redacted from what this invocation prints (repeatable; never on the command line); give it to run logs too to redact the run's output")
	cmd.Flags().DurationVar(&budget, "budget", 0, "the run's lifetime, enforced in the sandbox (0: 30m)")
	return cmd
}

func (a *app) runStatusCmd() *cobra.Command {
	return &cobra.Command{
		Use:               "status ID RUN-ID",
		Short:             "Print a run's state and, once done, its exit code",
		Example:           `  sandbox run status sbx-1234 build --json`,
		Args:              exactArgs(2, "ID RUN-ID"),
		ValidArgsFunction: a.completeIDs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, end := a.ctl(cmd.Context(), "run status")
			return end(a.withRun(ctx, args[0], args[1], nil, func(r *run.Run) error {
				st, err := r.Status(ctx)
				if err != nil {
					return err
				}
				return a.printRunStatus(r.ID(), st)
			}))
		},
	}
}

func (a *app) runKillCmd() *cobra.Command {
	return &cobra.Command{
		Use:               "kill ID RUN-ID",
		Short:             "End a run (killing a finished run does nothing)",
		Example:           `  sandbox run kill sbx-1234 build`,
		Args:              exactArgs(2, "ID RUN-ID"),
		ValidArgsFunction: a.completeIDs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, end := a.ctl(cmd.Context(), "run kill")
			return end(a.withRun(ctx, args[0], args[1], nil, func(r *run.Run) error {
				if err := r.Kill(ctx); err != nil {
					return err
				}
				st, err := r.Status(ctx)
				if err != nil {
					return err
				}
				return a.printRunStatus(r.ID(), st)
			}))
		},
	}
}

func (a *app) runLogsCmd() *cobra.Command {
	var follow bool
	var poll time.Duration
	var secretEnv []string
	cmd := &cobra.Command{
		Use:   "logs ID RUN-ID",
		Short: "Print a run's combined output; -f follows it until the run ends",
		Example: `  sandbox run logs sbx-1234 build
  sandbox run logs -f sbx-1234 build`,
		Args:              exactArgs(2, "ID RUN-ID"),
		ValidArgsFunction: a.completeIDs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if poll <= 0 {
				return usagef("--poll %v: must be positive", poll)
			}
			_, secrets, err := a.envFlags(nil, secretEnv)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			return a.withRun(ctx, args[0], args[1], secrets, func(r *run.Run) error {
				var off int64
				for {
					ch, err := r.ReadLogs(ctx, off, run.MaxLogBytes)
					if err != nil {
						return err
					}
					if _, err := a.stdout.Write(ch.Data); err != nil {
						return fmt.Errorf("writing stdout: %w", err)
					}
					off = ch.Next
					if ch.EOF {
						return nil
					}
					if len(ch.Data) > 0 {
						continue // more may be waiting
					}
					if !follow {
						return nil
					}
					select {
					case <-ctx.Done():
						return ctx.Err()
					case <-time.After(poll):
					}
				}
			})
		},
	}
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "keep printing new output until the run ends")
	cmd.Flags().DurationVar(&poll, "poll", 500*time.Millisecond, "how often -f asks for new output")
	cmd.Flags().StringArrayVar(&secretEnv, "secret-env", nil, "name of a variable of the tool's environment whose value is redacted (as [REDACTED]) from the output (repeatable)")
	return cmd
}
