package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/sandboxkit/sandbox"
)

// snapshotJSON is the --json shape of a snapshot.
type snapshotJSON struct {
	ID        string            `json:"id"`
	Name      string            `json:"name,omitempty"`
	Mode      string            `json:"mode"`
	Provider  string            `json:"provider"`
	Size      int64             `json:"size"` // -1: the provider does not say
	CreatedAt *time.Time        `json:"created_at,omitempty"`
	Labels    map[string]string `json:"labels,omitempty"`
	SourceID  string            `json:"source_id,omitempty"`
	Template  string            `json:"template,omitempty"`
	Detail    map[string]string `json:"detail,omitempty"`
}

func toSnapshotJSON(s sandbox.Snapshot) snapshotJSON {
	j := snapshotJSON{ID: s.ID, Name: s.Name, Mode: string(s.Mode), Provider: s.Provider, Size: s.Size,
		Labels: s.Labels, SourceID: s.SourceID, Template: s.Template, Detail: s.Detail}
	if !s.CreatedAt.IsZero() {
		t := s.CreatedAt.UTC()
		j.CreatedAt = &t
	}
	return j
}

func (a *app) snapshotCmd() *cobra.Command {
	var name, mode string
	var labels []string
	cmd := &cobra.Command{
		Use:   "snapshot ID",
		Short: "Save a sandbox as a snapshot and print the snapshot's id",
		Long: `snapshot saves the sandbox's files (mode filesystem, the default: its home,
installed packages and every other path its commands may write) or, where the
provider has it, its processes and memory too (mode full). The sandbox runs on
(or stays paused). Start sandboxes from it with "sandbox create --from-snapshot
SNAPID"; list snapshots with "sandbox snapshots" and delete one with
"sandbox snapshot-rm SNAPID".`,
		Example: `  sandbox snapshot sbx-1234 --name deps-installed --label project=demo
  sandbox create --from-snapshot "$(sandbox snapshot sbx-1234)"`,
		Args:              exactArgs(1, "ID"),
		ValidArgsFunction: a.completeIDs,
		RunE: func(cmd *cobra.Command, args []string) error {
			lm, err := parsePairs("label", labels)
			if err != nil {
				return err
			}
			switch sandbox.SnapshotMode(mode) {
			case "", sandbox.SnapshotFilesystem, sandbox.SnapshotFull:
			default:
				return usagef("--mode %q: want filesystem or full", mode)
			}
			return a.withSandboxCtl(cmd.Context(), "snapshot", args[0], func(ctx context.Context, sb *sandbox.Sandbox) error {
				snap, err := sb.Snapshot(ctx, sandbox.SnapshotOptions{Name: name, Mode: sandbox.SnapshotMode(mode), Labels: lm})
				if err != nil {
					return err
				}
				if a.jsonOut {
					return a.printJSON(toSnapshotJSON(snap))
				}
				_, err = fmt.Fprintln(a.stdout, snap.ID)
				return err
			})
		},
	}
	cmd.Flags().StringVar(&name, "name", "", "a name for people (need not be unique)")
	cmd.Flags().StringVar(&mode, "mode", "", "what to keep: filesystem (default) or full (processes and memory, where the provider has it)")
	cmd.Flags().StringArrayVar(&labels, "label", nil, "label KEY=VALUE to find the snapshot by (repeatable)")
	return cmd
}

func (a *app) snapshotsCmd() *cobra.Command {
	var labels []string
	cmd := &cobra.Command{
		Use:   "snapshots",
		Short: "List snapshots",
		Example: `  sandbox snapshots
  sandbox snapshots --label project=demo --json | jq -r '.[].id'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			lm, err := parsePairs("label", labels)
			if err != nil {
				return err
			}
			list := []snapshotJSON{}
			var snaps []sandbox.Snapshot
			ctx, end := a.ctl(cmd.Context(), "snapshots")
			err = end(func() error {
				c, err := a.client(ctx)
				if err != nil {
					return err
				}
				defer c.Close()
				for s, err := range c.ListSnapshots(ctx, sandbox.ListSnapshotsOptions{Labels: lm}) {
					if err != nil {
						return err
					}
					snaps = append(snaps, s)
					list = append(list, toSnapshotJSON(s))
				}
				return nil
			}())
			if err != nil {
				return err
			}
			if a.jsonOut {
				return a.printJSON(list)
			}
			tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tNAME\tMODE\tSOURCE\tSIZE\tCREATED\tLABELS")
			for _, s := range snaps {
				size := "-"
				if s.Size >= 0 {
					size = fmt.Sprint(s.Size)
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", s.ID, orDash(s.Name), s.Mode, orDash(s.SourceID), size, formatTime(s.CreatedAt), formatLabels(s.Labels))
			}
			return tw.Flush()
		},
	}
	cmd.Flags().StringArrayVar(&labels, "label", nil, "keep snapshots with label KEY=VALUE (repeatable, all must match)")
	return cmd
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return strings.ReplaceAll(s, "\t", " ")
}

func (a *app) snapshotRmCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "snapshot-rm SNAPID...",
		Short: "Delete snapshots (a snapshot already gone is not an error)",
		Example: `  sandbox snapshot-rm snap-1234
  sandbox snapshots --label project=demo --json | jq -r '.[].id' | xargs sandbox snapshot-rm`,
		Args: minArgs(1, "SNAPID..."),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, end := a.ctl(cmd.Context(), "snapshot-rm")
			return end(func() error {
				c, err := a.client(ctx)
				if err != nil {
					return err
				}
				defer c.Close()
				var errs []error
				for _, id := range args {
					if err := c.DeleteSnapshot(ctx, id); err != nil {
						errs = append(errs, err)
					}
				}
				return errors.Join(errs...)
			}())
		},
	}
}

func (a *app) forkCmd() *cobra.Command {
	var n int
	var labels []string
	var timeout time.Duration
	var keep bool
	cmd := &cobra.Command{
		Use:   "fork ID -n N",
		Short: "Create N sandboxes from a sandbox's current state and print their ids",
		Long: `fork creates N new sandboxes, each starting from the sandbox's current files
(natively where the provider forks, else through a snapshot that is deleted
afterwards unless --keep-snapshot). The ids are printed one per line; when some
creates fail, the ones made are printed and the tool exits 1.`,
		Example: `  sandbox fork sbx-1234 -n 4 --label attempt=fix
  for id in $(sandbox fork sbx-1234 -n 3); do sandbox exec "$id" -- make test & done; wait`,
		Args:              exactArgs(1, "ID"),
		ValidArgsFunction: a.completeIDs,
		RunE: func(cmd *cobra.Command, args []string) error {
			lm, err := parsePairs("label", labels)
			if err != nil {
				return err
			}
			if n < 1 {
				return usagef("-n %d: want at least 1", n)
			}
			if timeout < 0 {
				return usagef("--timeout %v: must not be negative", timeout)
			}
			return a.withSandboxCtl(cmd.Context(), "fork", args[0], func(ctx context.Context, sb *sandbox.Sandbox) error {
				kids, ferr := sb.Fork(ctx, n, sandbox.ForkOptions{Labels: lm, Timeout: timeout, KeepSnapshot: keep})
				if a.jsonOut {
					list := []infoJSON{}
					for _, k := range kids {
						list = append(list, toJSON(k.Info()))
					}
					if err := a.printJSON(list); err != nil {
						return err
					}
					return ferr
				}
				for _, k := range kids {
					if _, err := fmt.Fprintln(a.stdout, k.ID()); err != nil {
						return err
					}
				}
				return ferr
			})
		},
	}
	cmd.Flags().IntVarP(&n, "count", "n", 1, "how many sandboxes to create")
	cmd.Flags().StringArrayVar(&labels, "label", nil, "label KEY=VALUE for each new sandbox (repeatable)")
	cmd.Flags().DurationVar(&timeout, "timeout", 0, "lease of each new sandbox (0: the provider's default)")
	cmd.Flags().BoolVar(&keep, "keep-snapshot", false, "keep the snapshot a fork without a native fork goes through")
	return cmd
}
