package docker

import (
	"bytes"
	"context"
	"iter"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sandboxkit/sandbox/driver"
	"github.com/sandboxkit/sandbox/internal/pollwatch"
	"github.com/sandboxkit/sandbox/sberrors"
)

// WatchInterval is how often Watch lists a watched directory: images need
// not have inotify tools, so the provider polls (Capabilities.WatchLatency).
const WatchInterval = 500 * time.Millisecond

// Watch emulates a directory watch by listing dir every WatchInterval
// and reporting the differences (see package internal/pollwatch): an
// event comes up to WatchInterval late, a rename is reported as a remove
// and a create, a change undone within one interval is not seen, and a
// recursive watch lists at most pollwatch.MaxDirs directories per poll.
func (r *Runtime) Watch(ctx context.Context, id, dir string, req *driver.WatchRequest) (iter.Seq2[driver.FileEvent, error], error) {
	if err := r.owns(ctx, id); err != nil {
		return nil, err
	}
	return pollwatch.Watch(ctx, r, id, dir, req, WatchInterval)
}

// psScript lists the container's processes from /proc with one command:
// the boot time, then per process its pid, state, start time (clock
// ticks since boot), whether it is a background process Start started
// (its supervisor's record is ready and has no exit status) and its
// command line, arguments separated by \037. The command's own process
// and its ancestors (the exec that runs it) are left out.
const psScript = `bt=$(sed -n 's/^btime //p' /proc/stat 2>/dev/null)
echo "btime ${bt:-0}"
self=" "
p=$$
while [ -n "$p" ] && [ "$p" != 0 ]; do
  self="$self$p "
  st=$(sed 's/^.*) //' "/proc/$p/stat" 2>/dev/null) || break
  set -- $st
  p=$2
done
for d in /proc/[0-9]*; do
  pid=${d#/proc/}
  case "$self" in *" $pid "*) continue;; esac
  st=$(sed 's/^.*) //' "$d/stat" 2>/dev/null) || continue
  [ -n "$st" ] || continue
  set -- $st
  state=$1
  start=$(echo "$st" | cut -d' ' -f20)
  h=0
  if [ -e "` + procDir + `/$pid/ready" ] && [ ! -e "` + procDir + `/$pid/status" ]; then h=1; fi
  printf 'proc %s %s %s %s ' "$pid" "$state" "$start" "$h"
  tr '\000\n' '\037 ' < "$d/cmdline" 2>/dev/null
  echo
done
`

// clockTicks is USER_HZ, the unit of /proc's start times (100 on Linux).
const clockTicks = 100

// Processes lists the container's processes from its /proc (one exec):
// all of them but its init (PID 1, which keeps the container running),
// zombies and the listing's own. Handle marks the background processes
// Start started, listed by the PID Start gave them (their supervisor's)
// with the command line of the command they run.
func (r *Runtime) Processes(ctx context.Context, id string) ([]driver.ProcessInfo, error) {
	var out, errb bytes.Buffer
	st, err := r.Exec(ctx, id, &driver.Command{Args: []string{"sh", "-c", psScript}, Dir: "/",
		Stdout: &out, Stderr: &errb, Timeout: 30 * time.Second})
	if err != nil {
		return nil, err
	}
	if st.ExitCode != 0 {
		return nil, sberrors.Errorf(sberrors.Internal, "docker: processes: listing exited %d: %s", st.ExitCode, strings.TrimSpace(errb.String()))
	}
	return parsePS(out.String()), nil
}

// parsePS reads psScript's output.
func parsePS(s string) []driver.ProcessInfo {
	var boot time.Time
	var list []driver.ProcessInfo
	for line := range strings.Lines(s) {
		line = strings.TrimSuffix(line, "\n")
		if v, ok := strings.CutPrefix(line, "btime "); ok {
			if n, err := strconv.ParseInt(v, 10, 64); err == nil && n > 0 {
				boot = time.Unix(n, 0)
			}
			continue
		}
		rest, ok := strings.CutPrefix(line, "proc ")
		if !ok {
			continue
		}
		f := strings.SplitN(rest, " ", 5)
		if len(f) < 4 {
			continue
		}
		pid, err := strconv.Atoi(f[0])
		if err != nil || pid <= 1 || f[1] == "Z" || f[1] == "X" {
			continue
		}
		p := driver.ProcessInfo{PID: pid, Handle: f[3] == "1"}
		if ticks, err := strconv.ParseInt(f[2], 10, 64); err == nil && !boot.IsZero() {
			p.StartedAt = boot.Add(time.Duration(ticks) * time.Second / clockTicks)
		}
		if len(f) == 5 && f[4] != "" {
			p.Args = strings.Split(strings.TrimSuffix(f[4], "\x1f"), "\x1f")
		}
		// A supervisor runs "sh -c SUPERVISOR sbx WRAPPER TIMEOUT DIR
		// STDIN ARGV...": show the command it runs.
		if p.Handle && len(p.Args) > 8 && p.Args[3] == "sbx" {
			p.Args = p.Args[8:]
		}
		list = append(list, p)
	}
	slices.SortFunc(list, func(a, b driver.ProcessInfo) int { return a.PID - b.PID })
	return list
}
