package e2bfake

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"syscall"
	"time"

	"github.com/sandboxkit/sandbox/driver"
	"github.com/sandboxkit/sandbox/internal/signame"
	"github.com/sandboxkit/sandbox/provider/e2b/internal/envd/process"
)

// chunk is the largest data event envd sends.
const chunk = 32 << 10

// proc is one process envd started. Its events fan out to every attached
// stream; output produced while nobody listens is dropped, as in envd.
type proc struct {
	pid    uint32
	tag    string
	config *process.ProcessConfig
	stdin  *inPipe // nil when started without stdin
	// term is the backend's terminal of a process started with a pty
	// (see pty.go); nil otherwise.
	term driver.TerminalHandle
	done chan struct{}

	mu       sync.Mutex
	subs     map[*sub]struct{}
	end      *process.ProcessEvent_EndEvent
	timedOut bool
	// failed is set when the backend could not run or wait for the
	// process: no exit status exists, so streams end with an error and no
	// end event, as when envd itself fails, never with a made-up exit code.
	failed   error
	exitedAt time.Time
	sent     syscall.Signal // the first signal sent through envd
	expired  bool           // the fake ended the process at its timeout
	kill     func()
	signal   func(syscall.Signal) error
	// forget drops the exited process from its sandbox's table after
	// retain, as envd forgets exited processes.
	forget func()
	retain time.Duration
}

type sub struct {
	ch   chan *process.ProcessEvent
	gone chan struct{}
}

func (p *proc) subscribe() *sub {
	s := &sub{ch: make(chan *process.ProcessEvent, 64), gone: make(chan struct{})}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.end != nil || p.timedOut || p.failed != nil {
		close(s.ch)
		return s
	}
	p.subs[s] = struct{}{}
	return s
}

func (p *proc) unsubscribe(s *sub) {
	p.mu.Lock()
	delete(p.subs, s)
	p.mu.Unlock()
	close(s.gone)
}

func (p *proc) publish(ev *process.ProcessEvent) {
	p.mu.Lock()
	subs := make([]*sub, 0, len(p.subs))
	for s := range p.subs {
		subs = append(subs, s)
	}
	p.mu.Unlock()
	for _, s := range subs {
		select {
		case s.ch <- ev:
		case <-s.gone:
		}
	}
}

// output is an io.Writer that publishes data events of one stream.
type output struct {
	p      *proc
	stderr bool
}

func (o output) Write(b []byte) (int, error) {
	n := len(b)
	for len(b) > 0 {
		c := min(len(b), chunk)
		data := append([]byte(nil), b[:c]...)
		b = b[c:]
		de := &process.ProcessEvent_DataEvent{}
		if o.stderr {
			de.Output = &process.ProcessEvent_DataEvent_Stderr{Stderr: data}
		} else {
			de.Output = &process.ProcessEvent_DataEvent_Stdout{Stdout: data}
		}
		o.p.publish(&process.ProcessEvent{Event: &process.ProcessEvent_Data{Data: de}})
	}
	return n, nil
}

// finish records how the process ended and closes every subscription.
func (p *proc) finish(st driver.ExitStatus, err error) {
	p.mu.Lock()
	switch {
	case err != nil:
		p.failed = err
	case st.TimedOut || p.expired:
		p.timedOut = true
	case st.Signal != 0 || st.ExitCode < 0:
		// envd's status is os.ProcessState.String() of the real wait
		// status: "signal: " and Go's text for the signal on Linux. A
		// backend that does not name the signal leaves the one sent, else
		// SIGKILL (envd's kill). A process that handled the signal sent
		// and exited on its own falls to the default: "exit status N".
		sig := st.Signal
		if sig == 0 {
			sig = p.sent
		}
		if sig == 0 {
			sig = syscall.SIGKILL
		}
		msg := "signal: " + signame.Text(sig)
		p.end = &process.ProcessEvent_EndEvent{ExitCode: -1, Status: msg, Error: &msg}
	default:
		status := fmt.Sprintf("exit status %d", st.ExitCode)
		p.end = &process.ProcessEvent_EndEvent{ExitCode: int32(st.ExitCode), Exited: true, Status: status}
		if st.ExitCode != 0 {
			p.end.Error = &status
		}
	}
	p.exitedAt = time.Now()
	subs := p.subs
	p.subs = nil
	end := p.end
	p.mu.Unlock()
	if p.stdin != nil {
		p.stdin.Close()
	}
	for s := range subs {
		if end != nil {
			select {
			case s.ch <- &process.ProcessEvent{Event: &process.ProcessEvent_End{End: end}}:
			case <-s.gone:
			}
		}
		close(s.ch)
	}
	close(p.done)
	if p.forget != nil {
		time.AfterFunc(p.retain, p.forget)
	}
}

// startProc starts cmd on the backend and returns the running proc with
// a subscription made before the process could produce anything. The
// start is bounded by ctx, the request's, and nothing else: envd spawns
// the process within the Start request and sets no time limit of its own
// on the spawn (only Connect-Timeout-Ms, which the request's deadline
// carries), so a start that is slow under load is not an error here either.
func (s *Server) startProc(ctx context.Context, b *box, cfg *process.ProcessConfig, tag string, cmd *driver.Command, withStdin bool) (*proc, *sub, error) {
	p := &proc{tag: tag, config: cfg, done: make(chan struct{}), subs: map[*sub]struct{}{}, retain: s.exitedRetained}
	first := p.subscribe()
	p.forget = func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if b.procs[p.pid] == p {
			delete(b.procs, p.pid)
		}
	}
	cmd.Stdout = output{p: p}
	cmd.Stderr = output{p: p, stderr: true}
	if withStdin {
		p.stdin = newInPipe()
		cmd.Stdin = p.stdin
	}
	if pr, ok := s.backend.(driver.ProcessRuntime); ok {
		h, err := pr.Start(ctx, b.backendID, cmd)
		if err != nil {
			return nil, nil, err
		}
		p.pid = uint32(h.PID())
		p.signal = func(sig syscall.Signal) error {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			return h.Signal(ctx, sig)
		}
		p.kill = func() { _ = p.signal(syscall.SIGKILL) }
		s.bg.Add(1)
		go func() {
			defer s.bg.Done()
			st, err := h.Wait(context.Background())
			_ = h.Close()
			p.finish(st, err)
		}()
	} else {
		ctx, cancel := context.WithCancel(context.Background())
		p.kill = cancel
		p.signal = func(syscall.Signal) error { cancel(); return nil }
		s.mu.Lock()
		s.nextPID++
		p.pid = s.nextPID
		s.mu.Unlock()
		s.bg.Add(1)
		go func() {
			defer s.bg.Done()
			defer cancel()
			st, err := s.backend.Exec(ctx, b.backendID, cmd)
			if ctx.Err() != nil && err != nil {
				st, err = driver.ExitStatus{ExitCode: -1}, nil
			}
			p.finish(st, err)
		}()
	}
	// A backend cannot interrupt a read of the fake's stdin pipe the way
	// the kernel ends a killed process's read: close the pipe whenever the
	// process is ended.
	closeIn := func() {
		if p.stdin != nil {
			_ = p.stdin.Close()
		}
	}
	if p.stdin != nil && cmd.Timeout > 0 {
		t := time.AfterFunc(cmd.Timeout, func() {
			p.mu.Lock()
			p.expired = true
			p.mu.Unlock()
			closeIn()
		})
		s.bg.Add(1)
		go func() {
			defer s.bg.Done()
			<-p.done
			t.Stop()
		}()
	}
	// The first signal sent names the end of a process whose backend
	// reports a signal death without naming it.
	sig := p.signal
	p.signal = func(sg syscall.Signal) error {
		p.mu.Lock()
		if p.sent == 0 {
			p.sent = sg
		}
		p.mu.Unlock()
		err := sig(sg)
		closeIn()
		return err
	}
	kill := p.kill
	p.kill = func() {
		kill()
		closeIn()
	}
	s.mu.Lock()
	b.procs[p.pid] = p
	s.mu.Unlock()
	return p, first, nil
}

// inPipe is a process's stdin: writes never block (envd writes into a
// pipe the process may not read yet), reads block until data or close.
type inPipe struct {
	mu     sync.Mutex
	cond   *sync.Cond
	buf    []byte
	closed bool
}

func newInPipe() *inPipe {
	p := &inPipe{}
	p.cond = sync.NewCond(&p.mu)
	return p
}

var errStdinClosed = errors.New("stdin not enabled or closed")

func (p *inPipe) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return 0, errStdinClosed
	}
	p.buf = append(p.buf, b...)
	p.cond.Broadcast()
	return len(b), nil
}

func (p *inPipe) Read(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for len(p.buf) == 0 && !p.closed {
		p.cond.Wait()
	}
	if len(p.buf) == 0 {
		return 0, io.EOF
	}
	n := copy(b, p.buf)
	p.buf = p.buf[n:]
	return n, nil
}

// Close ends the input: readers get the buffered bytes, then EOF.
func (p *inPipe) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	p.cond.Broadcast()
	return nil
}

func (p *inPipe) isClosed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.closed
}
