package e2bfake

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"time"

	"connectrpc.com/connect"
	"github.com/sandboxkit/sandbox/driver"
	"github.com/sandboxkit/sandbox/provider/e2b/internal/envd/process"
)

// Processes on a pseudo-terminal. envd starts a process on a pty when
// Start carries the pty field; the fake starts it on a terminal of its
// backend (driver.TerminalRuntime) and answers as envd does:
//
//   - the output arrives as pty data events (chunks of at most 16 KiB,
//     envd's pty read size), never as stdout or stderr;
//   - SendInput/StreamInput with ProcessInput.pty type into it (Write);
//     stdin input to a pty process, or pty input to a process without
//     one, is internal, as is input after the program exited;
//   - Update with a pty size resizes it; Update of a process without a
//     pty is internal "error resizing tty: tty not assigned to process";
//   - SendSignal sends SIGKILL or SIGTERM to the program; CloseStdin of a
//     pty process is unknown ("send Ctrl+D (0x04) instead");
//   - Connect by pid follows it like any process (every stream sees the
//     output produced while it is attached; the fake holds the backend's
//     terminal, so a new client's Connect needs no AttachTerminal);
//   - a pty without a size (or with a zero dimension) starts, as envd
//     starts it (envd's terminal is then 0x0, from pty.StartWithSize with
//     the zero size); the backends refuse a zero size (the driver
//     contract), so the fake's terminal gets 1 for a zero dimension. An
//     Update to a zero size is accepted the same way. Sizes are cut to
//     16 bits, as envd's uint16 conversions cut them.
//
// The official SDKs start the user's interactive login shell as
// "/bin/bash -i -l"; the fake runs the backend's login shell for it (the
// backend's default terminal program), so that a backend without bash
// (provider/memory) serves it too. A backend without terminals answers a
// pty start with unimplemented.

// ptyChunk is the largest pty data event envd sends.
const ptyChunk = 16 << 10

// ptyOutput publishes a terminal's output as pty data events.
type ptyOutput struct{ p *proc }

func (o ptyOutput) Write(b []byte) (int, error) {
	n := len(b)
	for len(b) > 0 {
		c := min(len(b), ptyChunk)
		data := append([]byte(nil), b[:c]...)
		b = b[c:]
		o.p.publish(&process.ProcessEvent{Event: &process.ProcessEvent_Data{Data: &process.ProcessEvent_DataEvent{
			Output: &process.ProcessEvent_DataEvent_Pty{Pty: data}}}})
	}
	return n, nil
}

// dim is a window dimension as the fake gives it to its backend (see
// above).
func dim(v uint32) uint16 { return max(uint16(v), 1) }

// loginShell recognises the SDKs' interactive login shell.
func loginShell(cmd string, args []string) bool {
	switch cmd {
	case "/bin/bash", "bash", "/usr/bin/bash":
	default:
		return false
	}
	switch len(args) {
	case 1:
		return args[0] == "-i" || args[0] == "-l" || args[0] == "-il" || args[0] == "-li"
	case 2:
		return (args[0] == "-i" && args[1] == "-l") || (args[0] == "-l" && args[1] == "-i")
	}
	return false
}

// startPty serves Start with the pty field: the program runs on a
// terminal of the backend in dir (already checked).
func (ps *processService) startPty(ctx context.Context, req *connect.Request[process.StartRequest], stream *connect.ServerStream[process.StartResponse], dir string) error {
	s := ps.s
	b := boxOf(ctx)
	m := req.Msg
	tr, ok := s.backend.(driver.TerminalRuntime)
	if !ok {
		return connect.NewError(connect.CodeUnimplemented, errors.New("pty is not supported by the fake's backend (not a driver.TerminalRuntime)"))
	}
	cfg := m.GetProcess()
	timeout := s.defaultCmd
	if dl, ok := ctx.Deadline(); ok {
		timeout = time.Until(dl)
	}
	size := m.GetPty().GetSize()
	treq := &driver.TerminalRequest{Dir: dir, Env: cfg.GetEnvs(), Timeout: timeout,
		Rows: dim(size.GetRows()), Cols: dim(size.GetCols())}
	if !loginShell(cfg.GetCmd(), cfg.GetArgs()) {
		treq.Args = append([]string{cfg.GetCmd()}, cfg.GetArgs()...)
	}
	p := &proc{tag: m.GetTag(), config: cfg, done: make(chan struct{}), subs: map[*sub]struct{}{}, retain: s.exitedRetained}
	first := p.subscribe()
	defer p.unsubscribe(first)
	p.forget = func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if b.procs[p.pid] == p {
			delete(b.procs, p.pid)
		}
	}
	treq.Output = ptyOutput{p: p}
	h, err := tr.StartTerminal(ctx, b.backendID, treq)
	if err != nil {
		return connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("error starting pty with command '%s' in dir '%s' with '%d' cols and '%d' rows: %w",
			cfg.GetCmd(), dir, size.GetCols(), size.GetRows(), err))
	}
	p.term = h
	p.signal = func(sig syscall.Signal) error {
		p.mu.Lock()
		if p.sent == 0 {
			p.sent = sig
		}
		p.mu.Unlock()
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return h.Signal(sctx, sig)
	}
	p.kill = func() { _ = p.signal(syscall.SIGKILL) }
	s.mu.Lock()
	p.pid = uint32(h.PID())
	if p.pid == 0 || b.procs[p.pid] != nil {
		s.nextPID++
		p.pid = s.nextPID
	}
	b.procs[p.pid] = p
	s.mu.Unlock()
	s.bg.Add(1)
	go func() {
		defer s.bg.Done()
		st, err := h.Wait(context.Background())
		_ = h.Close()
		p.finish(st, err)
	}()
	if err := stream.Send(&process.StartResponse{Event: startEvent(p.pid)}); err != nil {
		return err
	}
	return ps.pump(ctx, req.Header().Get("Keepalive-Ping-Interval"), p, first, func(ev *process.ProcessEvent) error {
		return stream.Send(&process.StartResponse{Event: ev})
	})
}

// ptyInput serves input to a process when either side is a pty, with
// envd's answers for a mismatch.
func ptyInput(ctx context.Context, p *proc, in *process.ProcessInput) error {
	switch {
	case p.term == nil:
		return connect.NewError(connect.CodeInternal, errors.New("error writing to tty: tty not assigned to process — input should be written to the stdin, not the tty"))
	case in.GetInput() == nil:
		return connect.NewError(connect.CodeUnimplemented, fmt.Errorf("invalid input type %T", in.GetInput()))
	case in.GetPty() == nil:
		return connect.NewError(connect.CodeInternal, errors.New("error writing to stdin: tty assigned to process — input should be written to the pty, not the stdin"))
	}
	select {
	case <-p.done:
		return connect.NewError(connect.CodeInternal, fmt.Errorf("error writing to tty: error writing to tty of process '%d': write /dev/ptmx: file already closed", p.pid))
	default:
	}
	if err := p.term.Write(ctx, in.GetPty()); err != nil {
		return connect.NewError(connect.CodeInternal, fmt.Errorf("error writing to tty: error writing to tty of process '%d': %v", p.pid, err))
	}
	return nil
}

// Update resizes a process's pty.
func (ps *processService) Update(ctx context.Context, req *connect.Request[process.UpdateRequest]) (*connect.Response[process.UpdateResponse], error) {
	if _, err := rpcUser(req.Header()); err != nil {
		return nil, err
	}
	p, err := ps.find(ctx, req.Msg.GetProcess())
	if err != nil {
		return nil, err
	}
	if pty := req.Msg.GetPty(); pty != nil {
		if p.term == nil {
			return nil, connect.NewError(connect.CodeInternal, errors.New("error resizing tty: tty not assigned to process"))
		}
		select {
		case <-p.done:
			return nil, connect.NewError(connect.CodeInternal, errors.New("error resizing tty: file already closed"))
		default:
		}
		size := pty.GetSize()
		if err := p.term.Resize(ctx, dim(size.GetRows()), dim(size.GetCols())); err != nil {
			return nil, connect.NewError(connect.CodeInternal, fmt.Errorf("error resizing tty: %v", err))
		}
	}
	return connect.NewResponse(&process.UpdateResponse{}), nil
}
