package e2b

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"syscall"
	"time"

	"connectrpc.com/connect"
	"github.com/sandboxkit/sandbox/driver"
	"github.com/sandboxkit/sandbox/provider/e2b/internal/envd/process"
	"github.com/sandboxkit/sandbox/sberrors"
)

// Terminals: see "Terminals" in the package documentation.

// ptyTagPrefix starts the tag of every terminal's program, so that
// Processes can tell a terminal (envd's List does not say which process
// has a pty).
const ptyTagPrefix = "sandboxkit-pty-"

// ptyInput is the largest SendInput message a terminal write sends.
const ptyInput = 32 << 10

// termEnv is the environment a terminal's program gets: TERM is
// xterm-256color unless env sets it, as the official SDKs set it.
func termEnv(env map[string]string) map[string]string {
	out := make(map[string]string, len(env)+1)
	for k, v := range env {
		out[k] = v
	}
	if _, ok := out["TERM"]; !ok {
		out["TERM"] = "xterm-256color"
	}
	return out
}

// ptyStartRequest builds the Start request of a terminal. Without Args
// the program is the user's interactive login shell, "/bin/bash -i -l",
// as the official SDKs' pty.create starts it.
func ptyStartRequest(req *driver.TerminalRequest) *process.StartRequest {
	cfg := &process.ProcessConfig{Envs: termEnv(req.Env)}
	if len(req.Args) > 0 {
		cfg.Cmd, cfg.Args = req.Args[0], req.Args[1:]
	} else {
		cfg.Cmd, cfg.Args = "/bin/bash", []string{"-i", "-l"}
	}
	if req.Dir != "" {
		d := req.Dir
		cfg.Cwd = &d
	}
	tag := ptyTagPrefix + strings.TrimPrefix(newTag(), "sandboxkit-")
	return &process.StartRequest{Process: cfg, Tag: &tag, Pty: &process.PTY{
		Size: &process.PTY_Size{Cols: uint32(req.Cols), Rows: uint32(req.Rows)}}}
}

// StartTerminal starts req's program on a new pseudo-terminal of envd. Its
// lifetime, req.Timeout (or, when zero, the longest lease), is sent as
// Connect-Timeout-Ms as Start sends it: envd ends the program then and
// Wait reports TimedOut. ctx bounds only the start.
func (r *Runtime) StartTerminal(ctx context.Context, id string, req *driver.TerminalRequest) (driver.TerminalHandle, error) {
	const op = "start-terminal"
	if req == nil || req.Output == nil {
		return nil, sberrors.Errorf(sberrors.InvalidArgument, "e2b: %s: terminal request without an Output", op)
	}
	if req.Rows == 0 || req.Cols == 0 {
		return nil, sberrors.Errorf(sberrors.InvalidArgument, "e2b: %s: terminal size %dx%d: rows and cols must be positive", op, req.Rows, req.Cols)
	}
	c, err := r.conn(ctx, id)
	if err != nil {
		return nil, err
	}
	life := req.Timeout
	if life <= 0 {
		life = maxLease
	}
	end := time.Now().Add(life)
	sctx, cancel := context.WithDeadline(context.Background(), end.Add(r.execGrace()))
	stop := context.AfterFunc(ctx, cancel)
	src, ev, err := r.openStart(ctx, sctx, op, id, c, ptyStartRequest(req), end)
	if !stop() && err == nil {
		// ctx ended just as the program started: nobody will hold it.
		_ = src.Close()
		cancel()
		r.killQuietly(id, c, byPID(ev.pid))
		return nil, fmt.Errorf("e2b: %s: %w", op, ctx.Err())
	}
	if err != nil {
		cancel()
		return nil, r.scrub(err)
	}
	h := r.newHandle(id, c, ev, src, sctx, cancel, req.Output, req.Output, req.Timeout > 0)
	return &termHandle{handle: h}, nil
}

// AttachTerminal connects to a running terminal by its ID (envd's pid of
// its program) with Process.Connect. An ID that is no pid, like a pid
// envd does not know, is NotFound.
func (r *Runtime) AttachTerminal(ctx context.Context, id, terminalID string, out io.Writer) (driver.TerminalHandle, error) {
	const op = "attach-terminal"
	pid, err := strconv.ParseUint(terminalID, 10, 32)
	if err != nil || pid == 0 {
		return nil, sberrors.Errorf(sberrors.NotFound, "e2b: %s: no terminal %q (an e2b terminal's ID is its program's pid)", op, terminalID)
	}
	if out == nil {
		return nil, sberrors.Errorf(sberrors.InvalidArgument, "e2b: %s: nil output writer", op)
	}
	ph, err := r.Attach(ctx, id, int(pid), out, out)
	if err != nil {
		return nil, err
	}
	return &termHandle{handle: ph.(*handle)}, nil
}

// termHandle is a terminal's stream: a process handle whose program runs
// on an envd pty.
type termHandle struct {
	*handle
}

// ID returns the program's pid in decimal.
func (h *termHandle) ID() string { return strconv.FormatUint(uint64(h.ev.pid), 10) }

// exited reports an error when the program has exited (its end event
// came): envd has closed its pty, so input and resizes fail.
func (h *termHandle) exited(op string) error {
	if h.ended() {
		return sberrors.Errorf(sberrors.FailedPrecondition, "e2b: %s: terminal %d: the program has exited", op, h.ev.pid)
	}
	return nil
}

// Write types p into the terminal with Process.SendInput (ProcessInput.pty),
// in messages of at most 32 KiB.
func (h *termHandle) Write(ctx context.Context, p []byte) error {
	const op = "terminal-write"
	if err := h.exited(op); err != nil {
		return err
	}
	for len(p) > 0 {
		n := min(len(p), ptyInput)
		req := connect.NewRequest(&process.SendInputRequest{Process: byPID(h.ev.pid),
			Input: &process.ProcessInput{Input: &process.ProcessInput_Pty{Pty: p[:n]}}})
		h.r.setEnvdHeaders(req.Header(), h.id, h.c)
		tctx, a := trace(ctx)
		if _, err := h.r.clients(h.r.envdBase(h.id, h.c)).proc.SendInput(tctx, req); err != nil {
			return h.r.scrub(h.r.envdErr(ctx, op, h.id, a, err))
		}
		p = p[n:]
	}
	return nil
}

// Resize sets the pty's window size with Process.Update.
func (h *termHandle) Resize(ctx context.Context, rows, cols uint16) error {
	const op = "terminal-resize"
	if rows == 0 || cols == 0 {
		return sberrors.Errorf(sberrors.InvalidArgument, "e2b: %s: terminal size %dx%d: rows and cols must be positive", op, rows, cols)
	}
	if err := h.exited(op); err != nil {
		return err
	}
	req := connect.NewRequest(&process.UpdateRequest{Process: byPID(h.ev.pid),
		Pty: &process.PTY{Size: &process.PTY_Size{Cols: uint32(cols), Rows: uint32(rows)}}})
	h.r.setEnvdHeaders(req.Header(), h.id, h.c)
	tctx, a := trace(ctx)
	_, err := h.r.clients(h.r.envdBase(h.id, h.c)).proc.Update(tctx, req)
	return h.r.scrub(h.r.envdErr(ctx, op, h.id, a, err))
}

// keyFor is the control character that makes the line discipline send
// sig to the foreground process group (the defaults of stty's intr, quit
// and susp). Signal numbers are Linux's, whatever the host: SIGTSTP is
// 20 there (Windows has no such constant).
var keyFor = map[syscall.Signal][]byte{
	syscall.SIGINT:     {0x03},
	syscall.SIGQUIT:    {0x1c},
	syscall.Signal(20): {0x1a}, // SIGTSTP
}

// Signal sends SIGKILL or SIGTERM to the program with Process.SendSignal;
// SIGINT, SIGQUIT and SIGTSTP are typed as their control characters (see
// the package's notes on terminals). Other signals are Unimplemented.
func (h *termHandle) Signal(ctx context.Context, sig syscall.Signal) error {
	if h.ended() {
		return nil // the program has exited: nothing to deliver
	}
	if key, ok := keyFor[sig]; ok {
		return h.Write(ctx, key)
	}
	return h.handle.Signal(ctx, sig)
}

var _ driver.TerminalRuntime = (*Runtime)(nil)
