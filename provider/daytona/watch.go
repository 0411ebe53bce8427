package daytona

import (
	"bytes"
	"context"
	"iter"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sandboxkit/sandbox/driver"
	"github.com/sandboxkit/sandbox/internal/pollwatch"
	"github.com/sandboxkit/sandbox/sberrors"
)

// WatchInterval is how often Watch lists a watched directory: Daytona's
// toolbox has no file watch, so the adapter polls (Capabilities.WatchLatency).
const WatchInterval = 500 * time.Millisecond

// Watch emulates a directory watch by listing dir through the toolbox
// every WatchInterval and reporting the differences (see package
// internal/pollwatch): an event comes up to WatchInterval late, a rename
// is reported as a remove and a create, a change undone within one
// interval is not seen, and a recursive watch lists at most
// pollwatch.MaxDirs directories per poll (one toolbox call each).
func (r *Runtime) Watch(ctx context.Context, id, dir string, req *driver.WatchRequest) (iter.Seq2[driver.FileEvent, error], error) {
	return pollwatch.Watch(ctx, r, id, dir, req, r.watchInterval())
}

// psScript lists the background processes Start left records for under
// the scratch directory ($1) that have not exited: for each, the PID
// Start gave it, the start time of its launcher (in clock ticks since
// boot, /proc's field 22) and the command line of the command the
// launcher runs (its child; the launcher itself when timeout(1) is
// missing), its arguments separated by \037. The first line is the boot
// time.
const psScript = `cd "$1" 2>/dev/null || exit 0
bt=$(sed -n 's/^btime //p' /proc/stat 2>/dev/null)
echo "btime ${bt:-0}"
for f in p*.pid; do
  [ -f "$f" ] || continue
  n=${f#p}; n=${n%.pid}
  case $n in ''|*[!0-9]*) continue;; esac
  [ -e "p$n.exit" ] && continue
  pid=$(cat "$f" 2>/dev/null)
  case $pid in ''|*[!0-9]*) continue;; esac
  st=$(sed 's/^.*) //' "/proc/$pid/stat" 2>/dev/null) || continue
  [ -n "$st" ] || continue
  set -- $st
  [ "$1" = Z ] && continue
  start=$(echo "$st" | cut -d' ' -f20)
  a=$pid
  c=$(cat "/proc/$pid/task/$pid/children" 2>/dev/null); c=${c%% *}
  [ -n "$c" ] && [ -r "/proc/$c/cmdline" ] && a=$c
  printf 'proc %s %s ' "$n" "$start"
  tr '\000\n' '\037 ' < "/proc/$a/cmdline" 2>/dev/null
  echo
done
`

// clockTicks is USER_HZ, the unit of /proc's start times (100 on Linux).
const clockTicks = 100

// Processes lists the background processes Start started (toolbox
// session commands) that still run, by the PID Start gave them, which
// Attach follows: each is a handle. It reads the launcher's records and
// /proc with one command. Processes the SDK did not start this way (what
// Exec runs, daemons of the image) are not listed: Daytona's toolbox has
// no process list.
func (r *Runtime) Processes(ctx context.Context, id string) ([]driver.ProcessInfo, error) {
	root, err := r.scratchDir(ctx, id)
	if err != nil {
		return nil, r.clean(err)
	}
	// A process this Runtime just started may not have written its pid
	// record yet (its launcher runs after Start returned): the list is
	// read again until it shows every such process still running, for at
	// most startGrace after its Start.
	for {
		var out, errb bytes.Buffer
		st, err := r.Exec(ctx, id, &driver.Command{Args: []string{"sh", "-c", psScript, "sh", root}, Dir: "/",
			Stdout: &out, Stderr: &errb, Timeout: 30 * time.Second})
		if err != nil {
			return nil, err
		}
		if st.ExitCode != 0 {
			return nil, sberrors.Errorf(sberrors.Internal, "daytona: processes: listing exited %d: %s", st.ExitCode, strings.TrimSpace(errb.String()))
		}
		list := parsePS(out.String())
		if !r.starts.missing(id, list) {
			return list, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// startLog remembers the processes a Runtime started in the last seconds,
// for Processes (see there).
type startLog struct {
	mu sync.Mutex
	m  map[string]map[*proc]time.Time // sandbox id → process → when started
}

// startGrace is how long after its Start a process not yet listed is
// waited for: its launcher runs as a toolbox session command, which a
// loaded host can start seconds late (10 s was seen not to be enough).
const startGrace = 30 * time.Second

func (l *startLog) add(id string, p *proc) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.m == nil {
		l.m = map[string]map[*proc]time.Time{}
	}
	if l.m[id] == nil {
		l.m[id] = map[*proc]time.Time{}
	}
	l.m[id][p] = time.Now()
}

// missing reports whether a process started lately in sandbox id, and
// still running as far as its handle knows, is not in list. It forgets
// the processes that ended, that are in list (they have started), and
// that are past startGrace.
func (l *startLog) missing(id string, list []driver.ProcessInfo) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for p, at := range l.m[id] {
		select {
		case <-p.done:
			delete(l.m[id], p)
			continue
		default:
		}
		if time.Since(at) > startGrace {
			delete(l.m[id], p)
			continue
		}
		if slices.ContainsFunc(list, func(pi driver.ProcessInfo) bool { return pi.PID == p.pid }) {
			delete(l.m[id], p)
			continue
		}
		return true
	}
	if len(l.m[id]) == 0 {
		delete(l.m, id)
	}
	return false
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
		f := strings.SplitN(rest, " ", 3)
		if len(f) < 2 {
			continue
		}
		pid, err := strconv.Atoi(f[0])
		if err != nil || pid <= 0 {
			continue
		}
		p := driver.ProcessInfo{PID: pid, Handle: true}
		if ticks, err := strconv.ParseInt(f[1], 10, 64); err == nil && !boot.IsZero() {
			p.StartedAt = boot.Add(time.Duration(ticks) * time.Second / clockTicks)
		}
		if len(f) == 3 && f[2] != "" {
			p.Args = strings.Split(strings.TrimSuffix(f[2], "\x1f"), "\x1f")
		}
		list = append(list, p)
	}
	slices.SortFunc(list, func(a, b driver.ProcessInfo) int { return a.PID - b.PID })
	return list
}
