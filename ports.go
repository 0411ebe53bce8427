package sandbox

import (
	"context"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/sandboxkit/sandbox/driver"
	"github.com/sandboxkit/sandbox/internal/procnet"
)

func checkPort(op, provider, id string, port int) error {
	if port < 1 || port > 65535 {
		return invalid(op, provider, id, "port", "%d is not a TCP port (1-65535)", port)
	}
	return nil
}

// Expose makes port, on which a server in the sandbox listens (or will),
// reachable from the host and returns the URL to use and the headers each
// request must carry: an endpoint is private (Endpoint.Public false) and
// refuses requests without them. The server should listen on all interfaces (0.0.0.0)
// for the cloud providers; local reaches 127.0.0.1 too. Providers without
// it (Capabilities.Ports false) return an error matching ErrUnimplemented.
// Use Process.WaitForPort first to know the server is listening.
func (s *Sandbox) Expose(ctx context.Context, port int, opts ExposeOptions) (_ Endpoint, err error) {
	const op = "expose"
	ctx, tc := s.c.tel.start(ctx, op, s.id)
	defer func() { tc.end(ctx, err) }()
	if err := checkPort(op, s.c.rt.Name(), s.id, port); err != nil {
		return Endpoint{}, err
	}
	if opts.TTL < 0 {
		return Endpoint{}, invalid(op, s.c.rt.Name(), s.id, "ttl", "%v is negative", opts.TTL)
	}
	if opts.MaxConns < 0 {
		return Endpoint{}, invalid(op, s.c.rt.Name(), s.id, "max-conns", "%d is negative", opts.MaxConns)
	}
	if opts.IdleTimeout < 0 {
		return Endpoint{}, invalid(op, s.c.rt.Name(), s.id, "idle-timeout", "%v is negative", opts.IdleTimeout)
	}
	p, ok := s.c.rt.(driver.PortExposer)
	if !ok {
		return Endpoint{}, s.wrap(op, "", ErrUnimplemented)
	}
	var ep driver.Endpoint
	ctx, end := bound(ctx, op, s.c.calls.Lookup)
	err = end(s.c.retry(ctx, op, true, nil, func() error {
		var err error
		ep, err = p.Expose(ctx, s.id, port, opts.toDriver())
		return err
	}))
	if err != nil {
		return Endpoint{}, s.wrap(op, "", err)
	}
	out := endpointOf(ep)
	out.provider, out.id = s.c.rt.Name(), s.id
	return out, nil
}

// DefaultPortWait bounds WaitForPort and WaitForPortWith when ctx has no
// deadline and WaitForPortOptions.Timeout is zero, so that a wait for a
// server that never listens ends on its own.
const DefaultPortWait = 60 * time.Second

// portTail bounds the server output an error of WaitForPortWith quotes.
const portTail = 1024

// WaitForPortOptions configures Sandbox.WaitForPortWith.
type WaitForPortOptions struct {
	// Process is the server expected to listen on the port. When it exits
	// before the port listens, the wait fails at once with Code
	// FailedPrecondition and a message giving its exit status and the
	// last bytes of its stderr (Process.Wait returns its whole Result).
	// A process that exits with status 0 may have handed the port to a
	// child (a server that daemonizes, or "srv &" in a shell): the wait
	// then goes on polling until its usual end, whose error says that the
	// process exited. Any other exit fails the wait, even when something
	// listens on the port by then: a server that failed (often because
	// the port was taken) is not the one listening. Where the sandbox
	// shares its network with other programs (the host's network, as
	// local's lower isolation levels do), a port one of them holds counts
	// as listening until the server's exit is seen: the socket tables do
	// not say whose a socket is.
	Process *Process
	// Timeout bounds the wait when ctx has no deadline: zero means
	// DefaultPortWait, a negative value waits as long as ctx does. A
	// deadline on ctx always applies.
	Timeout time.Duration
}

// WaitForPort polls the sandbox until a process in it listens on TCP port
// (on any address, IPv4 or IPv6). It is WaitForPortWith with no options:
// when ctx has no deadline the wait ends after DefaultPortWait. Use
// Process.WaitForPort to also fail at once when the server dies.
func (s *Sandbox) WaitForPort(ctx context.Context, port int) error {
	return s.WaitForPortWith(ctx, port, WaitForPortOptions{})
}

// WaitForPort waits until port listens in p's sandbox, failing at once
// if p exits first: it is Sandbox.WaitForPortWith with
// WaitForPortOptions{Process: p}.
func (p *Process) WaitForPort(ctx context.Context, port int) error {
	return p.sb.WaitForPortWith(ctx, port, WaitForPortOptions{Process: p})
}

// WaitForPortWith polls the sandbox until a process in it listens on TCP
// port (on any address, IPv4 or IPv6), opts.Process exits, or the wait
// is over: ctx's deadline, or opts.Timeout (DefaultPortWait by default)
// when ctx has none. It reads /proc/net/tcp and /proc/net/tcp6 with a
// command, at once and then at intervals doubling from 50 ms up to 1 s, so
// it needs a Linux sandbox with cat. A wait that ends says which port was
// polled, how often and for how long (Code DeadlineExceeded, or Canceled).
func (s *Sandbox) WaitForPortWith(ctx context.Context, port int, opts WaitForPortOptions) error {
	const op = "wait-for-port"
	if err := checkPort(op, s.c.rt.Name(), s.id, port); err != nil {
		return err
	}
	if opts.Process != nil && opts.Process.sb != nil && opts.Process.sb.id != s.id {
		return invalid(op, s.c.rt.Name(), s.id, "process", "pid %d runs in sandbox %s, not this one", opts.Process.PID(), opts.Process.sb.id)
	}
	start := time.Now()
	var ownBound *portWaitBound
	if _, ok := ctx.Deadline(); !ok {
		d := opts.Timeout
		if d == 0 {
			d = DefaultPortWait
		}
		if d > 0 {
			var cancel context.CancelFunc
			ownBound = &portWaitBound{d: d}
			ctx, cancel = context.WithTimeoutCause(ctx, d, ownBound)
			defer cancel()
		}
	}

	// The server is watched by its own Wait, so that its exit ends the
	// wait at once rather than at the next poll.
	exited := make(chan *Result, 1)
	if r := opts.Process.exitResult(); r != nil {
		exited <- r // a Wait already saw the exit
	} else if opts.Process != nil {
		wctx, stop := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			defer close(done)
			if r, err := opts.Process.Wait(wctx); err == nil {
				exited <- r
			}
		}()
		defer func() { stop(); <-done }()
	}

	polls := 0
	poll := func() (bool, error) {
		polls++
		res, err := s.Exec(ctx, Command{Args: []string{"cat", "/proc/net/tcp", "/proc/net/tcp6"}, Timeout: 30 * time.Second})
		if err != nil {
			return false, err
		}
		return procnet.Listening(string(res.Stdout), port), nil
	}
	var handedOff bool // the server exited 0: a child may listen later
	ended := func() error {
		note := ""
		if handedOff {
			note = fmt.Sprintf("; the server (pid %d) exited with code 0 and nothing it left listens", opts.Process.PID())
		}
		cause := context.Cause(ctx)
		if cause == nil {
			// A poll ran into the deadline just before ctx reports it
			// (Exec ends a command it cannot finish in time early).
			cause = context.DeadlineExceeded
			if ownBound != nil {
				cause = ownBound
			}
		}
		return s.wrap(op, "", fmt.Errorf("port %d not listening after %v (%d polls of /proc/net/tcp and /proc/net/tcp6)%s: %w",
			port, time.Since(start).Round(time.Millisecond), polls, note, cause))
	}
	// A server that failed is not looked for again: on a network the
	// sandbox shares with others (the host's), the port it could not take
	// may be another program's.
	died := func(r *Result) error {
		return s.wrap(op, "", &serverExitedError{port: port, pid: opts.Process.PID(), res: r})
	}
	// exit handles the server's exit: a failure ends the wait, a success
	// stops the watch (nil blocks for ever in a select) and the polls go on.
	exit := func(r *Result) (error, bool) {
		if r.Success() {
			handedOff, exited = true, nil
			return nil, false
		}
		return died(r), true
	}

	delay := 25 * time.Millisecond
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return ended()
		case r := <-exited:
			if err, done := exit(r); done {
				return err
			}
			continue
		case <-t.C:
		}
		ok, err := poll()
		if err != nil {
			// A poll that failed at the wait's bound ends the wait as the
			// bound does, whatever the provider made of its deadline (e2b's
			// envd answers Internal, "error starting process: context
			// deadline exceeded"); on a loaded host the deadline can be
			// past while ctx does not report it yet (its timer not run).
			if dl, bounded := ctx.Deadline(); ctx.Err() != nil || (bounded && (CodeOf(err) == DeadlineExceeded || !time.Now().Before(dl))) {
				return ended()
			}
			return err
		}
		// An exit seen by now came before the poll's answer, or with it:
		// a listener then is not the failed server's.
		select {
		case r := <-exited:
			if err, done := exit(r); done {
				return err
			}
		default:
		}
		if ok {
			return nil
		}
		delay = min(delay*2, time.Second)
		t.Reset(delay)
	}
}

// portWaitBound is the cause of a wait for a port ended by its default
// bound.
type portWaitBound struct{ d time.Duration }

func (e *portWaitBound) Error() string {
	return fmt.Sprintf("the wait's bound of %v passed (the context had no deadline; set WaitForPortOptions.Timeout or give ctx one)", e.d)
}

// Unwrap makes the cause match context.DeadlineExceeded (Code DeadlineExceeded).
func (e *portWaitBound) Unwrap() error { return context.DeadlineExceeded }

// serverExitedError reports that the process expected to serve a port
// exited before the port listened. Its Code is FailedPrecondition: the
// server the wait depends on is gone.
type serverExitedError struct {
	port int
	pid  int
	res  *Result
}

func (e *serverExitedError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "port %d: server (pid %d) ", e.port, e.pid)
	switch r := e.res; {
	case r.TimedOut:
		fmt.Fprintf(&b, "ended by its %v timeout", r.Timeout)
	case r.Signal != 0:
		fmt.Fprintf(&b, "killed by signal %d (%v)", int(r.Signal), r.Signal)
	default:
		fmt.Fprintf(&b, "exited with code %d", r.ExitCode)
	}
	b.WriteString(" before listening")
	switch {
	case len(e.res.Stderr) > 0:
		fmt.Fprintf(&b, "; stderr ends %q", tail(e.res.Stderr, portTail))
	case len(e.res.Stdout) > 0:
		fmt.Fprintf(&b, "; no stderr, stdout ends %q", tail(e.res.Stdout, portTail))
	default:
		b.WriteString("; it wrote nothing")
	}
	return b.String()
}

// Unwrap makes the error match ErrFailedPrecondition and, when the server
// did not succeed (a non-zero exit, a signal, a timeout), lets errors.As
// find its *ExitError, as Output's callers do.
func (e *serverExitedError) Unwrap() []error {
	if ee := exitError(e.res, nil); ee != nil {
		return []error{ErrFailedPrecondition, ee}
	}
	return []error{ErrFailedPrecondition}
}

// tail returns the last n bytes of p (or fewer, to start on a UTF-8
// boundary), marked with "…" when cut.
func tail(p []byte, n int) string {
	if len(p) <= n {
		return string(p)
	}
	p = p[len(p)-n:]
	for i := 0; i < utf8.UTFMax && len(p) > 0 && !utf8.RuneStart(p[0]); i++ {
		p = p[1:]
	}
	return "…" + string(p)
}
