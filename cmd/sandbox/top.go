package main

import (
	"context"

	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/fsbackend"
	"github.com/sandboxkit/sandbox/session"
)

// metricsJSON is a sandbox's resource use as "top --json" and the MCP
// metrics tool print it: a field the provider does not report is null,
// never 0.
type metricsJSON struct {
	ID          string    `json:"id,omitempty"`
	State       string    `json:"state,omitempty"`
	Time        time.Time `json:"time"`
	CPUSeconds  *float64  `json:"cpu_seconds" jsonschema:"CPU time used since the sandbox started, in seconds; null when the provider does not report it"`
	CPUPercent  *float64  `json:"cpu_percent" jsonschema:"recent CPU use in percent of one core; null when unknown"`
	MemoryBytes *int64    `json:"memory_bytes" jsonschema:"memory in use now; null when unknown"`
	MemoryPeak  *int64    `json:"memory_peak_bytes" jsonschema:"most memory in use at once since the sandbox started; null when unknown"`
	DiskBytes   *int64    `json:"disk_bytes" jsonschema:"disk used by the sandbox's files; null when unknown"`
	Processes   *int64    `json:"processes" jsonschema:"processes running in the sandbox; null when unknown"`
	CPULimit    *float64  `json:"cpu_limit" jsonschema:"most cores the sandbox may use; null when unknown or unlimited"`
	MemoryLimit *int64    `json:"memory_limit_bytes" jsonschema:"most memory the sandbox may use; null when unknown or unlimited"`
	DiskLimit   *int64    `json:"disk_limit_bytes" jsonschema:"most disk the sandbox may use; null when unknown or unlimited"`
	Notes       []string  `json:"notes,omitempty" jsonschema:"why fields are unknown, or how values were measured"`
	Error       string    `json:"error,omitempty"`
}

func knownInt(v int64) *int64 {
	if !sandbox.Known(v) {
		return nil
	}
	return &v
}

func knownFloat(v float64) *float64 {
	if !sandbox.Known(v) {
		return nil
	}
	return &v
}

// toMetricsJSON converts m; cpuPct is the CPU use to show (see
// Metrics.CPUPercentSince), MetricUnknown for none.
func toMetricsJSON(m sandbox.Metrics, cpuPct float64) metricsJSON {
	t := m.Time.UTC()
	if t.Year() < 1 || t.Year() > 9999 {
		// JSON cannot encode it: one such row would fail the whole
		// output (every row of top --json, the MCP tool's answer).
		t = time.Now().UTC()
		m.Notes = append(slices.Clip(m.Notes), "the sample time could not be encoded: the time is when it was printed")
	}
	j := metricsJSON{
		Time: t, CPUPercent: knownFloat(cpuPct), MemoryBytes: knownInt(m.MemoryBytes), MemoryPeak: knownInt(m.MemoryPeakBytes),
		DiskBytes: knownInt(m.DiskBytes), Processes: knownInt(m.Processes), CPULimit: knownFloat(m.CPULimit),
		MemoryLimit: knownInt(m.MemoryLimitBytes), DiskLimit: knownInt(m.DiskLimitBytes), Notes: m.Notes,
	}
	if sandbox.Known(m.CPUTime) {
		s := m.CPUTime.Seconds()
		j.CPUSeconds = &s
	}
	return j
}

// topRow is one sandbox in a refresh of top.
type topRow struct {
	info sandbox.Info
	m    sandbox.Metrics
	cpu  float64
	err  error
}

// topState is what top keeps between refreshes: the handles it attached
// and each sandbox's previous reading, for CPU%.
type topState struct {
	a       *app
	c       *sandbox.Client
	labels  map[string]string
	handles map[string]*sandbox.Sandbox
	prev    map[string]sandbox.Metrics
}

// sample lists the sandboxes and reads each one's metrics, each call
// bounded by --call-timeout. A sandbox whose metrics fail (paused, gone
// between the list and the read, a provider without metrics) gets its
// error in its row; a failed list fails the refresh.
func (ts *topState) sample(ctx context.Context) ([]topRow, error) {
	lctx, end := ts.a.ctl(ctx, "listing sandboxes")
	var infos []sandbox.Info
	err := end(func() error {
		for info, err := range ts.c.List(lctx, sandbox.ListOptions{Labels: ts.labels}) {
			if err != nil {
				return err
			}
			infos = append(infos, info)
		}
		return nil
	}())
	if err != nil {
		return nil, err
	}
	slices.SortFunc(infos, func(x, y sandbox.Info) int { return strings.Compare(x.ID, y.ID) })
	rows := make([]topRow, 0, len(infos))
	seen := map[string]bool{}
	for _, info := range infos {
		seen[info.ID] = true
		row := topRow{info: info, cpu: sandbox.MetricUnknown}
		if info.State != sandbox.StateRunning {
			rows = append(rows, row)
			continue
		}
		mctx, end := ts.a.ctl(ctx, "reading the metrics of "+info.ID)
		row.err = end(func() error {
			sb := ts.handles[info.ID]
			if sb == nil {
				var err error
				if sb, err = ts.c.Attach(mctx, info.ID); err != nil {
					return err
				}
				ts.handles[info.ID] = sb
			}
			m, err := sb.Metrics(mctx)
			if err != nil {
				return err
			}
			row.m = m
			row.cpu = m.CPUPercent
			if p, ok := ts.prev[info.ID]; ok {
				row.cpu = m.CPUPercentSince(p)
			}
			ts.prev[info.ID] = m
			return nil
		}())
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		rows = append(rows, row)
	}
	for id := range ts.handles {
		if !seen[id] {
			delete(ts.handles, id)
			delete(ts.prev, id)
		}
	}
	return rows, nil
}

func fmtBytes(v int64) string {
	if !sandbox.Known(v) {
		return "-"
	}
	const unit = 1024
	if v < unit {
		return fmt.Sprintf("%dB", v)
	}
	div, exp := int64(unit), 0
	for n := v / unit; n >= unit && exp < 3; n /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f%ci", float64(v)/float64(div), "KMGT"[exp])
}

// printTop writes one table of rows.
func printTop(w io.Writer, rows []topRow) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTATE\tCPU%\tCPU TIME\tMEM\tPEAK\tMEM LIMIT\tDISK\tPROCS")
	for _, r := range rows {
		if r.err != nil || r.info.State != sandbox.StateRunning {
			note := "-"
			if r.err != nil {
				note = "error: " + sandbox.CodeOf(r.err).String()
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t-\t-\t-\t-\t-\t-\n", printable(r.info.ID), printable(string(r.info.State)), note)
			continue
		}
		m := r.m
		cpu := "-"
		if sandbox.Known(r.cpu) {
			cpu = fmt.Sprintf("%.1f", r.cpu)
		}
		cpuTime := "-"
		if sandbox.Known(m.CPUTime) {
			cpuTime = m.CPUTime.Round(10 * time.Millisecond).String()
		}
		procs := "-"
		if sandbox.Known(m.Processes) {
			procs = fmt.Sprint(m.Processes)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", printable(r.info.ID), printable(string(r.info.State)), cpu, cpuTime,
			fmtBytes(m.MemoryBytes), fmtBytes(m.MemoryPeakBytes), fmtBytes(m.MemoryLimitBytes), fmtBytes(m.DiskBytes), procs)
	}
	return tw.Flush()
}

func topJSON(rows []topRow) []metricsJSON {
	out := make([]metricsJSON, 0, len(rows))
	for _, r := range rows {
		j := metricsJSON{ID: r.info.ID, State: string(r.info.State)}
		if r.err == nil && r.info.State == sandbox.StateRunning {
			j = toMetricsJSON(r.m, r.cpu)
			j.ID, j.State = r.info.ID, string(r.info.State)
		}
		if r.err != nil {
			j.Error = r.err.Error()
		}
		out = append(out, j)
	}
	return out
}

// clearScreen moves the cursor home and clears the terminal.
const clearScreen = "\033[H\033[2J"

func (a *app) topCmd() *cobra.Command {
	var once bool
	var interval time.Duration
	var labels []string
	cmd := &cobra.Command{
		Use:   "top",
		Short: "Show the resource use of the provider's sandboxes, refreshed",
		Long: `top lists the provider's sandboxes with their CPU use (percent of one core),
CPU time, memory now, its peak and its limit, disk used and processes,
refreshed every --interval until interrupted (Ctrl-C exits 130). A value
the provider does not report shows as "-" (null with --json), never as 0;
paused sandboxes show no values. CPU% comes from two readings of the CPU
time where the provider reports it (the first table, --once's too, from two
readings up to a second apart), else from the provider's own recent rate
(E2B, Daytona). --once prints one table (or, with --json, one JSON array) and
exits, for scripts. Every provider call is bounded by --call-timeout.`,
		Example: `  sandbox top
  sandbox top --once --json | jq '.[] | {id, memory_bytes}'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if interval <= 0 {
				return usagef("--interval %v: must be positive", interval)
			}
			lm, err := parsePairs("label", labels)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			c, err := a.client(ctx)
			if err != nil {
				return err
			}
			defer c.Close()
			ts := &topState{a: a, c: c, labels: lm, handles: map[string]*sandbox.Sandbox{}, prev: map[string]sandbox.Metrics{}}
			// A first reading, so that the first table has CPU% from CPU
			// time: its rows are discarded.
			if _, err := ts.sample(ctx); err != nil {
				return err
			}
			if err := sleepCtx(ctx, min(interval, time.Second)); err != nil {
				return err
			}
			for {
				rows, err := ts.sample(ctx)
				if err != nil {
					return err
				}
				if a.jsonOut {
					if err := a.printJSON(topJSON(rows)); err != nil {
						return err
					}
				} else {
					if !once {
						fmt.Fprint(a.stdout, clearScreen)
						fmt.Fprintf(a.stdout, "sandbox top — %s — every %v\n", time.Now().Format(time.TimeOnly), interval)
					}
					if err := printTop(a.stdout, rows); err != nil {
						return fmt.Errorf("writing the table: %w", err)
					}
				}
				if once {
					return nil
				}
				if err := sleepCtx(ctx, interval); err != nil {
					return err
				}
			}
		},
	}
	cmd.Flags().BoolVar(&once, "once", false, "print once and exit (for scripts and tests)")
	cmd.Flags().DurationVar(&interval, "interval", 2*time.Second, "time between refreshes")
	cmd.Flags().StringArrayVar(&labels, "label", nil, "keep sandboxes with label KEY=VALUE (repeatable, all must match)")
	return cmd
}

// sleepCtx waits d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// addMetricsTool adds the read-only "metrics" tool: the session
// sandbox's resource use, unknown values null.
func (s *mcpServer) addMetricsTool() {
	addTool(s, &mcp.Tool{Name: "metrics", Description: "Report the workspace sandbox's resource use: CPU time and recent CPU percent, memory now and its peak, disk used, processes, and the CPU, memory and disk limits. A value the provider does not report is null, never 0. Read-only.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true}},
		func(ctx context.Context, _ *mcp.CallToolRequest, sess *session.Session, _ *fsbackend.FilesystemBackend, _ struct{}) (metricsJSON, error) {
			m, err := sess.Sandbox().Metrics(ctx)
			if err != nil {
				return metricsJSON{}, err
			}
			return toMetricsJSON(m, m.CPUPercent), nil
		})
}
