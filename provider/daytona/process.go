package daytona

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sandboxkit/sandbox/driver"
	"github.com/sandboxkit/sandbox/internal/bgproc"
	"github.com/sandboxkit/sandbox/internal/wire"
	"github.com/sandboxkit/sandbox/provider/daytona/internal/toolbox"
	"github.com/sandboxkit/sandbox/sberrors"
)

// Background processes run as asynchronous commands of toolbox sessions,
// one session per process, named "sandboxkit-<pid>" where pid is a random
// positive number chosen by Start: that is the PID the portable layer
// sees, and Attach finds the session again by it, from any client. The
// command runs under internal/bgproc's launcher (GNU timeout as the process
// group leader, pid and exit records beside the command's other files,
// stdin from /dev/null or an uploaded file), but writes to
// the session's output, which the toolbox keeps. Output is read by polling
// the command's logs with the X-Daytona-SDK-Version header that makes the
// daemon split stdout from stderr; the logs are JSON strings, so a
// background process's output is not binary-safe (invalid UTF-8 becomes
// U+FFFD) — use Exec for byte-exact output.

const sessionPrefix = "sandboxkit-"

func procDir(root string, pid int) string { return fmt.Sprintf("%s/p%d", root, pid) }

// Start starts cmd as an asynchronous session command.
func (r *Runtime) Start(ctx context.Context, id string, cmd *driver.Command) (driver.ProcessHandle, error) {
	ctx = withEnvValues(ctx, cmd.Env)
	var b [4]byte
	_, _ = rand.Read(b[:])
	pid := int(binary.BigEndian.Uint32(b[:])&0x3fffffff) + 1
	root, err := r.scratchDir(ctx, id)
	if err != nil {
		return nil, r.clean(err)
	}
	// The session's "cd" would fail after Start returned: check the
	// working directory first, so a bad one is an error of Start as of Exec.
	if fi, err := r.Stat(ctx, id, cmd.Dir); err != nil {
		return nil, err
	} else if !fi.IsDir() {
		return nil, fmt.Errorf("daytona: start: working directory %q: %w", cmd.Dir, sberrors.ErrNotDirectory)
	}
	d := procDir(root, pid)
	sid := sessionPrefix + strconv.Itoa(pid)
	inline, file := commandTexts(cmd, "")
	stdin, run, err := r.stage(ctx, id, d, cmd, inline, file, func(t string) string { return "sh -c " + shellQuote(t) })
	if err != nil {
		return nil, r.clean(err)
	}
	// The command runs under bgproc's launcher: d.pid names its process
	// group (for Signal), d.exit records how it ended (for exitStatus).
	script := "[ -d " + root + " ] || mkdir -p " + root + " || exit 101\n" + bgproc.Lib +
		"bg_start " + d + ".pid KILL 0 " + bgproc.Secs(cmd.Timeout) + " " + run + " <" + stdin + "\n" +
		"bg_wait\nbg_put " + d + ".exit \"$bg_rc $bg_why\"\nexit \"$bg_rc\"\n"
	// sh -c keeps the exit inside a child: exit in the session's own shell
	// would kill the session.
	line := "sh -c " + shellQuote(script) + " </dev/null" // the environment is set by commandTexts, for the command alone
	resp, err := r.toolboxCall(ctx, id, "start session", true, nil, func(ctx context.Context, c *toolbox.Client) (*http.Response, error) {
		return c.CreateSession(ctx, toolbox.CreateSessionRequest{SessionId: sid})
	}, http.StatusCreated, http.StatusOK)
	if err != nil {
		return nil, r.clean(err)
	}
	resp.Body.Close()
	async := true
	resp, err = r.toolboxCall(ctx, id, "start", true, nil, func(ctx context.Context, c *toolbox.Client) (*http.Response, error) {
		body := toolbox.SessionExecuteRequest{Command: "cd " + shellQuote(cmd.Dir) + " && " + line, RunAsync: &async}
		return c.SessionExecuteCommand(ctx, sid, body)
	}, http.StatusAccepted, http.StatusOK)
	if err != nil {
		return nil, r.clean(err)
	}
	var out toolbox.SessionExecuteResponse
	if err := decode("toolbox start", resp, &out); err != nil {
		return nil, err
	}
	if str(out.CmdId) == "" {
		return nil, sberrors.Errorf(sberrors.Internal, "daytona: start: the toolbox returned no command id")
	}
	p := r.newProc(id, d, pid, str(out.CmdId), cmd.Stdout, cmd.Stderr, true, 0, 0)
	r.starts.add(id, p)
	return p, nil
}

// Attach finds the session of pid and follows its command from now on:
// the output the command wrote before Attach returns is skipped, and all
// it writes after is delivered (the logs are read once here, not by the
// following goroutine, which under load may first run after the command
// wrote more).
func (r *Runtime) Attach(ctx context.Context, id string, pid int, stdout, stderr io.Writer) (driver.ProcessHandle, error) {
	sid := sessionPrefix + strconv.Itoa(pid)
	resp, err := r.toolboxCall(ctx, id, "attach", false, nil, func(ctx context.Context, c *toolbox.Client) (*http.Response, error) {
		return c.GetSession(ctx, sid)
	}, http.StatusOK)
	if err != nil {
		return nil, r.clean(err)
	}
	var se toolbox.Session
	if err := decode("toolbox attach", resp, &se); err != nil {
		return nil, err
	}
	if len(se.Commands) == 0 {
		return nil, sberrors.Errorf(sberrors.NotFound, "daytona: attach: process %d has no command", pid)
	}
	root, err := r.scratchDir(ctx, id)
	if err != nil {
		return nil, r.clean(err)
	}
	o, e, err := r.commandLogs(ctx, id, sid, se.Commands[0].Id)
	if err != nil {
		return nil, r.clean(err)
	}
	return r.newProc(id, procDir(root, pid), pid, se.Commands[0].Id, stdout, stderr, false, len(o), len(e)), nil
}

// proc is a handle on one session command. A goroutine follows its logs
// and status until it exits or the handle is closed.
type proc struct {
	r              *Runtime
	id, sid, cmdID string
	dir            string // the prefix of the process's files in the sandbox
	pid            int
	owner          bool
	stdout, stderr io.Writer

	cancel context.CancelFunc
	done   chan struct{}

	mu       sync.Mutex
	status   driver.ExitStatus
	err      error
	signaled bool
	closed   bool
}

// newProc returns a handle on the command cmdID of pid's session whose
// following delivers its output from byte offO of stdout and offE of
// stderr on.
func (r *Runtime) newProc(id, dir string, pid int, cmdID string, stdout, stderr io.Writer, owner bool, offO, offE int) *proc {
	ctx, cancel := context.WithCancel(context.Background())
	p := &proc{r: r, id: id, dir: dir, sid: sessionPrefix + strconv.Itoa(pid), cmdID: cmdID, pid: pid, owner: owner,
		stdout: stdout, stderr: stderr, cancel: cancel, done: make(chan struct{})}
	go p.follow(ctx, offO, offE)
	return p
}

// PID returns the number that names the process's session.
func (p *proc) PID() int { return p.pid }

// logs fetches the command's split logs.
func (p *proc) logs(ctx context.Context) (stdout, stderr string, err error) {
	return p.r.commandLogs(ctx, p.id, p.sid, p.cmdID)
}

// commandLogs fetches the split logs of command cmdID of session sid.
func (r *Runtime) commandLogs(ctx context.Context, id, sid, cmdID string) (stdout, stderr string, err error) {
	resp, err := r.toolboxCall(ctx, id, "logs", false, nil, func(ctx context.Context, c *toolbox.Client) (*http.Response, error) {
		return c.GetSessionCommandLogs(ctx, sid, cmdID)
	}, http.StatusOK)
	if err != nil {
		return "", "", err
	}
	defer wire.DrainClose(resp.Body)
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		// A daemon that ignores the version header: merged text.
		b, err := io.ReadAll(resp.Body)
		return string(b), "", err
	}
	var l toolbox.SessionCommandLogs
	if err := json.NewDecoder(resp.Body).Decode(&l); err != nil {
		return "", "", err
	}
	return str(l.Stdout), str(l.Stderr), nil
}

// exitCode reports the command's exit code once it has one.
func (p *proc) exitCode(ctx context.Context) (*int, error) {
	resp, err := p.r.toolboxCall(ctx, p.id, "process status", false, nil, func(ctx context.Context, c *toolbox.Client) (*http.Response, error) {
		return c.GetSessionCommand(ctx, p.sid, p.cmdID)
	}, http.StatusOK)
	if err != nil {
		return nil, err
	}
	var c toolbox.Command
	if err := decode("toolbox process status", resp, &c); err != nil {
		return nil, err
	}
	return c.ExitCode, nil
}

// follow polls logs and status until the command exits, writing new
// output, from byte offO of stdout and offE of stderr on, as it appears.
func (p *proc) follow(ctx context.Context, offO, offE int) {
	defer close(p.done)
	deliver := func() error {
		o, e, err := p.logs(ctx)
		if err != nil {
			return err
		}
		if len(o) > offO {
			_, _ = io.WriteString(p.stdout, o[offO:])
			offO = len(o)
		}
		if len(e) > offE {
			_, _ = io.WriteString(p.stderr, e[offE:])
			offE = len(e)
		}
		return nil
	}
	delay := 100 * time.Millisecond
	failures := 0
	for {
		code, err := p.exitCode(ctx)
		if err == nil {
			err = deliver()
		}
		switch {
		case ctx.Err() != nil:
			p.finish(driver.ExitStatus{}, fmt.Errorf("daytona: process %d: handle closed: %w", p.pid, sberrors.ErrClosed))
			return
		case err != nil:
			failures++
			if failures >= 5 || sberrors.CodeOf(err) == sberrors.NotFound || errors.Is(err, sberrors.ErrPaused) {
				p.finish(driver.ExitStatus{}, p.r.clean(err))
				return
			}
		case code != nil:
			p.finish(p.exitStatus(ctx, *code), nil)
			return
		default:
			failures = 0
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
		case <-t.C:
		}
		delay = min(delay*3/2, time.Second)
	}
}

// exitStatus turns the wrapper's exit code into an ExitStatus. A code of
// 124 or 137 may be a timeout: the exit record (bgproc) tells.
func (p *proc) exitStatus(ctx context.Context, code int) driver.ExitStatus {
	if code == 124 || code == 137 {
		if e, err := p.exitRecord(ctx); err == nil && e.TimedOut {
			return driver.ExitStatus{ExitCode: -1, TimedOut: true}
		}
	}
	p.mu.Lock()
	signaled := p.signaled
	p.mu.Unlock()
	if signaled && code > 128 {
		return driver.ExitStatus{ExitCode: -1}
	}
	return driver.ExitStatus{ExitCode: code}
}

// exitRecord reads and parses the process's exit record.
func (p *proc) exitRecord(ctx context.Context) (bgproc.Exit, error) {
	rc, err := p.r.Download(ctx, p.id, p.dir+".exit")
	if err != nil {
		return bgproc.Exit{}, err
	}
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, 64))
	if err != nil {
		return bgproc.Exit{}, fmt.Errorf("daytona: process %d: reading its exit record: %w", p.pid, err)
	}
	return bgproc.ParseExit(string(b))
}

func (p *proc) finish(st driver.ExitStatus, err error) {
	p.mu.Lock()
	p.status, p.err = st, err
	p.mu.Unlock()
}

// Wait blocks until the command exits and its output has been written.
func (p *proc) Wait(ctx context.Context) (driver.ExitStatus, error) {
	select {
	case <-p.done:
	case <-ctx.Done():
		return driver.ExitStatus{}, fmt.Errorf("daytona: wait: %w", ctx.Err())
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.status, p.err
}

// exited reports whether the handle has seen the command exit (its
// following ended with a status, not an error).
func (p *proc) exited() bool {
	select {
	case <-p.done:
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.err == nil
	default:
		return false
	}
}

// Signal sends sig to the process group of the command. A command that
// has exited is not signalled, and that is no error.
func (p *proc) Signal(ctx context.Context, sig syscall.Signal) error {
	// Nothing to ask the sandbox (whose answer, its files maybe deleted
	// by Close, came after a 5 s wait).
	if p.exited() {
		return nil
	}
	p.mu.Lock()
	p.signaled = true
	p.mu.Unlock()
	d := p.dir
	// A Signal just after Start may come before the launcher wrote the
	// pid: wait for it up to 5 s, unless the exit record shows it ended.
	script := fmt.Sprintf("{ %sbg_signal %s.pid %d 50 %s.exit; } </dev/null", bgproc.Lib, d, int(sig), d)
	res := p.r.execute(ctx, p.id, script, "", 30)
	if res.err != nil {
		return p.r.clean(res.err)
	}
	if res.resp.ExitCode != nil && *res.resp.ExitCode == 3 {
		return sberrors.Errorf(sberrors.NotFound, "daytona: signal: process %d is unknown", p.pid)
	}
	return nil
}

// Close stops following the command. The handle that started the command
// also deletes its session and files once it has exited.
func (p *proc) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	p.mu.Unlock()
	exited := p.exited()
	p.cancel()
	<-p.done
	if p.owner && exited {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if resp, err := p.r.toolboxCall(ctx, p.id, "close", true, nil, func(ctx context.Context, c *toolbox.Client) (*http.Response, error) {
			return c.DeleteSession(ctx, p.sid)
		}, http.StatusNoContent, http.StatusOK); err == nil {
			resp.Body.Close()
		}
		p.r.cleanup(p.id, p.dir)
	}
	return nil
}
