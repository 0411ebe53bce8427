package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"

	"github.com/spf13/cobra"

	"github.com/sandboxkit/sandbox"
)

// eventJSON is one line of "watch --json".
type eventJSON struct {
	Time  *time.Time `json:"time,omitempty"`
	Kind  string     `json:"kind"`
	Path  string     `json:"path"`
	IsDir bool       `json:"dir,omitempty"`
}

// quoteIfOdd quotes a name with characters that would break a line of
// output (a newline in a file name) or hide (control characters); other
// names are printed as they are.
func quoteIfOdd(s string) string {
	if strings.ContainsFunc(s, func(r rune) bool { return !unicode.IsPrint(r) && r != ' ' }) {
		return strconv.Quote(s)
	}
	return s
}

func (a *app) watchCmd() *cobra.Command {
	var recursive bool
	var buffer int
	cmd := &cobra.Command{
		Use:   "watch ID DIR",
		Short: "Print changes under a directory of a sandbox until interrupted",
		Long: `watch prints one line per change under DIR (relative to the sandbox's home
unless absolute): the kind (create, write, remove, rename, chmod, overflow)
and the absolute path, a directory with a trailing "/". A rename prints
"rename" for the old name and "create" for the new one; "overflow" means
changes were lost (the terminal or pipe read too slowly, or the provider's
queue overflowed) and DIR should be rescanned. With --json each line is a
JSON object {time, kind, path, dir}. Providers that poll (daytona, docker)
report changes up to their polling interval late and see a rename as a
remove and a create. It runs until interrupted (Ctrl-C exits 130).`,
		Example: `  sandbox watch sbx-1234 . -r
  sandbox watch sbx-1234 /tmp --json`,
		Args:              exactArgs(2, "ID DIR"),
		ValidArgsFunction: a.completeIDs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if buffer < 0 {
				return usagef("--buffer %d: must not be negative", buffer)
			}
			return a.withSandbox(cmd.Context(), args[0], nil, func(_ *sandbox.Client, sb *sandbox.Sandbox) error {
				ctx := cmd.Context()
				seq, err := sb.Watch(ctx, args[1], sandbox.WatchOptions{Recursive: recursive, Buffer: buffer})
				if err != nil {
					return err
				}
				for ev, err := range seq {
					if err != nil {
						return err
					}
					if a.jsonOut {
						j := eventJSON{Kind: string(ev.Kind), Path: ev.Path, IsDir: ev.IsDir}
						if !ev.Time.IsZero() {
							t := ev.Time.UTC()
							j.Time = &t
						}
						b, err := json.Marshal(j)
						if err != nil {
							return err
						}
						if _, err := fmt.Fprintf(a.stdout, "%s\n", b); err != nil {
							return fmt.Errorf("writing the event: %w", err)
						}
						continue
					}
					p := ev.Path
					if ev.IsDir && p != "/" {
						p += "/"
					}
					if _, err := fmt.Fprintf(a.stdout, "%s\t%s\n", ev.Kind, quoteIfOdd(p)); err != nil {
						return fmt.Errorf("writing the event: %w", err)
					}
				}
				return ctx.Err()
			})
		},
	}
	cmd.Flags().BoolVarP(&recursive, "recursive", "r", false, "watch the directories below DIR too, including new ones")
	cmd.Flags().IntVar(&buffer, "buffer", 0, "events held for a slow reader before they give way to one overflow line (0: the library's default)")
	return cmd
}

// procJSON is one process of "ps --json".
type procJSON struct {
	PID       int        `json:"pid"`
	StartedAt *time.Time `json:"started_at,omitempty"`
	Handle    bool       `json:"handle"`
	Terminal  string     `json:"terminal,omitempty"`
	Args      []string   `json:"args"`
}

func (a *app) psCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "ps ID",
		Short: "List the processes running in a sandbox",
		Long: `ps lists the processes running in a sandbox, by PID: when each started, whether
it is a handle (a process started through this library, which "run" and
AttachProcess can follow by PID) and its command line.`,
		Example:           `  sandbox ps sbx-1234`,
		Args:              exactArgs(1, "ID"),
		ValidArgsFunction: a.completeIDs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.withSandboxCtl(cmd.Context(), "listing processes", args[0], func(ctx context.Context, sb *sandbox.Sandbox) error {
				list, err := sb.Processes(ctx)
				if err != nil {
					return err
				}
				if a.jsonOut {
					out := make([]procJSON, len(list))
					for i, p := range list {
						out[i] = procJSON{PID: p.PID, Handle: p.Handle, Terminal: p.Terminal, Args: p.Args}
						if out[i].Args == nil {
							out[i].Args = []string{}
						}
						if !p.StartedAt.IsZero() {
							t := p.StartedAt.UTC()
							out[i].StartedAt = &t
						}
					}
					return a.printJSON(out)
				}
				tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "PID\tSTARTED\tHANDLE\tARGS")
				for _, p := range list {
					handle := "-"
					if p.Handle {
						handle = "yes"
					}
					args := make([]string, len(p.Args))
					for i, s := range p.Args {
						args[i] = quoteIfOdd(s)
					}
					line := strings.Join(args, " ")
					if len(a.secrets) > 0 {
						line = redactSecrets(line, a.secrets)
					}
					fmt.Fprintf(tw, "%d\t%s\t%s\t%s\n", p.PID, formatTime(p.StartedAt), handle, line)
				}
				return tw.Flush()
			})
		},
	}
}
