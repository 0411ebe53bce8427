package memory

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"mvdan.cc/sh/v3/expand"
	"mvdan.cc/sh/v3/interp"
	"mvdan.cc/sh/v3/syntax"
)

// Shell lines run in mvdan.cc/sh/v3's POSIX shell interpreter (bash syntax
// for "bash -c"), whose file, directory, stat and access calls go to the
// sandbox's in-memory files and whose external commands are the registered
// Handlers, then the utilities of utils.go, then "name: command not found"
// with exit status 127.

// pwdPhysical is the internal command "pwd -P" is rewritten to, since the
// interpreter's own pwd -P resolves links on the host's file system.
const pwdPhysical = "\x00pwd -P"

// lookupCmd is the internal command "command -v" and "type" are rewritten
// to: they answer from the shell's builtins, the registered
// Handlers and the utilities, never the host's PATH.
const lookupCmd = "\x00command -v"

// runShell interprets script for call c and returns its exit status.
// bash selects bash syntax; name is $0.
func (rt *Runtime) runShell(ctx context.Context, c *Call, script string, bash bool) int {
	name := "sh"
	if bash {
		name = "bash"
	}
	if len(c.Positional) > 0 {
		name = c.Positional[0]
	}
	lang := syntax.LangPOSIX
	if bash {
		lang = syntax.LangBash
	}
	file, err := syntax.NewParser(syntax.Variant(lang)).Parse(strings.NewReader(script), name)
	if err != nil {
		fmt.Fprintf(c.Stderr, "%v\n", err) // "name:line:col: message"
		return 2
	}
	rewriteFDs(file)
	state := &shellState{}
	stdin, stop := shellStdin(ctx, c.Stdin, true)
	defer stop()
	v := &vfs{rt: rt, id: c.SandboxID, dir: c.Dir}
	pairs := make([]string, 0, len(c.Env))
	for _, k := range sortedKeys(c.Env) {
		pairs = append(pairs, k+"="+c.Env[k])
	}
	var params []string
	if len(c.Positional) > 1 {
		params = append([]string{"--"}, c.Positional[1:]...)
	}
	opts := []interp.RunnerOption{
		interp.Env(expand.ListEnviron(pairs...)),
		func(r *interp.Runner) error { r.Dir = c.Dir; return nil },
		interp.StdIO(stdin, c.Stdout, c.Stderr),
		interp.OpenHandler(v.openHandler(state)),
		interp.StatHandler(v.statHandler),
		interp.ReadDirHandler2(v.readDirHandler),
		interp.AccessHandler(v.accessHandler),
		interp.CallHandler(func(ctx context.Context, args []string) ([]string, error) {
			if args[0] == "set" {
				out, ok := state.setOptions(args)
				if !ok {
					return []string{":"}, nil
				}
				args = out
			}
			return v.callHandler(ctx, args)
		}),
		interp.ExecHandler(func(ctx context.Context, args []string) error {
			if args[0] == fdCmd {
				return state.fdExec(ctx, v.at(ctx), args[1:])
			}
			return rt.execHandler(ctx, c, args)
		}),
	}
	if params != nil {
		opts = append(opts, interp.Params(params...))
	}
	runner, err := interp.New(opts...)
	if err != nil {
		fmt.Fprintf(c.Stderr, "%s: %v\n", name, err)
		return 2
	}
	err = runner.Run(ctx, file)
	if !runner.Exited() {
		// Background jobs ("cmd &") end before the command does, so no
		// goroutine outlives it; the command's context bounds the wait.
		_ = runner.Run(ctx, waitStmt)
	}
	return exitCode(ctx, c, name, err)
}

var waitStmt = func() *syntax.File {
	f, err := syntax.NewParser().Parse(strings.NewReader("wait"), "")
	if err != nil {
		panic(err)
	}
	return f
}()

func exitCode(ctx context.Context, c *Call, name string, err error) int {
	if err == nil {
		return 0
	}
	if st, ok := interp.IsExitStatus(err); ok {
		return int(st)
	}
	if ctx.Err() != nil {
		return -1
	}
	fmt.Fprintf(c.Stderr, "%s: %v\n", name, err)
	return 2
}

// shellStdin turns the command's stdin into the *os.File the interpreter
// needs. It owns the copy: stop closes both ends and no new Read of r
// starts after it returns (a Read already blocked is abandoned, its data
// discarded). A nil or empty stdin is no file at all (closed input).
//
// inner is set for a script run inside a command, whose *os.File stdin is
// already such a pipe.
func shellStdin(ctx context.Context, r io.Reader, inner bool) (*os.File, func()) {
	if r == nil {
		return nil, func() {}
	}
	if br, ok := r.(*bytes.Reader); ok && br.Len() == 0 {
		return nil, func() {}
	}
	if f, ok := r.(*os.File); ok && inner {
		return f, func() {} // runTop's pipe, which it closes
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, func() {}
	}
	var stopped atomic.Bool
	var closeW sync.Once
	closePW := func() { closeW.Do(func() { _ = pw.Close() }) }
	go func() {
		defer closePW()
		buf := make([]byte, 32<<10)
		for !stopped.Load() && ctx.Err() == nil {
			n, err := r.Read(buf)
			if n > 0 && !stopped.Load() {
				if _, werr := pw.Write(buf[:n]); werr != nil {
					return
				}
			}
			if err != nil {
				return
			}
		}
	}()
	// The command's end (its context) closes the write end so a reader
	// blocked on stdin sees end of file.
	unwatch := context.AfterFunc(ctx, closePW)
	return pr, func() {
		unwatch()
		stopped.Store(true)
		closePW()
		_ = pr.Close()
	}
}

// env returns the exported variables of a handler's context.
func handlerEnv(hc interp.HandlerContext) map[string]string {
	env := map[string]string{}
	hc.Env.Each(func(name string, vr expand.Variable) bool {
		if vr.Exported && vr.Kind == expand.String {
			env[name] = vr.Str
		}
		return true
	})
	return env
}

// handlerStdin is a handler's stdin; a closed one (a nil *os.File) reads
// as empty.
func handlerStdin(hc interp.HandlerContext) io.Reader {
	switch f := hc.Stdin.(type) {
	case nil:
		return bytes.NewReader(nil)
	case *os.File:
		if f == nil {
			return bytes.NewReader(nil)
		}
	}
	return hc.Stdin
}

// execHandler runs one simple command of a shell line.
func (rt *Runtime) execHandler(ctx context.Context, parent *Call, args []string) error {
	hc := interp.HandlerCtx(ctx)
	c := &Call{SandboxID: parent.SandboxID, Args: args, Dir: hc.Dir, Env: handlerEnv(hc),
		Stdin: handlerStdin(hc), Stdout: hc.Stdout, Stderr: hc.Stderr,
		Files: &Files{rt: rt, id: parent.SandboxID, dir: hc.Dir}, Network: parent.Network, Secrets: parent.Secrets}
	if args[0] == lookupCmd {
		code := 0
		for _, name := range args[2:] {
			switch {
			case interp.IsBuiltin(name):
				if args[1] == "type" {
					fmt.Fprintf(c.Stdout, "%s is a shell builtin\n", name)
				} else {
					fmt.Fprintln(c.Stdout, name)
				}
			case rt.hasCommand(name):
				p := name
				if !strings.Contains(name, "/") {
					p = "/usr/bin/" + name
				}
				if args[1] == "type" {
					fmt.Fprintf(c.Stdout, "%s is %s\n", name, p)
				} else {
					fmt.Fprintln(c.Stdout, p)
				}
			default:
				if args[1] == "type" {
					fmt.Fprintf(c.Stderr, "type: %s: not found\n", name)
				}
				code = 1
			}
		}
		if code != 0 {
			return interp.NewExitStatus(uint8(code))
		}
		return nil
	}
	if args[0] == pwdPhysical {
		v := &vfs{rt: rt, id: c.SandboxID, dir: c.Dir}
		p, err := v.resolve(c.Dir, true, true)
		if err != nil {
			fmt.Fprintf(c.Stderr, "pwd: %v\n", errText(err))
			return interp.NewExitStatus(1)
		}
		fmt.Fprintln(c.Stdout, p)
		return nil
	}
	code := rt.dispatch(ctx, c)
	if err := ctx.Err(); err != nil {
		return err // ends the interpreter: the command is over
	}
	if code == 0 {
		return nil
	}
	return interp.NewExitStatus(uint8(code))
}

// callHandler rewrites the builtins whose options the interpreter lacks
// or that would look at the host: "cd -P/-L [--] dir" (a physical cd
// resolves links in the sandbox), "pwd -P", "test X -ef Y", and a bare
// "return", which must return the last command's status.
func (v *vfs) callHandler(ctx context.Context, args []string) ([]string, error) {
	switch args[0] {
	case "cd":
		physical := false
		rest := args[1:]
	opts:
		for len(rest) > 0 {
			switch rest[0] {
			case "-P":
				physical = true
			case "-L":
				physical = false
			case "--":
				rest = rest[1:]
				break opts
			default:
				break opts
			}
			rest = rest[1:]
		}
		if physical && len(rest) == 1 && rest[0] != "-" {
			hc := interp.HandlerCtx(ctx)
			w := &vfs{rt: v.rt, id: v.id, dir: hc.Dir}
			if p, err := w.resolve(rest[0], true, true); err == nil {
				return []string{"cd", p}, nil
			}
		}
		return append([]string{"cd"}, rest...), nil
	case "pwd":
		if slices.Contains(args[1:], "-P") {
			return []string{pwdPhysical}, nil
		}
	case "command", "type":
		// "command -v NAME" and "type NAME" would search the host's PATH.
		if args[0] == "type" || (len(args) > 2 && args[1] == "-v") {
			names := args[1:]
			if args[0] == "command" {
				names = args[2:]
			}
			return append([]string{lookupCmd, args[0]}, names...), nil
		}
	case "return":
		// POSIX: a bare return returns the status of the last command;
		// the interpreter returns 0.
		if len(args) == 1 {
			return []string{"return", strconv.Itoa(interp.HandlerCtx(ctx).LastExitStatus)}, nil
		}
	case "test", "[":
		// "X -ef Y": the interpreter compares host file identities, so
		// the sandbox's are compared here (device and inode).
		ops := args[1:]
		if args[0] == "[" && len(ops) > 0 && ops[len(ops)-1] == "]" {
			ops = ops[:len(ops)-1]
		}
		if len(ops) == 3 && ops[1] == "-ef" {
			w := v.at(ctx)
			a, errA := w.stat(ops[0], true)
			b, errB := w.stat(ops[2], true)
			if errA == nil && errB == nil && a.ino == b.ino {
				return []string{"true"}, nil
			}
			return []string{"false"}, nil
		}
	}
	return args, nil
}

func (v *vfs) at(ctx context.Context) *vfs {
	return &vfs{rt: v.rt, id: v.id, dir: interp.HandlerCtx(ctx).Dir}
}

// openHandler opens redirection targets in the sandbox.
func (v *vfs) openHandler(state *shellState) interp.OpenHandlerFunc {
	return func(ctx context.Context, p string, flag int, perm os.FileMode) (io.ReadWriteCloser, error) {
		hc := interp.HandlerCtx(ctx)
		switch p {
		case "/dev/null":
			return devNull{}, nil
		case "/dev/stdout", "/dev/fd/1":
			return writeOnly{hc.Stdout}, nil
		case "/dev/stderr", "/dev/fd/2":
			return writeOnly{hc.Stderr}, nil
		case "/dev/stdin", "/dev/fd/0":
			return readOnly{handlerStdin(hc)}, nil
		}
		w := v.at(ctx)
		if rest, ok := strings.CutPrefix(p, "/dev/fd/"); ok {
			if n, err := strconv.Atoi(rest); err == nil {
				return state.openFD(w, n, flag&(os.O_WRONLY|os.O_RDWR) != 0)
			}
		}
		if flag&os.O_TRUNC != 0 && state.clobberGuard() {
			flag |= os.O_EXCL // set -C: ">" does not overwrite a file
		}
		if flag&(os.O_WRONLY|os.O_RDWR) == 0 {
			data, err := w.readFile(p)
			if err != nil {
				return nil, err
			}
			return hostCopy(data)
		}
		n, err := w.openWrite(p, flag, perm)
		if err != nil {
			return nil, err
		}
		return &memWriter{v: w, n: n}, nil
	}
}

// hostCopy returns an unlinked host temporary file holding data: an input
// redirection needs an *os.File, or the interpreter feeds it through a
// pipe from a goroutine that a command that stops reading would strand.
func hostCopy(data []byte) (*os.File, error) {
	f, err := os.CreateTemp("", "sandboxkit-memory-*")
	if err != nil {
		return nil, err
	}
	_ = os.Remove(f.Name())
	if _, err := f.Write(data); err != nil {
		f.Close()
		return nil, err
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// memWriter writes into a node: at the end, or at *off for a descriptor
// with an offset.
type memWriter struct {
	v   *vfs
	n   *node
	off *int
}

func (w *memWriter) Read([]byte) (int, error) { return 0, syscall.EBADF }
func (w *memWriter) Write(p []byte) (int, error) {
	if w.off != nil {
		w.v.writeAt(w.n, w.off, p)
		return len(p), nil
	}
	w.v.appendTo(w.n, p)
	return len(p), nil
}
func (w *memWriter) Close() error { return nil }

type devNull struct{}

func (devNull) Read([]byte) (int, error)    { return 0, io.EOF }
func (devNull) Write(p []byte) (int, error) { return len(p), nil }
func (devNull) Close() error                { return nil }

type writeOnly struct{ w io.Writer }

func (w writeOnly) Read([]byte) (int, error)    { return 0, syscall.EBADF }
func (w writeOnly) Write(p []byte) (int, error) { return w.w.Write(p) }
func (w writeOnly) Close() error                { return nil }

type readOnly struct{ r io.Reader }

func (r readOnly) Read(p []byte) (int, error) { return r.r.Read(p) }
func (r readOnly) Write([]byte) (int, error)  { return 0, syscall.EBADF }
func (r readOnly) Close() error               { return nil }

func (v *vfs) statHandler(ctx context.Context, name string, follow bool) (fs.FileInfo, error) {
	fi, err := v.at(ctx).stat(name, follow)
	if err != nil {
		return nil, err
	}
	return fi, nil
}

func (v *vfs) readDirHandler(ctx context.Context, p string) ([]fs.DirEntry, error) {
	list, err := v.at(ctx).readDir(p)
	if err != nil {
		return nil, err
	}
	out := make([]fs.DirEntry, len(list))
	for i, e := range list {
		out[i] = fs.FileInfoToDirEntry(e.info)
	}
	return out, nil
}

func (v *vfs) accessHandler(ctx context.Context, p string, mode interp.AccessMode) error {
	return v.at(ctx).access(p, mode&interp.AccessRead != 0, mode&interp.AccessWrite != 0, mode&interp.AccessExec != 0)
}

// errText is an error as coreutils print it: "No such file or directory".
func errText(err error) string {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		s := errno.Error()
		return strings.ToUpper(s[:1]) + s[1:]
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return errText(pe.Err)
	}
	return err.Error()
}

// runScriptFile runs a sandbox file as a shell script (no "#!" line, or
// one naming sh or bash), for a command given by path.
func (rt *Runtime) runScriptFile(ctx context.Context, c *Call) (int, bool) {
	v := &vfs{rt: rt, id: c.SandboxID, dir: c.Dir}
	fi, err := v.stat(c.Args[0], true)
	if err != nil {
		fmt.Fprintf(c.Stderr, "%s: %s\n", c.Args[0], errText(err))
		return 127, true
	}
	if fi.IsDir() || fi.mode.Perm()&0o100 == 0 {
		fmt.Fprintf(c.Stderr, "%s: Permission denied\n", c.Args[0])
		return 126, true
	}
	data, err := v.readFile(c.Args[0])
	if err != nil {
		fmt.Fprintf(c.Stderr, "%s: %s\n", c.Args[0], errText(err))
		return 126, true
	}
	bash := false
	if line, ok := bytes.CutPrefix(data, []byte("#!")); ok {
		first, _, _ := bytes.Cut(line, []byte("\n"))
		words := strings.Fields(string(first))
		prog := ""
		if len(words) > 0 {
			prog = path.Base(words[0])
		}
		if prog == "env" && len(words) > 1 {
			prog = words[1]
		}
		switch prog {
		case "sh", "dash":
		case "bash":
			bash = true
		default:
			return 0, false
		}
	}
	sc := *c
	sc.Positional = slices.Clone(c.Args)
	return rt.runShell(ctx, &sc, string(data), bash), true
}

// readerCtx makes reads from r give up when ctx ends, so a cat on an open
// stdin does not outlive its command.
func readerCtx(ctx context.Context, r io.Reader) io.Reader {
	return &ctxReader{ctx: ctx, r: r}
}

type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c *ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

// hasCommand reports whether name runs: a Handler or a utility.
func (rt *Runtime) hasCommand(name string) bool {
	rt.mu.Lock()
	_, ok := rt.handlers[name]
	if !ok {
		_, ok = rt.handlers[path.Base(name)]
	}
	rt.mu.Unlock()
	if ok {
		return true
	}
	_, ok = utilities[path.Base(name)]
	return ok
}
