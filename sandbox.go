package sandbox

import (
	"bytes"
	"context"
	"errors"
	"io"
	"maps"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/sandboxkit/sandbox/driver"
	"github.com/sandboxkit/sandbox/internal/iox"
	"github.com/sandboxkit/sandbox/internal/pathsafe"
)

// Sandbox is a handle on one sandbox. It is safe for concurrent use. It
// holds no resources: dropping it leaves the sandbox running until Destroy
// or the end of its lease.
type Sandbox struct {
	c       *Client
	id      string
	secrets [][]byte
	owned   bool // created through this handle's Client, or attached with Own
	// brokered are the brokered secrets the sandbox was created with, as
	// the creating handle (or a fork's) knows them; Fork carries them
	// over. Nil on a handle that never learnt them.
	brokered []BrokeredSecret

	mu   sync.Mutex
	info Info
	// started holds the secret values (Command.SecretEnv,
	// TerminalOptions.SecretEnv) of everything started through the
	// handle, each once: they are redacted, with the sandbox's, from
	// Processes and from the handle's attaches (see AttachProcessWith).
	started map[string]struct{}

	// leaseMu serialises coverLease, so that commands started together
	// extend the lease once, not once each. A holder's wait is bounded by
	// the look-up and lease call timeouts.
	leaseMu sync.Mutex
}

// ID returns the provider's id of the sandbox.
// A nil handle has the empty id.
func (s *Sandbox) ID() string {
	if s == nil {
		return ""
	}
	return s.id
}

// Client returns the Client the handle belongs to.
// A nil handle has none, and a nil Client's TracerProvider and
// MeterProvider are the global ones, so a layer above can start its span
// before it refuses a nil sandbox.
func (s *Sandbox) Client() *Client {
	if s == nil {
		return nil
	}
	return s.c
}

// Info returns the sandbox's Info as last seen by this handle (at create,
// attach, Refresh, Resume or SetTimeout). Use Refresh for the current state.
func (s *Sandbox) Info() Info {
	s.mu.Lock()
	defer s.mu.Unlock()
	in := s.info
	in.Labels = maps.Clone(in.Labels)
	in.Detail = maps.Clone(in.Detail)
	if in.Network != nil {
		n := *in.Network
		n.Allow, n.Deny = slices.Clone(n.Allow), slices.Clone(n.Deny)
		in.Network = &n
	}
	in.BrokeredSecrets = cloneBrokeredInfo(in.BrokeredSecrets)
	return in
}

// Home returns the sandbox's home directory: relative paths start there.
func (s *Sandbox) Home() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.info.Home
}

func (s *Sandbox) setInfo(in Info) {
	if in.ID == "" {
		return
	}
	if in.Home == "" {
		in.Home = "/"
	}
	s.mu.Lock()
	if len(in.BrokeredSecrets) == 0 || len(s.info.BrokeredSecrets) > 0 {
		// Brokered secrets cannot change while the sandbox lives: what
		// this handle knows (from Create, with Env and placeholders) stays
		// when the provider reports less.
		in.BrokeredSecrets = s.info.BrokeredSecrets
	}
	s.info = in
	s.mu.Unlock()
}

func (s *Sandbox) wrap(op, path string, err error) error {
	return redactErr(s.c.wrap(op, s.id, path, err), s.secrets)
}

// path validates p and resolves it against the home directory. A path
// with control characters, or over the Linux limits (pathsafe.MaxPath
// bytes in all, pathsafe.MaxName bytes per name, as given or resolved),
// is refused with InvalidArgument naming the input, shown shortened.
func (s *Sandbox) path(op, name, p string) (string, error) {
	abs, err := pathsafe.Resolve(s.Home(), p)
	if err != nil {
		return "", invalid(op, s.c.rt.Name(), s.id, name, "%s: %v", shortPath(p), err)
	}
	return abs, nil
}

// maxArgBytes is the longest single argument, Shell line or NAME=value
// environment string a command may have: Linux refuses to exec a program
// with a longer one (MAX_ARG_STRLEN, 32 pages of 4 KiB with the NUL), and
// every provider execs on Linux, so the portable layer refuses it first
// with InvalidArgument rather than letting each provider fail its own way
// (an exit 127 on one, an error on another).
const maxArgBytes = 128<<10 - 1

// maxArgvBytes bounds a command's arguments and environment together,
// each string counted with its NUL and its pointer as execve(2) counts
// them: Linux refuses to exec past ARG_MAX (a quarter of the stack limit,
// 2 MiB by default), and the sandbox's own environment and a provider's
// wrapper (a shell, nice) count too, so 256 KiB of that is left to them.
// Refused by the portable layer with InvalidArgument, so that no provider
// runs it, exits 127, or echoes megabytes back in its error.
const maxArgvBytes = 2<<20 - 256<<10

// argvBytes is what a command's strings take of ARG_MAX (see maxArgvBytes).
func argvBytes(cmd *Command) int {
	const ptr = 8
	n := len(cmd.Shell) + 1 + ptr
	for _, a := range cmd.Args {
		n += len(a) + 1 + ptr
	}
	for _, env := range []map[string]string{cmd.Env, cmd.SecretEnv} {
		for k, v := range env {
			n += len(k) + 1 + len(v) + 1 + ptr
		}
	}
	return n
}

// shortPath quotes p for a message, shortened to its first 64 bytes and
// its length when it is longer.
func shortPath(p string) string { return strconv.Quote(iox.Shorten(p, 64)) }

// Refresh fetches the sandbox's current Info.
func (s *Sandbox) Refresh(ctx context.Context) (_ Info, err error) {
	const op = "get"
	ctx, tc := s.c.tel.start(ctx, op, s.id)
	defer func() { tc.end(ctx, err) }()
	var in driver.Info
	ctx, end := bound(ctx, op, s.c.calls.Lookup)
	err = end(s.c.retry(ctx, op, true, nil, func() error {
		var err error
		in, err = s.c.rt.Get(ctx, s.id)
		return err
	}))
	if err != nil {
		return Info{}, s.wrap(op, "", err)
	}
	s.setInfo(infoOf(in))
	return s.Info(), nil
}

// Owned reports whether the handle owns its sandbox: it was made by
// Create (or by the GetOrCreate call that reported created), or attached
// with AttachOptions.Own. Only an owner's Destroy destroys; only an owner
// may Pause, Resume or SetTimeout (other handles get FailedPrecondition);
// only an owner's Exec and Start extend the lease to cover the command.
// Every handle may run commands and move files.
func (s *Sandbox) Owned() bool { return s.owned }

// Destroy ends the sandbox if the handle owns it (see Owned). On a handle
// that only attached to a sandbox (Attach, or GetOrCreate finding an
// existing one) it destroys nothing: the handle forgets the sandbox, which
// lives on until its owner destroys it or its lease ends, so that code
// that attached to look at a sandbox cannot end it for its owner by
// mistake. To destroy a sandbox by id explicitly, as a CLI's "rm ID"
// does, call Client.Destroy. Destroying a sandbox that is already gone is
// not an error.
func (s *Sandbox) Destroy(ctx context.Context) error {
	if !s.owned {
		s.c.log.Info("sandbox: Destroy on an attached handle forgets the sandbox without destroying it", "provider", s.c.rt.Name(), "id", s.id)
		return nil
	}
	return s.destroy(ctx)
}

// Destroy destroys the sandbox id, whoever created it: the explicit form
// for a sandbox this process does not own. A sandbox that is already gone
// is not an error.
func (c *Client) Destroy(ctx context.Context, id string) error {
	if err := checkID("destroy", c.rt.Name(), id); err != nil {
		return err
	}
	if c.badOpts != nil {
		return c.wrap("destroy", id, "", c.badOpts)
	}
	return c.handle(Info{ID: id}, nil).destroy(ctx)
}

func (s *Sandbox) destroy(ctx context.Context) (err error) {
	const op = "destroy"
	ctx, tc := s.c.tel.start(ctx, op, s.id)
	defer func() { tc.end(ctx, err) }()
	ctx, end := bound(ctx, op, s.c.calls.Destroy)
	err = end(s.c.retry(ctx, op, true, nil, func() error { return s.c.rt.Destroy(ctx, s.id) }))
	if CodeOf(err) == NotFound {
		err = nil
	}
	if err == nil {
		s.c.tel.sandboxDestroyed(ctx, s.id)
	}
	return s.wrap(op, "", err)
}

// SetTimeout makes the lease end no sooner than d from now. It only ever
// extends: when the lease already ends later, it does nothing (a shorter
// value never cuts a lease another caller extended). Only a handle that
// owns its sandbox (see Owned) may change its lease: on any other handle
// SetTimeout fails with FailedPrecondition and changes nothing, so that
// code that attached to look at a sandbox cannot keep it alive (and
// billed) behind its owner's back; attach with AttachOptions.Own to take
// charge of a sandbox deliberately.
func (s *Sandbox) SetTimeout(ctx context.Context, d time.Duration) (err error) {
	const op = "set-timeout"
	ctx, tc := s.c.tel.start(ctx, op, s.id)
	defer func() { tc.end(ctx, err) }()
	if d <= 0 {
		return invalid(op, s.c.rt.Name(), s.id, "timeout", "%v is not positive", d)
	}
	if m := s.c.caps.MaxLease; m > 0 && d > m {
		return invalid(op, s.c.rt.Name(), s.id, "timeout", "%v exceeds the provider's maximum lease %v", d, m)
	}
	if !s.owned {
		return s.notOwned(op, "extend the lease of")
	}
	if err := s.c.checkOpen(op, s.id); err != nil {
		return err
	}
	return s.wrap(op, "", s.extendLease(ctx, d, false))
}

// Pause freezes the sandbox (see Capabilities.PauseKeepsMemory). Providers
// without pause return an error matching ErrUnimplemented. Only a handle
// that owns its sandbox (see Owned) may pause it: on any other handle
// Pause fails with FailedPrecondition and leaves the sandbox running.
func (s *Sandbox) Pause(ctx context.Context) (err error) {
	const op = "pause"
	ctx, tc := s.c.tel.start(ctx, op, s.id)
	defer func() { tc.end(ctx, err) }()
	p, ok := s.c.rt.(driver.Pauser)
	if !ok {
		return s.wrap(op, "", ErrUnimplemented)
	}
	if !s.owned {
		return s.notOwned(op, "pause")
	}
	ctx, end := bound(ctx, op, s.c.calls.Pause)
	err = end(s.c.retry(ctx, op, true, nil, func() error { return p.Pause(ctx, s.id) }))
	if err != nil {
		return s.wrap(op, "", err)
	}
	s.mu.Lock()
	s.info.State = StatePaused
	s.mu.Unlock()
	return nil
}

// Resume thaws a paused sandbox. Resuming a running sandbox does nothing.
// Only a handle that owns its sandbox (see Owned) may resume it: on any
// other handle Resume fails with FailedPrecondition and leaves the
// sandbox as it is.
func (s *Sandbox) Resume(ctx context.Context) (err error) {
	const op = "resume"
	ctx, tc := s.c.tel.start(ctx, op, s.id)
	defer func() { tc.end(ctx, err) }()
	if _, ok := s.c.rt.(driver.Pauser); ok && !s.owned {
		return s.notOwned(op, "resume")
	}
	return s.resume(ctx)
}

// resume is Resume without the ownership check, for GetOrCreate, which
// wakes the sandbox it hands out.
func (s *Sandbox) resume(ctx context.Context) error {
	const op = "resume"
	p, ok := s.c.rt.(driver.Pauser)
	if !ok {
		return s.wrap(op, "", ErrUnimplemented)
	}
	var in driver.Info
	ctx, end := bound(ctx, op, s.c.calls.Resume)
	err := end(s.c.retry(ctx, op, true, nil, func() error {
		var err error
		in, err = p.Resume(ctx, s.id)
		return err
	}))
	if err != nil {
		return s.wrap(op, "", err)
	}
	s.setInfo(infoOf(in))
	return nil
}

// execPlan is a validated Command ready for the driver.
type execPlan struct {
	cmd      *driver.Command
	secrets  [][]byte // the handle's and the command's, longest first
	layer    TimeoutLayer
	timeout  time.Duration
	out, err *capBuffer
	flush    []io.Writer
	stdin    *stdinGate // nil without Stdin; closed when the call returns
}

func (s *Sandbox) plan(ctx context.Context, op string, cmd Command, background, raw bool) (*execPlan, error) {
	name := s.c.rt.Name()
	switch {
	case raw && (cmd.Stdout != nil || cmd.Stderr != nil):
		return nil, invalid(op, name, s.id, "command", "ExecUnredacted takes no Stdout or Stderr writer: live output is always redacted")
	case len(cmd.Args) == 0 && cmd.Shell == "":
		return nil, invalid(op, name, s.id, "command", "set Args or Shell")
	case len(cmd.Args) > 0 && cmd.Shell != "":
		return nil, invalid(op, name, s.id, "command", "set Args or Shell, not both")
	case len(cmd.Args) > 0 && cmd.Args[0] == "":
		return nil, invalid(op, name, s.id, "command", "Args[0] is empty")
	}
	for i, a := range cmd.Args {
		if slices.Contains([]byte(a), 0) {
			return nil, invalid(op, name, s.id, "command", "Args[%d] holds NUL", i)
		}
		if len(a) > maxArgBytes {
			return nil, invalid(op, name, s.id, "command", "Args[%d] is %d bytes, over the limit of %d (MAX_ARG_STRLEN); pass large data on Stdin or in a file",
				i, len(a), maxArgBytes)
		}
	}
	if slices.Contains([]byte(cmd.Shell), 0) {
		return nil, invalid(op, name, s.id, "command", "Shell holds NUL")
	}
	if len(cmd.Shell) > maxArgBytes {
		return nil, invalid(op, name, s.id, "command", "Shell is %d bytes, over the limit of %d (MAX_ARG_STRLEN); pass large data on Stdin or in a file",
			len(cmd.Shell), maxArgBytes)
	}
	if err := checkEnv(op, name, s.id, cmd.Env, false); err != nil {
		return nil, err
	}
	if err := checkEnv(op, name, s.id, cmd.SecretEnv, true); err != nil {
		return nil, err
	}
	if n := argvBytes(&cmd); n > maxArgvBytes {
		return nil, invalid(op, name, s.id, "command", "its arguments and environment take %d bytes, over the limit of %d (ARG_MAX less room for the sandbox's own environment); pass large data on Stdin or in a file",
			n, maxArgvBytes)
	}
	if cmd.Timeout < 0 {
		return nil, invalid(op, name, s.id, "timeout", "%v is negative", cmd.Timeout)
	}
	if cmd.MaxOutput < 0 {
		return nil, invalid(op, name, s.id, "max output", "%d is negative", cmd.MaxOutput)
	}
	dir := s.Home()
	if cmd.Dir != "" {
		var err error
		if dir, err = s.path(op, "dir", cmd.Dir); err != nil {
			return nil, err
		}
	}
	p := &execPlan{layer: TimeoutCommand, timeout: cmd.Timeout}
	if p.timeout == 0 && !background {
		p.timeout = s.c.cmdTimeout
	}
	if !background {
		if dl, ok := ctx.Deadline(); ok {
			if rem := time.Until(dl); rem < p.timeout {
				p.timeout, p.layer = rem, TimeoutContext
			}
		}
		if p.timeout <= 0 {
			return nil, s.wrap(op, "", context.DeadlineExceeded)
		}
	}
	maxOut := cmd.MaxOutput
	if maxOut == 0 {
		maxOut = s.c.maxOutput
	}
	s.remember(secretValues(cmd.SecretEnv))
	secrets := append(slices.Clone(s.secrets), secretValues(cmd.SecretEnv)...)
	slices.SortFunc(secrets, func(a, b []byte) int { return len(b) - len(a) })
	p.secrets = secrets
	p.out, p.err = &capBuffer{max: maxOut}, &capBuffer{max: maxOut}
	outSecrets := secrets
	if raw {
		outSecrets = nil
	}
	stdout := sink(p.out, cmd.Stdout, outSecrets)
	stderr := sink(p.err, cmd.Stderr, outSecrets)
	p.flush = []io.Writer{stdout, stderr}
	env := make(map[string]string, len(cmd.Env)+len(cmd.SecretEnv))
	maps.Copy(env, cmd.Env)
	maps.Copy(env, cmd.SecretEnv)
	p.cmd = &driver.Command{
		Args: slices.Clone(cmd.Args), Shell: cmd.Shell, Dir: dir, Env: env,
		Stdout: stdout, Stderr: stderr, Timeout: p.timeout,
	}
	if cmd.Stdin != nil {
		p.stdin = newStdinGate(cmd.Stdin)
		p.cmd.Stdin = p.stdin
	}
	return p, nil
}

// sink builds the writer a driver writes one stream to: redaction first,
// then the capture buffer and the caller's live writer.
func sink(capture *capBuffer, live io.Writer, secrets [][]byte) io.Writer {
	var w io.Writer = capture
	if live != nil {
		w = &teeWriter{capture: capture, live: lockedWriter{mu: new(sync.Mutex), w: live}}
	}
	return newRedactor(w, secrets)
}

// teeWriter writes to the capture buffer and to the caller's writer; a
// failing caller writer is dropped rather than ending the capture.
type teeWriter struct {
	capture *capBuffer
	live    io.Writer
	liveErr error
}

func (t *teeWriter) Write(p []byte) (int, error) {
	t.capture.Write(p)
	if t.liveErr == nil {
		if _, err := t.live.Write(p); err != nil {
			t.liveErr = err
		}
	}
	return len(p), nil
}

func (p *execPlan) result(st driver.ExitStatus, started time.Time) *Result {
	for _, w := range p.flush {
		flushWriter(w)
	}
	r := &Result{ExitCode: st.ExitCode, Signal: st.Signal, Duration: time.Since(started)}
	r.Stdout, r.StdoutTruncated = p.out.result()
	r.Stderr, r.StderrTruncated = p.err.result()
	if st.TimedOut {
		r.TimedOut, r.TimeoutBy, r.Timeout = true, p.layer, p.timeout
		r.ExitCode, r.Signal = -1, 0
	}
	if r.Signal != 0 {
		r.ExitCode = -1 // a provider's slip must not show a signal beside an exit code
	}
	return r
}

// Exec runs cmd in the sandbox and waits for it. A non-zero exit code is a
// Result, not an error.
//
// The lease covers the command: when the lease this handle knows (from
// Create, Attach, Refresh, Resume or SetTimeout) ends before the command's
// effective timeout plus half of CommandLeaseGrace from now, Exec first
// extends it to the timeout plus CommandLeaseGrace, once, as SetTimeout does (extend-only; at most the provider's
// Capabilities.MaxLease, so a longer command on a provider with a maximum
// lease can still outlive it). A command that fits costs no extra call. A
// handle that does not own its sandbox (see Owned) never extends the
// lease: its commands run within the lease the owner set. When a lease
// ends while the command runs anyway, the error matches ErrLeaseExpired
// (with the partial Result when the provider reported the command killed). When cmd.Timeout (or the Client default) expires,
// the command is ended and Exec returns a Result with TimedOut set, the
// output produced so far and a nil error. When ctx ends first, Exec returns
// the partial Result (TimedOut set, TimeoutBy TimeoutContext when ctx had a
// deadline) together with an error whose Code is DeadlineExceeded or
// Canceled; its output is all the command wrote before ctx ended, even
// what was still on its way because the reading lagged (the provider ends
// the command and reads what is on its way, within a bounded time). An
// Exec is retried only when the provider reports that the request never
// reached it; otherwise a transport failure returns an error matching
// ErrOutcomeUnknown.
func (s *Sandbox) Exec(ctx context.Context, cmd Command) (*Result, error) {
	res, _, err := s.exec(ctx, "exec", cmd, false)
	return res, err
}

// ExecUnredacted runs cmd as Exec does but leaves the captured output
// unredacted, and returns the function that redacts it: the secret values
// of the sandbox (CreateOptions.SecretEnv) and of cmd.SecretEnv replaced by
// "[REDACTED]", as Exec would have replaced them. It is for programs that
// parse a command's output as data (ids, digests, counts, file contents),
// which redaction would corrupt whenever a secret value happens to occur
// in it; the module's fsbackend and run packages use it for their helper
// commands. The caller takes over the duty Exec otherwise fulfils: every
// part of the output that reaches a person, a log or a model must go
// through redact first.
//
// Errors are redacted as Exec's are. cmd must not set Stdout or Stderr
// (live output is always redacted): that is an InvalidArgument error.
func (s *Sandbox) ExecUnredacted(ctx context.Context, cmd Command) (*Result, func([]byte) []byte, error) {
	res, p, err := s.exec(ctx, "exec", cmd, true)
	if p == nil {
		return res, nil, err
	}
	secrets := p.secrets
	return res, func(b []byte) []byte { return redact(b, secrets) }, err
}

func (s *Sandbox) exec(ctx context.Context, op string, cmd Command, raw bool) (res *Result, p *execPlan, err error) {
	ctx, tc := s.c.tel.start(ctx, op, s.id)
	defer func() {
		tc.execDone(p, &cmd, res)
		tc.end(ctx, err)
	}()
	p, err = s.plan(ctx, op, cmd, false, raw)
	if err != nil {
		return nil, nil, err
	}
	if err := s.coverLease(ctx, op, p.timeout); err != nil {
		p.stdin.close()
		return nil, p, s.wrapPlan(op, p, err)
	}
	started := time.Now()
	var st driver.ExitStatus
	// Without a ctx deadline the provider gets the command's timeout plus
	// a grace to answer; one that never does cannot hang the caller.
	grace := s.c.calls.ExecGrace
	ectx, end := bound(ctx, op, max(grace, 0)+p.timeout)
	if grace < 0 {
		ectx, end = ctx, func(err error) error { return err }
	}
	err = end(s.c.retry(ectx, op, false, func() bool {
		return p.stdin.consumed() == 0 && p.out.empty() && p.err.empty()
	}, func() error {
		var err error
		st, err = s.c.rt.Exec(ectx, s.id, p.cmd)
		return err
	}))
	p.stdin.close() // no Read of cmd.Stdin starts from now on
	res = p.result(st, started)
	if err != nil {
		if be := (*boundError)(nil); ctx.Err() == nil && errors.As(err, &be) {
			// The provider did not end the command at its timeout.
			res.TimedOut, res.TimeoutBy, res.Timeout, res.ExitCode, res.Signal = true, TimeoutProvider, p.timeout, -1, 0
			return res, p, s.wrapPlan(op, p, err)
		}
		if ctxErr := ctx.Err(); ctxErr != nil {
			if errors.Is(ctxErr, context.DeadlineExceeded) {
				res.TimedOut, res.TimeoutBy, res.Timeout, res.ExitCode, res.Signal = true, TimeoutContext, p.timeout, -1, 0
			} else {
				res.ExitCode = -1
			}
			return res, p, s.wrapPlan(op, p, ctxErr)
		}
		return nil, p, s.wrapPlan(op, p, s.lostToLease(ctx, op, err))
	}
	if lerr := s.killedByLease(ctx, op, res); lerr != nil {
		return res, p, s.wrapPlan(op, p, lerr)
	}
	return res, p, nil
}

// wrapPlan is wrap with the command's secrets redacted as well.
func (s *Sandbox) wrapPlan(op string, p *execPlan, err error) error {
	return redactErr(s.c.wrap(op, s.id, "", err), p.secrets)
}

// Start starts cmd in the background and returns at once. The process
// outlives ctx (which bounds only the start); cmd.Timeout, when set, bounds
// its lifetime, and the lease is extended to cover it as for Exec (a
// process without a Timeout gets no extension: it may run for ever). Its
// output is captured (up to MaxOutput per stream) for
// Wait and streamed to cmd.Stdout and cmd.Stderr. Close the Process (or
// Wait for it) to release its stream. Providers without background
// processes return an error matching ErrUnimplemented.
func (s *Sandbox) Start(ctx context.Context, cmd Command) (_ *Process, err error) {
	const op = "start"
	ctx, tc := s.c.tel.start(ctx, op, s.id)
	var p *execPlan
	defer func() {
		tc.execDone(p, &cmd, nil)
		tc.end(ctx, err)
	}()
	pr, ok := s.c.rt.(driver.ProcessRuntime)
	if !ok {
		return nil, s.wrap(op, "", ErrUnimplemented)
	}
	p, err = s.plan(ctx, op, cmd, true, false)
	if err != nil {
		return nil, err
	}
	if err := s.coverLease(ctx, op, p.timeout); err != nil {
		p.stdin.close()
		return nil, s.wrapPlan(op, p, err)
	}
	var h driver.ProcessHandle
	err = s.c.retry(ctx, op, false, func() bool { return p.stdin.consumed() == 0 }, func() error {
		var err error
		h, err = pr.Start(ctx, s.id, p.cmd)
		return err
	})
	if err != nil {
		p.stdin.close()
		return nil, s.wrapPlan(op, p, err)
	}
	return &Process{sb: s, h: h, plan: p, started: time.Now()}, nil
}

// remember records secret values given to something started through
// the handle (see Sandbox.started).
func (s *Sandbox) remember(vals [][]byte) {
	if len(vals) == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started == nil {
		s.started = map[string]struct{}{}
	}
	for _, v := range vals {
		s.started[string(v)] = struct{}{}
	}
}

// knownSecrets returns every secret value the handle knows, longest
// first: the sandbox's, those of everything started through the handle,
// and extra.
func (s *Sandbox) knownSecrets(extra [][]byte) [][]byte {
	out := append(slices.Clone(s.secrets), extra...)
	s.mu.Lock()
	for v := range s.started {
		out = append(out, []byte(v))
	}
	s.mu.Unlock()
	slices.SortFunc(out, func(a, b []byte) int { return len(b) - len(a) })
	return slices.CompactFunc(out, bytes.Equal)
}

// AttachProcessOptions describes an attach to a background process
// (Sandbox.AttachProcessWith).
type AttachProcessOptions struct {
	// Stdout and Stderr, when non-nil, receive the output produced from
	// now on, redacted, as it comes.
	Stdout, Stderr io.Writer
	// SecretEnv holds secret values to redact from the output besides
	// those the handle knows (only the values count; the names are
	// checked as Command.SecretEnv's). An attach through the handle that
	// started the process already redacts its Command.SecretEnv; an
	// attach from another handle (another Client, another OS process)
	// knows only the sandbox's secrets and these, so a process started
	// with its own secrets needs them given here.
	SecretEnv map[string]string
}

// AttachProcess connects to a background process by pid, for example one
// started before a restart. Output produced from now on is captured for
// Wait and streamed to stdout and stderr when they are non-nil. It is
// AttachProcessWith with only the writers: see there for which secrets
// are redacted.
func (s *Sandbox) AttachProcess(ctx context.Context, pid int, stdout, stderr io.Writer) (*Process, error) {
	return s.AttachProcessWith(ctx, pid, AttachProcessOptions{Stdout: stdout, Stderr: stderr})
}

// AttachProcessWith connects to a background process by pid, as
// AttachProcess, redacting from its output the sandbox's secrets, the
// SecretEnv values of every command and terminal started through this
// handle, and opts.SecretEnv.
func (s *Sandbox) AttachProcessWith(ctx context.Context, pid int, opts AttachProcessOptions) (_ *Process, err error) {
	const op = "attach-process"
	ctx, tc := s.c.tel.start(ctx, op, s.id)
	defer func() { tc.end(ctx, err) }()
	pr, ok := s.c.rt.(driver.ProcessRuntime)
	if !ok {
		return nil, s.wrap(op, "", ErrUnimplemented)
	}
	if pid <= 0 {
		return nil, invalid(op, s.c.rt.Name(), s.id, "pid", "%d is not positive", pid)
	}
	if err := checkEnv(op, s.c.rt.Name(), s.id, opts.SecretEnv, true); err != nil {
		return nil, err
	}
	secrets := s.knownSecrets(secretValues(opts.SecretEnv))
	max := s.c.maxOutput
	p := &execPlan{out: &capBuffer{max: max}, err: &capBuffer{max: max}, secrets: secrets}
	o, e := sink(p.out, opts.Stdout, secrets), sink(p.err, opts.Stderr, secrets)
	p.flush = []io.Writer{o, e}
	var h driver.ProcessHandle
	err = s.c.retry(ctx, op, true, nil, func() error {
		var err error
		h, err = pr.Attach(ctx, s.id, pid, o, e)
		return err
	})
	if err != nil {
		return nil, redactErr(s.wrap(op, "", err), secrets)
	}
	return &Process{sb: s, h: h, plan: p, started: time.Now()}, nil
}

// Process is a background process in a sandbox.
type Process struct {
	sb      *Sandbox
	h       driver.ProcessHandle
	plan    *execPlan
	started time.Time

	mu     sync.Mutex
	result *Result
	closed bool
}

// PID identifies the process within its sandbox; pass it to
// Sandbox.AttachProcess to reconnect.
func (p *Process) PID() int { return p.h.PID() }

// Wait waits for the process to exit and returns its Result with the output
// captured since Start (or since the attach). It may be called more than
// once, and from several goroutines at once: each Wait returns when its own
// ctx ends, with ctx's error, and the process runs on.
func (p *Process) Wait(ctx context.Context) (res *Result, err error) {
	const op = "wait"
	ctx, tc := p.sb.c.tel.start(ctx, op, p.sb.id)
	defer func() {
		tc.execDone(nil, nil, res)
		if res != nil && tc.span.IsRecording() {
			tc.span.SetAttributes(AttrStdoutBytes.Int64(p.plan.out.written()), AttrStderrBytes.Int64(p.plan.err.written()))
		}
		tc.end(ctx, err)
	}()
	p.mu.Lock()
	if p.result != nil {
		r := p.result
		p.mu.Unlock()
		return r, nil
	}
	p.mu.Unlock()
	st, err := p.h.Wait(ctx)
	if err != nil {
		return nil, p.sb.wrapPlan(op, p.plan, p.sb.lostToLease(ctx, op, err))
	}
	p.mu.Lock()
	if p.result == nil { // the first Wait to see the exit builds the Result
		p.result = p.plan.result(st, p.started)
	}
	r := p.result
	p.mu.Unlock()
	_ = p.Close()
	if lerr := p.sb.killedByLease(ctx, op, r); lerr != nil {
		return r, p.sb.wrapPlan(op, p.plan, lerr)
	}
	return r, nil
}

// exitResult returns the process's Result if a Wait has seen its exit,
// and nil otherwise (or when p is nil).
func (p *Process) exitResult() *Result {
	if p == nil {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.result
}

// Signal sends sig to the process. Once the process has exited, Signal
// sends nothing and returns nil (Wait tells how it ended): a signal that
// races the exit is no error. ErrNotFound means the sandbox, or the
// process's pid, is unknown to the provider.
func (p *Process) Signal(ctx context.Context, sig syscall.Signal) (err error) {
	ctx, tc := p.sb.c.tel.start(ctx, "signal", p.sb.id)
	defer func() { tc.end(ctx, err) }()
	return p.sb.wrap("signal", "", p.h.Signal(ctx, sig))
}

// Kill ends the process (SIGKILL). Wait then returns its Result. A Kill
// of a process that has already exited returns nil, so a deferred Kill
// after Wait is harmless.
func (p *Process) Kill(ctx context.Context) (err error) {
	ctx, tc := p.sb.c.tel.start(ctx, "kill", p.sb.id)
	defer func() { tc.end(ctx, err) }()
	return p.sb.wrap("kill", "", p.h.Signal(ctx, syscall.SIGKILL))
}

// Close releases the handle without ending the process.
func (p *Process) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	p.mu.Unlock()
	err := p.h.Close()
	p.plan.stdin.close() // the handle is released: so is cmd.Stdin
	for _, w := range p.plan.flush {
		flushWriter(w) // release output held back for redaction
	}
	return p.sb.wrap("close-process", "", err)
}
