package docker

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/client"

	"github.com/sandboxkit/sandbox/driver"
	"github.com/sandboxkit/sandbox/sberrors"
)

// wrapper runs every command inside the container, as the sandbox's user:
//
//	sh -c wrapper sbx TIMEOUT MARKER DIR ARGV...
//
// It sources the create-time environment, enters DIR (reporting a bad one
// through a marker file rather than the command's streams), starts a
// watchdog, in a session of its own, that TIMEOUT seconds (0: none) after
// the command started creates MARKER and kills the command's process
// group, and runs ARGV in a session of its own (so its whole process group
// can be ended). ARGV runs in the foreground, through a sh that writes its
// pid to MARKER.pid and then becomes ARGV (exec setsid: no process-group
// leader, it needs no fork for that): a shell without job control starts
// its background commands with SIGINT and SIGQUIT ignored, which no sh can
// undo, and every command then ignored Ctrl-C and an interrupt.
// When the command exits, the wrapper ends the watchdog and whatever is
// left of the command's process group, and exits with the command's code.
// The command's output streams are the exec's: nothing else writes there.
// A background process's supervisor sets __sbx_pidfile to learn the
// command's process group.
//
// With __sbx_end set (an Exec without stdin), the command's stdin is
// /dev/null and the exec's is kept for an acknowledgement: once the
// command has ended, the wrapper writes __sbx_end on stderr and on stdout
// and waits for a line (or the end) on its stdin before it exits. The
// client answers once both marks arrived, so every byte of output has
// reached it before the exec exits: the engine gives an exec's streams
// only a bounded time to drain after it exits, and on a starved host the
// tail of the output was cut.
//
// Its own variables are named __sbx_*: a command (or the create-time
// environment) may use any other name, and gets its own value.
const wrapper = `__sbx_t=$1 __sbx_m=$2 __sbx_d=$3
shift 3
__sbx_pf=${__sbx_pidfile-} __sbx_ack=${__sbx_end-}
unset __sbx_pidfile __sbx_end
if [ -r ` + stateDir + `/env ]; then . ` + stateDir + `/env; fi
unset __sbx_keep
if [ ! -d "$__sbx_d" ]; then
  if [ -e "$__sbx_d" ]; then : >"$__sbx_m.notdir"; else : >"$__sbx_m.missing"; fi
  exit 126
fi
cd "$__sbx_d" 2>/dev/null || { : >"$__sbx_m.denied"; exit 126; }
exec 3<&0 0</dev/null 4>&2
__sbx_i=$__sbx_m.pid
__sbx_w=
if [ "$__sbx_t" != 0 ]; then
  setsid sh -c 'i=0; while [ ! -s "$3" ]; do i=$((i+1)); [ $i -gt 3000 ] && exit 0; sleep 0.01; done; read -r p <"$3"; sleep "$1"; : >"$2"; kill -9 -"$p" 2>/dev/null || kill -9 "$p"' sh "$__sbx_t" "$__sbx_m" "$__sbx_i" </dev/null >/dev/null 2>&1 3<&- 4>&- &
  __sbx_w=$!
fi
# The command takes its streams itself: the shell's own reports (such as
# "Killed" for a command the watchdog ended) go where its stderr was when
# the command was started, and must not reach the exec's.
exec 2>/dev/null
__sbx_in=1
if [ -n "$__sbx_ack" ]; then __sbx_in=0; fi
sh -c 'echo $$ >"$1"; if [ -n "$2" ]; then echo $$ >"$2"; fi; if [ "$3" = 1 ]; then exec <&3; fi; exec 2>&4 3<&- 4>&-; shift 3; exec setsid "$@"' sbx "$__sbx_i" "$__sbx_pf" "$__sbx_in" "$@"
__sbx_rc=$?
if [ -z "$__sbx_ack" ]; then exec 3<&- 4>&-; fi
if [ -n "$__sbx_w" ]; then kill -9 -"$__sbx_w" 2>/dev/null; kill -9 "$__sbx_w" 2>/dev/null; fi
__sbx_p=
read -r __sbx_p <"$__sbx_i" 2>/dev/null
rm -f "$__sbx_i"
if [ -n "$__sbx_p" ]; then kill -9 -"$__sbx_p" 2>/dev/null; fi
if [ -n "$__sbx_ack" ]; then
  printf '%s' "$__sbx_ack" >&4
  printf '%s' "$__sbx_ack"
  exec 4>&-
  read -r __sbx_x <&3 || :
fi
exit "$__sbx_rc"
`

// killScript ends every process whose environment holds the exec's token:
// the command and every descendant, whatever session it moved to.
const killScript = `for d in /proc/[0-9]*; do
  if tr '\0' '\n' <"$d/environ" 2>/dev/null | grep -qx "SANDBOXKIT_EXEC=$1"; then kill -9 "${d#/proc/}" 2>/dev/null; fi
done
rm -f "` + stateDir + `/t/$1" "` + stateDir + `/t/$1".*
exit 0`

// exitKilled is the shell's status for a process killed by SIGKILL.
const exitKilled = 128 + 9

func newToken() string {
	var b [12]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// execSpec is one command to run through the wrapper.
type execSpec struct {
	argv    []string
	dir     string
	env     map[string]string
	timeout time.Duration // 0: none
	token   string
	stdin   bool
	// end, when set, is the mark the wrapper writes on both streams once
	// the command ended, and then waits for the client's
	// acknowledgement on stdin (see wrapper); only without stdin.
	end string
}

func commandArgv(cmd *driver.Command) []string {
	if cmd.Shell != "" || len(cmd.Args) == 0 {
		return []string{"/bin/sh", "-c", cmd.Shell}
	}
	return cmd.Args
}

// execOptions returns the engine's exec request for the wrapped spec.
func execOptions(spec execSpec) (client.ExecCreateOptions, error) {
	for k := range spec.env {
		if !envNameRE.MatchString(k) {
			return client.ExecCreateOptions{}, fmt.Errorf("docker: exec: environment variable name %q is not a shell name: %w", k, sberrors.ErrInvalidArgument)
		}
	}
	secs := "0"
	if spec.timeout > 0 {
		secs = strconv.FormatFloat(spec.timeout.Seconds(), 'f', 3, 64)
	}
	env := make([]string, 0, len(spec.env)+2)
	keys := slices.Sorted(maps.Keys(spec.env))
	for _, k := range keys {
		env = append(env, k+"="+spec.env[k])
	}
	env = append(env, "__sbx_keep="+strings.Join(keys, " "), "SANDBOXKIT_EXEC="+spec.token)
	if spec.end != "" {
		env = append(env, "__sbx_end="+spec.end)
	}
	argv := append([]string{"/bin/sh", "-c", wrapper, "sbx", secs, stateDir + "/t/" + spec.token, spec.dir}, spec.argv...)
	return client.ExecCreateOptions{
		Cmd: argv, Env: env, AttachStdout: true, AttachStderr: true, AttachStdin: spec.stdin || spec.end != "",
	}, nil
}

// Exec runs cmd through the engine's exec API and waits for it. The
// multiplexed stream is split into cmd.Stdout and cmd.Stderr as it
// arrives; cmd.Timeout is enforced inside the container by the wrapper,
// which ends the command's process group.
func (r *Runtime) Exec(ctx context.Context, id string, cmd *driver.Command) (driver.ExitStatus, error) {
	spec := execSpec{argv: commandArgv(cmd), dir: cmd.Dir, env: cmd.Env, timeout: cmd.Timeout, token: newToken(), stdin: cmd.Stdin != nil}
	if !spec.stdin {
		spec.end = endMark(spec.token)
	}
	opts, err := execOptions(spec)
	if err != nil {
		return driver.ExitStatus{}, err
	}
	att, execID, done, err := r.startExec(ctx, id, opts)
	if err != nil {
		return driver.ExitStatus{}, r.wrap(ctx, "exec", err)
	}
	defer done()
	defer att.Close()
	// From here the command may run: a failure is an unknown outcome, and
	// an ended ctx must end the command. It is killed, and the stream read
	// on for up to cancelDrain: the output already on its way, and the end
	// marks, are not dropped at the caller's deadline.
	streamDone, killed := make(chan struct{}), make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		defer close(killed)
		// The window opens once the kill has run, not when ctx ended:
		// a loaded engine's slow kill must not use up the time the
		// command's last output needs to arrive.
		r.killExec(id, spec.token)
		cut := time.AfterFunc(cancelDrain, func() { att.Conn.Close() })
		defer cut.Stop()
		<-streamDone
	})
	// killedOnCancel reports whether the AfterFunc ran, once it is done;
	// called once.
	killedOnCancel := func() bool {
		if stop() {
			return false
		}
		<-killed
		return true
	}

	var wg sync.WaitGroup
	if cmd.Stdin != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// A write fails once the command has ended: its exit status
			// says what happened, not the broken pipe.
			io.Copy(att.Conn, cmd.Stdin)
			att.CloseWrite()
		}()
	}
	stdout, stderr := cmd.Stdout, cmd.Stderr
	var ends *endPair
	if spec.end != "" {
		ends = newEndPair(spec.end, cmd.Stdout, cmd.Stderr, func() {
			// Both marks arrived: every byte of output is here, and
			// the wrapper may exit.
			if r.beforeAck != nil {
				res, err := r.cli.ExecInspect(ctx, execID, client.ExecInspectOptions{})
				r.beforeAck(err == nil && res.Running)
			}
			_, _ = att.Conn.Write([]byte("\n"))
		})
		stdout, stderr = ends.out, ends.err
	}
	_, copyErr := stdcopy.StdCopy(stdout, stderr, att.Reader)
	if ends != nil && (copyErr == nil || ctx.Err() != nil) {
		// A stream that ended without its mark (the wrapper did not get
		// that far, or the drain after ctx's end was cut) passes on what
		// it held back.
		if ferr := ends.flush(); copyErr == nil {
			copyErr = ferr
		}
	}
	close(streamDone)
	att.Close()
	if c, ok := cmd.Stdin.(io.Closer); ok {
		c.Close()
	}
	wg.Wait()
	if ran := killedOnCancel(); ran || ctx.Err() != nil {
		if !ran {
			r.killExec(id, spec.token)
		}
		return driver.ExitStatus{}, fmt.Errorf("docker: exec: %w", ctx.Err())
	}
	if copyErr != nil {
		r.killExec(id, spec.token)
		return driver.ExitStatus{}, fmt.Errorf("docker: exec: reading the output: %v: %w", copyErr, sberrors.ErrOutcomeUnknown)
	}
	code, err := r.execExit(ctx, execID)
	if err != nil {
		return driver.ExitStatus{}, err
	}
	return r.status(ctx, id, spec.token, code)
}

// cancelDrain bounds how long, once an Exec's context ended and the
// command was killed, the stream is read on.
const cancelDrain = time.Second

// execExit waits (briefly: the stream has ended) until the engine reports
// the exec's exit code.
func (r *Runtime) execExit(ctx context.Context, execID string) (int, error) {
	delay := 2 * time.Millisecond
	for {
		res, err := r.cli.ExecInspect(ctx, execID, client.ExecInspectOptions{})
		if err != nil {
			return 0, fmt.Errorf("docker: exec: reading the exit code: %w", errors.Join(r.wrap(ctx, "exec inspect", err), sberrors.ErrOutcomeUnknown))
		}
		if !res.Running {
			return res.ExitCode, nil
		}
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("docker: exec: %w", ctx.Err())
		case <-time.After(delay):
		}
		delay = min(2*delay, 100*time.Millisecond)
	}
}

// status turns the wrapper's exit code into an ExitStatus, reading the
// markers the wrapper leaves for a timeout or a bad directory.
func (r *Runtime) status(ctx context.Context, id, token string, code int) (driver.ExitStatus, error) {
	marker := stateDir + "/t/" + token
	exists := func(p string) bool {
		_, err := r.cli.ContainerStatPath(ctx, id, client.ContainerStatPathOptions{Path: p})
		return err == nil
	}
	switch code {
	case exitKilled:
		if exists(marker) {
			r.removeMarkers(id, token)
			return driver.ExitStatus{ExitCode: -1, TimedOut: true}, nil
		}
	case 126:
		var err error
		switch {
		case exists(marker + ".missing"):
			err = fmt.Errorf("docker: exec: the working directory does not exist: %w", sberrors.ErrNotFound)
		case exists(marker + ".notdir"):
			err = fmt.Errorf("docker: exec: the working directory is not a directory: %w", sberrors.ErrNotDirectory)
		case exists(marker + ".denied"):
			err = fmt.Errorf("docker: exec: the working directory cannot be entered: %w", sberrors.ErrPermission)
		}
		if err != nil {
			r.removeMarkers(id, token)
			return driver.ExitStatus{}, err
		}
	}
	return driver.ExitStatus{ExitCode: code}, nil
}

// killExec ends what is left of an exec whose caller went away, bounded by
// its own short deadline (the caller's ctx has ended).
func (r *Runtime) killExec(id, token string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r.runQuiet(ctx, id, "", killScript, token)
}

func (r *Runtime) removeMarkers(id, token string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r.runQuiet(ctx, id, "", `rm -f "`+stateDir+`/t/$1" "`+stateDir+`/t/$1".*`, token)
}

// runQuiet runs a provider script as the sandbox's user (or user) and
// returns its exit code and combined output (bounded).
func (r *Runtime) runQuiet(ctx context.Context, id, user, script string, args ...string) (int, string, error) {
	att, execID, done, err := r.startExec(ctx, id, client.ExecCreateOptions{
		User: user, Cmd: append([]string{"/bin/sh", "-c", script, "sbx"}, args...), AttachStdout: true, AttachStderr: true,
	})
	if err != nil {
		return 0, "", r.wrap(ctx, "exec", err)
	}
	stop := context.AfterFunc(ctx, func() { att.Conn.Close() })
	var out limitedBuffer
	_, err = stdcopy.StdCopy(&out, &out, att.Reader)
	att.Close()
	stop()
	done()
	if err != nil || ctx.Err() != nil {
		return 0, "", fmt.Errorf("docker: exec: %w", errors.Join(ctx.Err(), err, sberrors.ErrOutcomeUnknown))
	}
	code, err := r.execExit(ctx, execID)
	return code, out.String(), err
}

// limitedBuffer keeps the first 64 KiB written to it.
type limitedBuffer struct{ b []byte }

func (l *limitedBuffer) Write(p []byte) (int, error) {
	if room := 64<<10 - len(l.b); room > 0 {
		l.b = append(l.b, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

func (l *limitedBuffer) String() string { return string(l.b) }
