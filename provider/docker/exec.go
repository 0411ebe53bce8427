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
// through a marker file rather than the command's streams), starts ARGV in
// a session of its own (so its whole process group can be ended), and
// starts a watchdog, in a session of its own too, that after TIMEOUT
// seconds (0: none) creates MARKER and kills the command's process group.
// When the command exits, the wrapper ends the watchdog and whatever is
// left of the command's process group, and exits with the command's code.
// The command's output streams are the exec's: nothing else writes there.
// A background process's supervisor sets __sbx_pidfile to learn the
// command's process group.
const wrapper = `t=$1 m=$2 d=$3
shift 3
pf=${__sbx_pidfile-}
unset __sbx_pidfile
if [ -r ` + stateDir + `/env ]; then . ` + stateDir + `/env; fi
unset __sbx_keep
if [ ! -d "$d" ]; then
  if [ -e "$d" ]; then : >"$m.notdir"; else : >"$m.missing"; fi
  exit 126
fi
cd "$d" 2>/dev/null || { : >"$m.denied"; exit 126; }
exec 3<&0 0</dev/null 4>&2
setsid "$@" <&3 2>&4 3<&- 4>&- &
p=$!
exec 3<&- 2>/dev/null 4>&-
if [ -n "$pf" ]; then echo "$p" >"$pf"; fi
w=
if [ "$t" != 0 ]; then
  setsid sh -c 'sleep "$1"; : >"$2"; kill -9 -"$3"' sh "$t" "$m" "$p" </dev/null >/dev/null 2>&1 &
  w=$!
fi
wait "$p"
rc=$?
if [ -n "$w" ]; then kill -9 -"$w" 2>/dev/null; kill -9 "$w" 2>/dev/null; fi
kill -9 -"$p" 2>/dev/null
exit "$rc"
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
	argv := append([]string{"/bin/sh", "-c", wrapper, "sbx", secs, stateDir + "/t/" + spec.token, spec.dir}, spec.argv...)
	return client.ExecCreateOptions{
		Cmd: argv, Env: env, AttachStdout: true, AttachStderr: true, AttachStdin: spec.stdin,
	}, nil
}

// Exec runs cmd through the engine's exec API and waits for it. The
// multiplexed stream is split into cmd.Stdout and cmd.Stderr as it
// arrives; cmd.Timeout is enforced inside the container by the wrapper,
// which ends the command's process group.
func (r *Runtime) Exec(ctx context.Context, id string, cmd *driver.Command) (driver.ExitStatus, error) {
	spec := execSpec{argv: commandArgv(cmd), dir: cmd.Dir, env: cmd.Env, timeout: cmd.Timeout, token: newToken(), stdin: cmd.Stdin != nil}
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
	// an ended ctx must end the command.
	stop := context.AfterFunc(ctx, func() { att.Conn.Close() })
	defer stop()

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
	_, copyErr := stdcopy.StdCopy(cmd.Stdout, cmd.Stderr, att.Reader)
	att.Close()
	if c, ok := cmd.Stdin.(io.Closer); ok {
		c.Close()
	}
	wg.Wait()
	if ctx.Err() != nil {
		r.killExec(id, spec.token)
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
