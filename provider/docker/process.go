package docker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/client"

	"github.com/sandboxkit/sandbox/driver"
	"github.com/sandboxkit/sandbox/sberrors"
)

// procDir holds one directory per background process, named by its pid:
// out and err (the output, appended), in (a FIFO, when it reads stdin),
// pgid (the command's process group), status (its exit code, once it
// ended) and timedout (when Command.Timeout ended it).
const procDir = stateDir + "/p"

// supervisor runs a background command under the exec wrapper with its
// output going to files, and records its exit status; it survives the
// exec that launched it (the container's init adopts it).
//
//	sh -c supervisor sbx WRAPPER TIMEOUT DIR STDIN(0|1) ARGV...
const supervisor = `__sbx_w=$1 __sbx_t=$2 __sbx_c=$3 __sbx_s=$4; shift 4
if [ -n "${__sbx_launch-}" ]; then echo $$ >"$__sbx_launch"; fi
unset __sbx_launch
__sbx_d=` + procDir + `/$$
mkdir -m 0700 "$__sbx_d" || exit 1
: >"$__sbx_d/out"; : >"$__sbx_d/err"
if [ "$__sbx_s" = 1 ]; then mkfifo -m 0600 "$__sbx_d/in" || exit 1; fi
: >"$__sbx_d/ready"
if [ "$__sbx_s" = 1 ]; then exec <"$__sbx_d/in"; else exec </dev/null; fi
__sbx_pidfile=$__sbx_d/pgid sh -c "$__sbx_w" sbx "$__sbx_t" "$__sbx_d/timedout" "$__sbx_c" "$@" >>"$__sbx_d/out" 2>>"$__sbx_d/err"
echo $? >"$__sbx_d/status.new"
mv -f "$__sbx_d/status.new" "$__sbx_d/status"`

// launcher starts the supervisor detached and prints its pid once the
// supervisor's directory is ready. It runs setsid twice, in the
// foreground: the first makes a session leader, and the second, which
// cannot make another session of it, forks a child that does and leaves
// at once. Started in the background instead (with &), the supervisor and
// so the command would have SIGINT and SIGQUIT ignored, as a shell without
// job control starts its background commands, which no sh can undo. The
// supervisor writes its pid to a file named by the launcher's.
//
//	sh -c launcher sbx SUPERVISOR WRAPPER TIMEOUT DIR STDIN ARGV...
const launcher = `if [ ! -d "$4" ]; then if [ -e "$4" ]; then exit 4; fi; exit 2; fi
__sbx_sup=$1; shift
__sbx_l=` + procDir + `/launch.$$
rm -f "$__sbx_l"
__sbx_launch=$__sbx_l setsid setsid sh -c "$__sbx_sup" sbx "$@" </dev/null >/dev/null 2>&1 || exit 1
__sbx_i=0 __sbx_p=
while :; do
  if [ -z "$__sbx_p" ] && [ -s "$__sbx_l" ]; then read -r __sbx_p <"$__sbx_l"; fi
  if [ -n "$__sbx_p" ] && [ -e ` + procDir + `/$__sbx_p/ready ]; then break; fi
  __sbx_i=$((__sbx_i+1)); [ $__sbx_i -gt 1000 ] && { rm -f "$__sbx_l"; exit 1; }
  if [ -n "$__sbx_p" ]; then kill -0 "$__sbx_p" 2>/dev/null || [ -e ` + procDir + `/$__sbx_p/ready ] || { rm -f "$__sbx_l"; exit 1; }; fi
  sleep 0.01
done
rm -f "$__sbx_l"
echo "$__sbx_p"`

// follower copies a process's output from byte offsets (-1: the current
// end) to its stdout and stderr until the process has ended, and exits
// with the process's exit code. Its first byte, S, tells that it runs: an
// exec the runtime could not start (the container was being paused, say)
// writes the runtime's message instead, which must not reach the caller.
// A header line on stdout after the S gives the offsets it starts from, so
// the client can tell how much of each file it has and resume exactly.
//
//	sh -c follower sbx DIR OUTOFFSET ERROFFSET
const follower = `d=$1 oo=$2 oe=$3
printf S
[ -e "$d/ready" ] || exit 200
[ "$oo" = -1 ] && oo=$(wc -c <"$d/out")
[ "$oe" = -1 ] && oe=$(wc -c <"$d/err")
printf '%s %s\n' "$oo" "$oe"
while :; do
  fin=0; [ -e "$d/status" ] && fin=1
  n=$(wc -c <"$d/out"); if [ "$n" -gt "$oo" ]; then tail -c +$((oo+1)) "$d/out" | head -c $((n-oo)); oo=$n; fi
  n=$(wc -c <"$d/err"); if [ "$n" -gt "$oe" ]; then tail -c +$((oe+1)) "$d/err" | head -c $((n-oe)) >&2; oe=$n; fi
  [ $fin = 1 ] && exit "$(cat "$d/status")"
  sleep 0.05
done`

// followerGone is follower's exit code for a pid with no process directory.
const followerGone = 200

// signaller sends a signal to a background command's process group.
//
//	sh -c signaller sbx DIR SIGNAL
const signaller = `i=0
while [ ! -s "$1/pgid" ]; do
  [ -e "$1/status" ] && exit 0
  i=$((i+1)); [ $i -gt 500 ] && exit 1
  sleep 0.01
done
g=$(cat "$1/pgid")
[ -e "$1/status" ] && exit 0
kill -"$2" -"$g" 2>/dev/null || kill -"$2" "$g" 2>/dev/null
exit 0`

// Start starts cmd in the background under a supervisor in the container
// and follows its output. The process outlives the Client; Attach follows
// it from any client.
func (r *Runtime) Start(ctx context.Context, id string, cmd *driver.Command) (driver.ProcessHandle, error) {
	for k := range cmd.Env {
		if !envNameRE.MatchString(k) {
			return nil, fmt.Errorf("docker: start: environment variable name %q is not a shell name: %w", k, sberrors.ErrInvalidArgument)
		}
	}
	secs := "0"
	if cmd.Timeout > 0 {
		secs = strconv.FormatFloat(cmd.Timeout.Seconds(), 'f', 3, 64)
	}
	stdin := "0"
	if cmd.Stdin != nil {
		stdin = "1"
	}
	env := []string{"SANDBOXKIT_EXEC=" + newToken()}
	var keys []string
	for k, v := range cmd.Env {
		env = append(env, k+"="+v)
		keys = append(keys, k)
	}
	env = append(env, "__sbx_keep="+strings.Join(keys, " "))
	argv := append([]string{"/bin/sh", "-c", launcher, "sbx", supervisor, wrapper, secs, cmd.Dir, stdin}, commandArgv(cmd)...)
	var out, errOut limitedBuffer
	code, err := r.runExec(ctx, id, client.ExecCreateOptions{Cmd: argv, Env: env}, &out, &errOut)
	if err != nil {
		return nil, err
	}
	switch code {
	case 0:
	case fsNotFound:
		return nil, fmt.Errorf("docker: start: working directory %q does not exist: %w", cmd.Dir, sberrors.ErrNotFound)
	case fsNotDir:
		return nil, fmt.Errorf("docker: start: working directory %q: %w", cmd.Dir, sberrors.ErrNotDirectory)
	default:
		return nil, fmt.Errorf("docker: start: the supervisor did not start (exit %d): %s: %w", code, strings.TrimSpace(errOut.String()), sberrors.ErrInternal)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(out.String()))
	if err != nil {
		return nil, fmt.Errorf("docker: start: the launcher printed %q, not a pid: %w", out.String(), sberrors.ErrInternal)
	}
	h := r.newHandle(id, pid, cmd.Stdout, cmd.Stderr, 0, 0)
	if cmd.Stdin != nil {
		h.feed(cmd.Stdin)
	}
	return h, nil
}

// Attach follows a background process started by any client, from the
// output it produces after the attach.
func (r *Runtime) Attach(ctx context.Context, id string, pid int, stdout, stderr io.Writer) (driver.ProcessHandle, error) {
	if pid <= 0 {
		return nil, fmt.Errorf("docker: attach: pid %d: %w", pid, sberrors.ErrInvalidArgument)
	}
	if err := r.owns(ctx, id); err != nil {
		return nil, err
	}
	if _, err := r.cli.ContainerStatPath(ctx, id, client.ContainerStatPathOptions{Path: fmt.Sprintf("%s/%d/ready", procDir, pid)}); err != nil {
		err = r.wrap(ctx, "attach", err)
		if errors.Is(err, sberrors.ErrNotFound) {
			if _, gerr := r.inspect(ctx, id); gerr != nil {
				return nil, gerr
			}
			return nil, fmt.Errorf("docker: attach: no background process %d in sandbox %s: %w", pid, id, sberrors.ErrNotFound)
		}
		return nil, err
	}
	return r.newHandle(id, pid, stdout, stderr, -1, -1), nil
}

// runExec runs an exec to completion, without stdin, and returns its exit
// code.
func (r *Runtime) runExec(ctx context.Context, id string, opts client.ExecCreateOptions, stdout, stderr io.Writer) (int, error) {
	opts.AttachStdout, opts.AttachStderr = true, true
	att, execID, done, err := r.startExec(ctx, id, opts)
	if err != nil {
		return 0, r.wrap(ctx, "exec", err)
	}
	stop := context.AfterFunc(ctx, func() { att.Conn.Close() })
	_, err = stdcopy.StdCopy(stdout, stderr, att.Reader)
	att.Close()
	stop()
	done()
	if ctx.Err() != nil {
		return 0, fmt.Errorf("docker: exec: %w", ctx.Err())
	}
	if err != nil {
		return 0, fmt.Errorf("docker: exec: %v: %w", err, sberrors.ErrOutcomeUnknown)
	}
	return r.execExit(ctx, execID)
}

// handle follows one background process.
type handle struct {
	r    *Runtime
	id   string
	pid  int
	dir  string
	ctx  context.Context // ends at Close
	stop context.CancelFunc
	wg   sync.WaitGroup

	done   chan struct{} // closed when the follower ended
	status driver.ExitStatus
	err    error
}

func (r *Runtime) newHandle(id string, pid int, stdout, stderr io.Writer, outOff, errOff int64) *handle {
	ctx, cancel := context.WithCancel(r.ctx)
	h := &handle{r: r, id: id, pid: pid, dir: fmt.Sprintf("%s/%d", procDir, pid), ctx: ctx, stop: cancel, done: make(chan struct{})}
	h.wg.Add(1)
	go h.follow(stdout, stderr, outOff, errOff)
	return h
}

// countingWriter counts what it passes on.
type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// followRounds bounds the followers run after the process ended to fetch
// output a follower's stream lost.
const followRounds = 5

// follow runs the follower exec until the process ends, starting it again
// from the bytes already delivered when the connection breaks. Once the
// process has ended it checks that every byte of its output arrived: the
// engine gives an exec's streams a bounded time to drain after the exec
// exits (on a starved host the tail of the output was cut), so a short
// stream is followed again from where it stopped.
func (h *handle) follow(stdout, stderr io.Writer, outOff, errOff int64) {
	defer h.wg.Done()
	defer close(h.done)
	failures, rounds := 0, 0
	for round := 0; ; round++ {
		so, se := &countingWriter{w: stdout}, &countingWriter{w: stderr}
		var wo, we io.Writer = so, se
		if h.r.loseTail != nil {
			wo, we = h.r.loseTail(round, so, se)
		}
		gate := &gateWriter{w: wo}
		code, err := h.r.runExec(h.ctx, h.id, client.ExecCreateOptions{
			Cmd: []string{"/bin/sh", "-c", follower, "sbx", h.dir, strconv.FormatInt(outOff, 10), strconv.FormatInt(errOff, 10)},
		}, gate, &gatedWriter{g: gate, w: we})
		if err == nil && !gate.started {
			// The follower never ran: wait while the sandbox is paused.
			if werr := h.waitRunning(); werr != nil {
				h.err = werr
				return
			}
			continue
		}
		if err == nil && code == followerGone {
			h.err = fmt.Errorf("docker: process %d: its directory is gone: %w", h.pid, sberrors.ErrNotFound)
			return
		}
		if gate.open {
			// Resume from what was delivered, whatever ended this round.
			outOff, errOff = gate.outOff+so.n, gate.errOff+se.n
		}
		if err == nil && !gate.open {
			err = fmt.Errorf("docker: process %d: the follower's stream ended before its header: %w", h.pid, sberrors.ErrOutcomeUnknown)
		}
		if err == nil {
			if rounds < followRounds && h.short(outOff, errOff) {
				rounds++
				continue
			}
			h.status, h.err = h.r.procStatus(h.ctx, h.id, h.dir, code)
			return
		}
		if h.ctx.Err() != nil {
			h.err = fmt.Errorf("docker: process %d: handle closed: %w", h.pid, sberrors.ErrClosed)
			return
		}
		if errors.Is(err, sberrors.ErrPaused) {
			// Paused while the follower started: follow again once resumed.
			if werr := h.waitRunning(); werr != nil {
				h.err = werr
				return
			}
			continue
		}
		failures++
		if failures > 3 || !errors.Is(err, sberrors.ErrOutcomeUnknown) {
			h.err = err
			return
		}
		// An attach that lost its stream before learning the offsets
		// resumes at the current end (outOff and errOff stay -1).
		select {
		case <-h.ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// short reports whether the ended process's output files hold more than
// the offsets delivered. A file it cannot stat counts as delivered: the
// exit status is still worth returning.
func (h *handle) short(outOff, errOff int64) bool {
	for _, f := range []struct {
		name string
		off  int64
	}{{"out", outOff}, {"err", errOff}} {
		res, err := h.r.cli.ContainerStatPath(h.ctx, h.id, client.ContainerStatPathOptions{Path: h.dir + "/" + f.name})
		if err == nil && res.Stat.Size > f.off {
			return true
		}
	}
	return false
}

// gateWriter passes output on only after the follower's first byte, S,
// and its header line ("OUTOFFSET ERROFFSET\n"), which it parses.
type gateWriter struct {
	w       io.Writer
	started bool   // the first byte was S
	open    bool   // the header was read: output passes
	closed  bool   // the first byte was something else, or the header was bad: drop everything
	hdr     []byte // the header so far
	outOff  int64
	errOff  int64
	pending []byte // stderr that arrived before the header (the engine copies the two streams apart)
	errCut  bool   // pending overflowed: this round's stderr is dropped from there on
	errW    io.Writer
}

func (g *gateWriter) Write(p []byte) (int, error) {
	n := len(p)
	if g.closed {
		return n, nil
	}
	if !g.started && len(p) > 0 {
		if p[0] != 'S' {
			g.closed = true
			return n, nil
		}
		g.started = true
		p = p[1:]
	}
	if !g.open {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			g.hdr = append(g.hdr, p...)
			if len(g.hdr) > 64 {
				g.closed = true
			}
			return n, nil
		}
		g.hdr = append(g.hdr, p[:i]...)
		p = p[i+1:]
		if _, err := fmt.Sscanf(string(g.hdr), "%d %d", &g.outOff, &g.errOff); err != nil {
			g.closed = true
			return n, nil
		}
		g.open = true
		if len(g.pending) > 0 && g.errW != nil {
			if _, err := g.errW.Write(g.pending); err != nil {
				return 0, err
			}
		}
		g.pending = nil
	}
	if len(p) > 0 {
		if _, err := g.w.Write(p); err != nil {
			return 0, err
		}
	}
	return n, nil
}

// gatedWriter passes stderr on only once the gate opened; what comes
// before is held (up to 1 MiB) and passed on when it opens. Past that
// bound the rest of the round's stderr is dropped, and the completeness
// check fetches it once the process has ended.
type gatedWriter struct {
	g *gateWriter
	w io.Writer
}

func (g *gatedWriter) Write(p []byte) (int, error) {
	switch {
	case g.g.errCut || g.g.closed:
	case g.g.open:
		return g.w.Write(p)
	case len(g.g.pending)+len(p) <= 1<<20:
		g.g.errW = g.w
		g.g.pending = append(g.g.pending, p...)
	default:
		// Nothing after the cut passes this round: what was delivered
		// stays contiguous, and the next round resumes from its end.
		g.g.errCut = true
	}
	return len(p), nil
}

// waitRunning waits, until Close, while the sandbox is paused; it fails
// when the sandbox is gone or stopped.
func (h *handle) waitRunning() error {
	for {
		info, err := h.r.inspect(h.ctx, h.id)
		if err != nil {
			if h.ctx.Err() != nil {
				return fmt.Errorf("docker: process %d: handle closed: %w", h.pid, sberrors.ErrClosed)
			}
			return err
		}
		switch info.Detail["status"] {
		case "running":
			return nil
		case "paused":
		default:
			return fmt.Errorf("docker: process %d: the sandbox is %s: %w", h.pid, info.Detail["status"], sberrors.ErrPaused)
		}
		select {
		case <-h.ctx.Done():
			return fmt.Errorf("docker: process %d: handle closed: %w", h.pid, sberrors.ErrClosed)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// procStatus reads a background process's exit status.
func (r *Runtime) procStatus(ctx context.Context, id, dir string, code int) (driver.ExitStatus, error) {
	if code == exitKilled {
		if _, err := r.cli.ContainerStatPath(ctx, id, client.ContainerStatPathOptions{Path: dir + "/timedout"}); err == nil {
			return driver.ExitStatus{ExitCode: -1, TimedOut: true}, nil
		}
	}
	return driver.ExitStatus{ExitCode: code}, nil
}

// feed copies stdin to the process's FIFO through an exec, until stdin's
// EOF or Close.
func (h *handle) feed(stdin io.Reader) {
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		att, _, done, err := h.r.startExec(h.ctx, h.id, client.ExecCreateOptions{
			Cmd: []string{"/bin/sh", "-c", `exec cat >"$1/in"`, "sbx", h.dir}, AttachStdin: true, AttachStdout: true, AttachStderr: true,
		})
		if err != nil {
			return
		}
		defer done()
		stop := context.AfterFunc(h.ctx, func() { att.Conn.Close() })
		defer stop()
		go func() {
			io.Copy(att.Conn, stdin)
			att.CloseWrite()
		}()
		io.Copy(io.Discard, att.Reader)
		att.Close()
		if c, ok := stdin.(io.Closer); ok {
			c.Close()
		}
	}()
}

// PID returns the supervisor's pid in the container: the key for Attach.
func (h *handle) PID() int { return h.pid }

// Wait waits until the process ended and its output was delivered.
func (h *handle) Wait(ctx context.Context) (driver.ExitStatus, error) {
	select {
	case <-h.done:
		return h.status, h.err
	case <-ctx.Done():
		return driver.ExitStatus{}, fmt.Errorf("docker: wait for process %d: %w", h.pid, ctx.Err())
	}
}

// Signal sends sig to the process's process group. A process that has
// exited is not signalled, and that is no error (the signaller, too, does
// nothing once the status file is there).
func (h *handle) Signal(ctx context.Context, sig syscall.Signal) error {
	select {
	case <-h.done:
		if h.err == nil {
			return nil
		}
	default:
	}
	code, err := h.r.runExec(ctx, h.id, client.ExecCreateOptions{
		Cmd: []string{"/bin/sh", "-c", signaller, "sbx", h.dir, strconv.Itoa(int(sig))},
	}, io.Discard, io.Discard)
	if err != nil {
		return err
	}
	if code != 0 {
		return fmt.Errorf("docker: signal process %d: the process group is not known yet: %w", h.pid, sberrors.ErrUnavailable)
	}
	return nil
}

// Close stops following the process (which keeps running).
func (h *handle) Close() error {
	h.stop()
	h.wg.Wait()
	return nil
}
