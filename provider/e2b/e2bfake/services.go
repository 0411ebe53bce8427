package e2bfake

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"connectrpc.com/connect"
	"github.com/sandboxkit/sandbox/driver"
	"github.com/sandboxkit/sandbox/internal/iox"
	"github.com/sandboxkit/sandbox/internal/pathsafe"
	"github.com/sandboxkit/sandbox/provider/e2b/internal/envd/filesystem"
	"github.com/sandboxkit/sandbox/provider/e2b/internal/envd/filesystem/filesystemconnect"
	"github.com/sandboxkit/sandbox/provider/e2b/internal/envd/process"
	"github.com/sandboxkit/sandbox/provider/e2b/internal/envd/process/processconnect"
	"github.com/sandboxkit/sandbox/sberrors"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// ---------------------------------------------------------------------------
// process.Process

type processService struct {
	processconnect.UnimplementedProcessHandler
	s *Server
}

// shellLine recognises the shell wrappers clients use and returns the line.
func shellLine(cmd string, args []string) (string, bool) {
	switch cmd {
	case "/bin/bash", "/bin/sh", "bash", "sh", "/usr/bin/bash":
	default:
		return "", false
	}
	if len(args) == 3 && (args[0] == "-l" || args[0] == "-lc") && args[1] == "-c" {
		return args[2], true
	}
	if len(args) == 2 && args[0] == "-c" {
		return args[1], true
	}
	return "", false
}

func (ps *processService) Start(ctx context.Context, req *connect.Request[process.StartRequest], stream *connect.ServerStream[process.StartResponse]) error {
	s := ps.s
	if _, err := rpcUser(req.Header()); err != nil {
		return err
	}
	b := boxOf(ctx)
	m := req.Msg
	if m.GetProcess() == nil || m.GetProcess().GetCmd() == "" {
		return connect.NewError(connect.CodeInvalidArgument, errors.New("process config with a cmd is required"))
	}
	cfg := m.GetProcess()
	dir, err := s.cwd(ctx, b, cfg)
	if err != nil {
		return err
	}
	if m.Pty != nil {
		return ps.startPty(ctx, req, stream, dir)
	}
	timeout := s.defaultCmd
	if dl, ok := ctx.Deadline(); ok {
		timeout = time.Until(dl)
	}
	if err := argvFits(b, cfg); err != nil {
		return err
	}
	cmd := &driver.Command{Dir: dir, Env: cfg.GetEnvs(), Timeout: timeout}
	switch line, ok := shellLine(cfg.GetCmd(), cfg.GetArgs()); {
	case ok && path.Base(cfg.GetCmd()) == "bash" && s.hasBash(ctx, b):
		// envd runs the bash asked for: its quoting and builtins (printf
		// '\x00', $'…', [[ ]]) differ from sh's. Not a login bash: the
		// host's profile is not the template's (see the package doc).
		cmd.Args = []string{"bash", "-c", line}
	case ok:
		cmd.Shell = line
	default:
		// envd execs the program through "/usr/bin/nice", which names a
		// program it cannot find in its own words; the backend's are
		// different, so the fake looks first.
		cmd.Args = append([]string{"sh", "-c", findProgram, "sh", cfg.GetCmd()}, cfg.GetArgs()...)
	}
	withStdin := m.Stdin == nil || m.GetStdin()
	p, sb, err := s.startProc(ctx, b, cfg, m.GetTag(), cmd, withStdin)
	if err != nil {
		return connect.NewError(connect.CodeInternal, fmt.Errorf("error starting process: %w", err))
	}
	defer p.unsubscribe(sb)
	if err := stream.Send(&process.StartResponse{Event: startEvent(p.pid)}); err != nil {
		return err
	}
	return ps.pump(ctx, req.Header().Get("Keepalive-Ping-Interval"), p, sb, func(ev *process.ProcessEvent) error {
		return stream.Send(&process.StartResponse{Event: ev})
	})
}

// findProgram runs "$@" when its program exists and otherwise fails as
// envd's wrapper does: nice(1)'s message on stderr and exit status 127.
const findProgram = `command -v "$1" >/dev/null 2>&1 ||
{ printf "/usr/bin/nice: '%s': No such file or directory\n" "$1" >&2; exit 127; }
exec "$@"`

// Linux's limits on a program's arguments (fs/exec.c): one string of at
// most MAX_ARG_STRLEN bytes with its NUL, and the strings with their
// pointers within a quarter of the stack limit, ARG_MAX with the usual
// 8 MiB stack.
const (
	maxArgStrlen = 128 << 10
	argMax       = 2 << 20
)

// envdWrapper is the script envd runs every process under ("/bin/sh -c
// SCRIPT -- CMD ARGS..."), setting its OOM score and nice value.
const envdWrapper = `echo 100 > /proc/$$/oom_score_adj && exec /usr/bin/nice -n 0 "${@}"`

// argvFits refuses, as envd's exec of "/bin/sh" does, a process whose
// arguments or environment are over the kernel's limits: Connect
// invalid_argument naming the whole command, before any start event.
func argvFits(b *box, cfg *process.ProcessConfig) error {
	strs := append([]string{"/bin/sh", "-c", envdWrapper, "--", cfg.GetCmd()}, cfg.GetArgs()...)
	strs = append(strs, "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"HOME="+b.home, "USER="+defaultUser, "LOGNAME="+defaultUser, "E2B_SANDBOX=true")
	for k, v := range b.env {
		strs = append(strs, k+"="+v)
	}
	for k, v := range cfg.GetEnvs() {
		strs = append(strs, k+"="+v)
	}
	total := 0
	for _, a := range strs {
		if len(a)+1 > maxArgStrlen {
			total = argMax + 1
			break
		}
		total += len(a) + 1 + 8
	}
	if total <= argMax {
		return nil
	}
	command := strings.Join(append([]string{cfg.GetCmd()}, cfg.GetArgs()...), " ")
	return connect.NewError(connect.CodeInvalidArgument,
		fmt.Errorf("error starting process '%s': fork/exec /bin/sh: argument list too long", command))
}

// hasBash reports whether b's backend sandbox runs bash, asking it once
// (a backend without bash runs bash lines with its shell).
func (s *Server) hasBash(ctx context.Context, b *box) bool {
	if v, ok := s.bash.Load(b.backendID); ok {
		return v.(bool)
	}
	st, err := s.backend.Exec(ctx, b.backendID, &driver.Command{
		Args: []string{"bash", "-c", ":"}, Dir: b.home, Env: map[string]string{},
		Stdout: io.Discard, Stderr: io.Discard, Timeout: time.Minute,
	})
	if err != nil {
		return false // not known: ask again next time
	}
	s.bash.Store(b.backendID, st.ExitCode == 0)
	return st.ExitCode == 0
}

// cwd resolves and checks a process's working directory as envd does.
func (s *Server) cwd(ctx context.Context, b *box, cfg *process.ProcessConfig) (string, error) {
	dir := b.home
	if cfg.Cwd != nil {
		dir = resolve(b.home, cfg.GetCwd())
		// envd stats the cwd and refuses only a missing one; a file gets as
		// far as the spawn, whose chdir fails with ENOTDIR.
		fi, err := s.backend.Stat(ctx, b.backendID, dir)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return "", connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("cwd '%s' does not exist", dir))
		case err == nil && !fi.IsDir():
			return "", connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("error starting process: fork/exec /bin/bash: not a directory"))
		case err != nil:
			return "", connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("error starting process: chdir %s: %v", dir, err))
		}
	}
	return dir, nil
}

func startEvent(pid uint32) *process.ProcessEvent {
	return &process.ProcessEvent{Event: &process.ProcessEvent_Start{Start: &process.ProcessEvent_StartEvent{Pid: pid}}}
}

// pump forwards a subscription's events until the process ends or the
// stream's context does. A process ended by its timeout ends the stream
// with deadline_exceeded and no end event, as envd does.
func (ps *processService) pump(ctx context.Context, keepalive string, p *proc, sb *sub, send func(*process.ProcessEvent) error) error {
	interval := 90 * time.Second
	if n, err := strconv.Atoi(keepalive); err == nil && n > 0 {
		interval = time.Duration(n) * time.Second
	}
	t := time.NewTimer(interval)
	defer t.Stop()
	for {
		select {
		case ev, ok := <-sb.ch:
			if !ok {
				p.mu.Lock()
				timedOut, failed := p.timedOut, p.failed
				p.mu.Unlock()
				if timedOut {
					return connect.NewError(connect.CodeDeadlineExceeded, context.DeadlineExceeded)
				}
				if failed != nil {
					return connect.NewError(connect.CodeInternal, fmt.Errorf("process failed: %w", failed))
				}
				return nil
			}
			if err := send(ev); err != nil {
				return err
			}
			t.Reset(interval)
		case <-t.C:
			if err := send(&process.ProcessEvent{Event: &process.ProcessEvent_Keepalive{Keepalive: &process.ProcessEvent_KeepAlive{}}}); err != nil {
				return err
			}
			t.Reset(interval)
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return connect.NewError(connect.CodeDeadlineExceeded, ctx.Err())
			}
			return connect.NewError(connect.CodeCanceled, ctx.Err())
		case <-ps.s.closing:
			return connect.NewError(connect.CodeUnavailable, errors.New("server closing"))
		}
	}
}

// find returns the process a selector names.
func (ps *processService) find(ctx context.Context, sel *process.ProcessSelector) (*proc, error) {
	b := boxOf(ctx)
	s := ps.s
	s.mu.Lock()
	defer s.mu.Unlock()
	var found *proc
	switch {
	case sel.GetTag() != "":
		for _, p := range b.procs {
			if p.tag == sel.GetTag() {
				found = p
			}
		}
		if found == nil {
			return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("process with tag %s not found", sel.GetTag()))
		}
	default:
		found = b.procs[sel.GetPid()]
		if found == nil {
			return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("process with pid %d not found", sel.GetPid()))
		}
	}
	found.mu.Lock()
	expired := !found.exitedAt.IsZero() && time.Since(found.exitedAt) > s.exitedRetained
	found.mu.Unlock()
	if expired {
		delete(b.procs, found.pid)
		return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("process with pid %d not found", found.pid))
	}
	return found, nil
}

func (ps *processService) Connect(ctx context.Context, req *connect.Request[process.ConnectRequest], stream *connect.ServerStream[process.ConnectResponse]) error {
	if _, err := rpcUser(req.Header()); err != nil {
		return err
	}
	p, err := ps.find(ctx, req.Msg.GetProcess())
	if err != nil {
		return err
	}
	sb := p.subscribe()
	defer p.unsubscribe(sb)
	if err := stream.Send(&process.ConnectResponse{Event: startEvent(p.pid)}); err != nil {
		return err
	}
	p.mu.Lock()
	end := p.end
	p.mu.Unlock()
	if end != nil {
		// Exited: envd replays the end event for a while.
		return stream.Send(&process.ConnectResponse{Event: &process.ProcessEvent{Event: &process.ProcessEvent_End{End: end}}})
	}
	return ps.pump(ctx, req.Header().Get("Keepalive-Ping-Interval"), p, sb, func(ev *process.ProcessEvent) error {
		return stream.Send(&process.ConnectResponse{Event: ev})
	})
}

func (ps *processService) List(ctx context.Context, req *connect.Request[process.ListRequest]) (*connect.Response[process.ListResponse], error) {
	if _, err := rpcUser(req.Header()); err != nil {
		return nil, err
	}
	b := boxOf(ctx)
	ps.s.mu.Lock()
	defer ps.s.mu.Unlock()
	out := &process.ListResponse{}
	for _, p := range b.procs {
		select {
		case <-p.done:
			continue
		default:
		}
		pi := &process.ProcessInfo{Config: p.config, Pid: p.pid}
		if p.tag != "" {
			tag := p.tag
			pi.Tag = &tag
		}
		out.Processes = append(out.Processes, pi)
	}
	return connect.NewResponse(out), nil
}

func (ps *processService) input(ctx context.Context, sel *process.ProcessSelector, in *process.ProcessInput) error {
	p, err := ps.find(ctx, sel)
	if err != nil {
		return err
	}
	if in.GetPty() != nil || p.term != nil {
		return ptyInput(ctx, p, in)
	}
	if in.GetInput() == nil {
		return connect.NewError(connect.CodeUnimplemented, fmt.Errorf("invalid input type %T", in.GetInput()))
	}
	if p.stdin == nil {
		return connect.NewError(connect.CodeInternal, fmt.Errorf("error writing to stdin of process %d: %w", p.pid, errStdinClosed))
	}
	if _, err := p.stdin.Write(in.GetStdin()); err != nil {
		return connect.NewError(connect.CodeInternal, fmt.Errorf("error writing to stdin of process %d: %w", p.pid, err))
	}
	return nil
}

func (ps *processService) SendInput(ctx context.Context, req *connect.Request[process.SendInputRequest]) (*connect.Response[process.SendInputResponse], error) {
	if _, err := rpcUser(req.Header()); err != nil {
		return nil, err
	}
	if err := ps.input(ctx, req.Msg.GetProcess(), req.Msg.GetInput()); err != nil {
		return nil, err
	}
	return connect.NewResponse(&process.SendInputResponse{}), nil
}

func (ps *processService) StreamInput(ctx context.Context, stream *connect.ClientStream[process.StreamInputRequest]) (*connect.Response[process.StreamInputResponse], error) {
	if _, err := rpcUser(stream.RequestHeader()); err != nil {
		return nil, err
	}
	var sel *process.ProcessSelector
	for stream.Receive() {
		switch ev := stream.Msg().GetEvent().(type) {
		case *process.StreamInputRequest_Start:
			sel = ev.Start.GetProcess()
			if _, err := ps.find(ctx, sel); err != nil {
				return nil, err
			}
		case *process.StreamInputRequest_Data:
			if sel == nil {
				return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("first message must be a start event"))
			}
			if err := ps.input(ctx, sel, ev.Data.GetInput()); err != nil {
				return nil, err
			}
		}
	}
	if err := stream.Err(); err != nil {
		return nil, err
	}
	return connect.NewResponse(&process.StreamInputResponse{}), nil
}

func (ps *processService) SendSignal(ctx context.Context, req *connect.Request[process.SendSignalRequest]) (*connect.Response[process.SendSignalResponse], error) {
	if _, err := rpcUser(req.Header()); err != nil {
		return nil, err
	}
	p, err := ps.find(ctx, req.Msg.GetProcess())
	if err != nil {
		return nil, err
	}
	var sig syscall.Signal
	switch req.Msg.GetSignal() {
	case process.Signal_SIGNAL_SIGKILL:
		sig = syscall.SIGKILL
	case process.Signal_SIGNAL_SIGTERM:
		sig = syscall.SIGTERM
	default:
		return nil, connect.NewError(connect.CodeUnimplemented, fmt.Errorf("invalid signal: %s", req.Msg.GetSignal()))
	}
	select {
	case <-p.done:
		return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("process with pid %d not found", p.pid))
	default:
	}
	if err := p.signal(sig); err != nil {
		return nil, connect.NewError(connect.CodeInternal, fmt.Errorf("error sending signal: %w", err))
	}
	return connect.NewResponse(&process.SendSignalResponse{}), nil
}

func (ps *processService) CloseStdin(ctx context.Context, req *connect.Request[process.CloseStdinRequest]) (*connect.Response[process.CloseStdinResponse], error) {
	if _, err := rpcUser(req.Header()); err != nil {
		return nil, err
	}
	p, err := ps.find(ctx, req.Msg.GetProcess())
	if err != nil {
		return nil, err
	}
	if p.term != nil {
		return nil, connect.NewError(connect.CodeUnknown, errors.New("error closing stdin: cannot close stdin for PTY process — send Ctrl+D (0x04) instead"))
	}
	if p.stdin != nil {
		_ = p.stdin.Close()
	}
	return connect.NewResponse(&process.CloseStdinResponse{}), nil
}

// ---------------------------------------------------------------------------
// filesystem.Filesystem

type filesystemService struct {
	filesystemconnect.UnimplementedFilesystemHandler
	s *Server
}

func entry(fi driver.FileInfo) *filesystem.EntryInfo {
	e := &filesystem.EntryInfo{
		Name: path.Base(fi.Path), Path: fi.Path, Size: fi.Size, Mode: uint32(fi.Mode.Perm()),
		Permissions: fi.Mode.String(), Owner: defaultUser, Group: defaultUser,
		ModifiedTime: timestamppb.New(fi.ModTime),
	}
	switch {
	case fi.Mode&fs.ModeSymlink != 0:
		e.Type = filesystem.FileType_FILE_TYPE_SYMLINK
	case fi.Mode.IsDir():
		e.Type = filesystem.FileType_FILE_TYPE_DIRECTORY
	default:
		e.Type = filesystem.FileType_FILE_TYPE_FILE
	}
	if fi.LinkTarget != "" {
		t := fi.LinkTarget
		e.SymlinkTarget = &t
	}
	return e
}

// fsErr maps a backend error onto envd's Connect codes.
func fsErr(err error, p string) error {
	switch sberrors.CodeOf(err) {
	case sberrors.NotFound:
		return connect.NewError(connect.CodeNotFound, fmt.Errorf("no such file or directory: %s", p))
	case sberrors.PermissionDenied:
		return connect.NewError(connect.CodePermissionDenied, fmt.Errorf("permission denied: %s", p))
	}
	if errors.Is(err, sberrors.ErrNotDirectory) || errors.Is(err, sberrors.ErrIsDirectory) {
		return connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("%s: %s", err, p))
	}
	if sberrors.CodeOf(err) == sberrors.InvalidArgument {
		// envd answers EINVAL (a directory moved into itself) and
		// ENAMETOOLONG as internal errors, in Go's words.
		why := "invalid argument"
		if errors.Is(err, pathsafe.ErrTooLong) {
			why = "file name too long"
		}
		return connect.NewError(connect.CodeInternal, fmt.Errorf("error on %s: %s", iox.Shorten(p, 64), why))
	}
	return connect.NewError(connect.CodeInternal, fmt.Errorf("error on %s: %w", p, err))
}

func (f *filesystemService) Stat(ctx context.Context, req *connect.Request[filesystem.StatRequest]) (*connect.Response[filesystem.StatResponse], error) {
	if _, err := rpcUser(req.Header()); err != nil {
		return nil, err
	}
	b := boxOf(ctx)
	p := resolve(b.home, req.Msg.GetPath())
	fi, err := f.s.backend.Stat(ctx, b.backendID, p)
	if l, ok := f.s.lstatLink(ctx, b, p, fi); ok {
		// envd's Stat is an lstat: a link is described as itself.
		return connect.NewResponse(&filesystem.StatResponse{Entry: entry(l)}), nil
	}
	if err != nil {
		return nil, fsErr(err, p)
	}
	fi.Path = p
	e := entry(fi)
	if !fi.IsDir() {
		// Only a directory's owner is asked for (one command per Stat is
		// costly over a backend of real processes); a file is reported as
		// the default user's.
		return connect.NewResponse(&filesystem.StatResponse{Entry: e}), nil
	}
	var stickyBit bool
	e.Owner, e.Group, stickyBit = f.s.owner(ctx, b, p)
	if stickyBit && fi.Mode&fs.ModeSticky == 0 {
		// envd's permission string shows it ("dtrwxrwxrwx"); a backend's
		// FileInfo may leave it out.
		e.Permissions = (fi.Mode | fs.ModeSticky).String()
	}
	return connect.NewResponse(&filesystem.StatResponse{Entry: e}), nil
}

func (f *filesystemService) MakeDir(ctx context.Context, req *connect.Request[filesystem.MakeDirRequest]) (*connect.Response[filesystem.MakeDirResponse], error) {
	if _, err := rpcUser(req.Header()); err != nil {
		return nil, err
	}
	b := boxOf(ctx)
	p := resolve(b.home, req.Msg.GetPath())
	// envd stats the path first: a stat error other than "does not exist"
	// (a parent that is a file: ENOTDIR) is internal.
	fi, err := f.s.backend.Stat(ctx, b.backendID, p)
	switch {
	case err == nil && fi.IsDir():
		return nil, connect.NewError(connect.CodeAlreadyExists, fmt.Errorf("directory already exists: %s", p))
	case err == nil:
		return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("path already exists but it is not a directory: %s", p))
	case errors.Is(err, sberrors.ErrNotDirectory):
		return nil, notDirStat(p)
	}
	if err := f.s.backend.MkdirAll(ctx, b.backendID, p); err != nil {
		if errors.Is(err, sberrors.ErrNotDirectory) {
			// A backend whose Stat says NotFound below a file.
			return nil, notDirStat(p)
		}
		if sberrors.CodeOf(err) == sberrors.PermissionDenied {
			return nil, connect.NewError(connect.CodeInternal, fmt.Errorf("error creating directory: mkdir %s: permission denied", p))
		}
		return nil, fsErr(err, p)
	}
	fi, err = f.s.backend.Stat(ctx, b.backendID, p)
	if err != nil {
		return nil, fsErr(err, p)
	}
	return connect.NewResponse(&filesystem.MakeDirResponse{Entry: entry(fi)}), nil
}

// notDirStat is envd's answer to a stat through a regular file.
func notDirStat(p string) error {
	return connect.NewError(connect.CodeInternal, fmt.Errorf("error getting file info: stat %s: not a directory", p))
}

func (f *filesystemService) Move(ctx context.Context, req *connect.Request[filesystem.MoveRequest]) (*connect.Response[filesystem.MoveResponse], error) {
	if _, err := rpcUser(req.Header()); err != nil {
		return nil, err
	}
	b := boxOf(ctx)
	src, dst := resolve(b.home, req.Msg.GetSource()), resolve(b.home, req.Msg.GetDestination())
	for _, p := range []string{src, dst} {
		if err := f.s.writes.Wait(ctx, writeKey(b, p)); err != nil {
			return nil, connect.NewError(connect.CodeCanceled, err)
		}
	}
	if _, err := f.s.backend.Stat(ctx, b.backendID, src); err != nil {
		return nil, fsErr(err, src)
	}
	if err := f.s.backend.MkdirAll(ctx, b.backendID, path.Dir(dst)); err != nil {
		return nil, fsErr(err, dst)
	}
	if sfi, err := f.s.backend.Stat(ctx, b.backendID, src); err == nil && !sfi.IsDir() {
		if dfi, err := f.s.backend.Stat(ctx, b.backendID, dst); err == nil && dfi.IsDir() {
			// Go's os.Rename refuses a directory target itself, with EEXIST.
			return nil, connect.NewError(connect.CodeInternal, fmt.Errorf("error renaming: rename %s %s: file exists", src, dst))
		}
	}
	if err := f.s.backend.Rename(ctx, b.backendID, src, dst); err != nil {
		return nil, fsErr(err, src)
	}
	fi, err := f.s.backend.Stat(ctx, b.backendID, dst)
	if err != nil {
		return nil, fsErr(err, dst)
	}
	return connect.NewResponse(&filesystem.MoveResponse{Entry: entry(fi)}), nil
}

func (f *filesystemService) ListDir(ctx context.Context, req *connect.Request[filesystem.ListDirRequest]) (*connect.Response[filesystem.ListDirResponse], error) {
	if _, err := rpcUser(req.Header()); err != nil {
		return nil, err
	}
	b := boxOf(ctx)
	p := resolve(b.home, req.Msg.GetPath())
	depth := max(req.Msg.GetDepth(), 1)
	fi, err := f.s.backend.Stat(ctx, b.backendID, p)
	if err != nil {
		return nil, fsErr(err, p)
	}
	if !fi.IsDir() {
		return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("path is not a directory: %s", p))
	}
	out := &filesystem.ListDirResponse{}
	var walk func(dir string, level uint32) error
	walk = func(dir string, level uint32) error {
		list, err := f.s.backend.ReadDir(ctx, b.backendID, dir)
		if err != nil {
			return fsErr(err, dir)
		}
		for _, e := range list {
			e.Path = path.Join(dir, path.Base(e.Path))
			out.Entries = append(out.Entries, entry(e))
			if e.IsDir() && level < depth {
				if err := walk(e.Path, level+1); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if err := walk(p, 1); err != nil {
		return nil, err
	}
	return connect.NewResponse(out), nil
}

func (f *filesystemService) Remove(ctx context.Context, req *connect.Request[filesystem.RemoveRequest]) (*connect.Response[filesystem.RemoveResponse], error) {
	if _, err := rpcUser(req.Header()); err != nil {
		return nil, err
	}
	b := boxOf(ctx)
	p := resolve(b.home, req.Msg.GetPath())
	if err := f.s.writes.Wait(ctx, writeKey(b, p)); err != nil {
		return nil, connect.NewError(connect.CodeCanceled, err)
	}
	if err := f.s.backend.Remove(ctx, b.backendID, p); err != nil && sberrors.CodeOf(err) != sberrors.NotFound {
		return nil, fsErr(err, p)
	}
	return connect.NewResponse(&filesystem.RemoveResponse{}), nil
}

// lstatLink describes p as envd's lstat does when p is a symbolic link
// (the backend's Stat follows links): type link, mode 0777, and the
// target as an absolute path. fi is the backend's (following) Stat of p,
// which may already name the target.
func (s *Server) lstatLink(ctx context.Context, b *box, p string, fi driver.FileInfo) (driver.FileInfo, bool) {
	if p == "/" {
		return driver.FileInfo{}, false
	}
	list, err := s.backend.ReadDir(ctx, b.backendID, path.Dir(p))
	if err != nil {
		return driver.FileInfo{}, false
	}
	i := slices.IndexFunc(list, func(e driver.FileInfo) bool { return e.Name() == path.Base(p) })
	if i < 0 || list[i].Mode&fs.ModeSymlink == 0 {
		return driver.FileInfo{}, false
	}
	l := list[i]
	t := fi.LinkTarget
	if t == "" {
		t = l.LinkTarget
	}
	if t == "" {
		var out bytes.Buffer
		st, err := s.backend.Exec(ctx, b.backendID, &driver.Command{
			Args: []string{"readlink", "--", p}, Dir: b.home, Env: map[string]string{},
			Stdout: &out, Stderr: io.Discard, Timeout: time.Minute,
		})
		if err == nil && st.ExitCode == 0 {
			t = strings.TrimSuffix(out.String(), "\n")
		}
	}
	// The size is the link's own, as lstat's: its target as stored.
	size := int64(len(t))
	if t != "" && !path.IsAbs(t) {
		t = path.Join(path.Dir(p), t)
	}
	return driver.FileInfo{Path: p, Size: size, Mode: fs.ModeSymlink | 0o777, ModTime: l.ModTime, LinkTarget: t}, true
}

// ownerScript prints the numeric owner and group of $1 (not following a
// link, as envd's lstat), their names, and its octal mode.
const ownerScript = `exec stat -c '%u %g %U %G %a' -- "$1"`

// owner reports who owns p as envd does: user and group names, or the
// numeric ids where the sandbox has no name for them; and whether p has
// the sticky bit. The backend's file API does not say, so a command in
// the sandbox asks; where it cannot, the default user is reported.
func (s *Server) owner(ctx context.Context, b *box, p string) (user, group string, sticky bool) {
	var out bytes.Buffer
	st, err := s.backend.Exec(ctx, b.backendID, &driver.Command{
		Args: []string{"sh", "-c", ownerScript, "sh", p}, Dir: b.home, Env: map[string]string{},
		Stdout: &out, Stderr: io.Discard, Timeout: time.Minute,
	})
	f := strings.Fields(out.String())
	if err != nil || st.ExitCode != 0 || len(f) != 5 {
		return defaultUser, defaultUser, false
	}
	if m, err := strconv.ParseUint(f[4], 8, 32); err == nil {
		sticky = m&0o1000 != 0
	}
	user, group = f[2], f[3]
	if user == "UNKNOWN" {
		user = f[0]
	}
	if group == "UNKNOWN" {
		group = f[1]
	}
	return user, group, sticky
}
