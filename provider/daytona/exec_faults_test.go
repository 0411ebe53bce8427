package daytona_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/provider/daytona"
	"github.com/sandboxkit/sandbox/provider/daytona/daytonafake"
)

// bigOutput is more than the wrapper returns inline (1 MiB): its output
// is downloaded from the files.
const bigOutput = 3 << 20

// newLocalDefaultEnv is a Runtime with the default scratch directory
// (/tmp/.sandboxkit, as on the real service) over a fake over
// provider/local, whose file API serves only the home and whose /tmp is
// private to the sandbox: the fake reaches such paths from inside the
// sandbox, as the real daemon does.
func newLocalDefaultEnv(t *testing.T) *env {
	return newEnvOn(t, backend(t), nil)
}

// The default scratch directory over provider/local: large output, live
// streaming and the partial output of a timed-out command all arrive.
func TestExecDefaultScratchOverLocal(t *testing.T) {
	t.Parallel()
	e := newLocalDefaultEnv(t)
	sb := e.create(t)
	var live bytes.Buffer
	r, err := sb.Exec(ctxT(t), sandbox.Command{Shell: "head -c 3145728 /dev/zero; echo err >&2", Stdout: &live})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Stdout) != bigOutput || live.Len() != bigOutput || string(r.Stderr) != "err\n" || r.ExitCode != 0 {
		t.Errorf("stdout %d bytes, live %d, stderr %q, exit %d; want %d, %d, \"err\\n\", 0", len(r.Stdout), live.Len(), r.Stderr, r.ExitCode, bigOutput, bigOutput)
	}

	// Live output arrives while the command runs, and survives its timeout.
	const timeout = 6 * time.Second
	w := &firstWrite{start: time.Now()}
	r, err = sb.Exec(ctxT(t), sandbox.Command{Shell: "echo first; sleep 30", Timeout: timeout, Stdout: w})
	if err != nil {
		t.Fatal(err)
	}
	if !r.TimedOut || string(r.Stdout) != "first\n" {
		t.Errorf("timeout: TimedOut=%v stdout %q, want true and \"first\\n\"", r.TimedOut, r.Stdout)
	}
	if at := w.at(); at <= 0 || at >= timeout {
		t.Errorf("the live output arrived %v after the start, want before the command's timeout (%v)", at, timeout)
	}

	// Stdin is staged under /tmp too.
	r, err = sb.Exec(ctxT(t), sandbox.Command{Args: []string{"cat"}, Stdin: strings.NewReader("in put")})
	if err != nil || string(r.Stdout) != "in put" {
		t.Errorf("stdin: %q, %v", r.Stdout, err)
	}
}

// firstWrite records when its first write came.
type firstWrite struct {
	mu    sync.Mutex
	start time.Time
	first time.Duration
}

func (w *firstWrite) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.first == 0 {
		w.first = time.Since(w.start)
	}
	return len(p), nil
}

func (w *firstWrite) at() time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.first
}

// A failure to download the output of a command that ran is an error
// saying the outcome is unknown, never a short result with a nil error.
func TestExecLostOutputIsAnError(t *testing.T) {
	t.Parallel()
	for _, f := range []struct {
		name  string
		fault daytonafake.Fault
	}{{"502", daytonafake.Fault502}, {"404", daytonafake.FaultNotFound}} {
		t.Run(f.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, nil)
			sb := e.create(t)
			stop := e.fake.FailEvery("GET", "/toolbox/"+sb.ID()+"/files/download", f.fault)
			defer stop()
			var live bytes.Buffer
			r, err := sb.Exec(ctxT(t), sandbox.Command{Shell: "head -c 3145728 /dev/zero", Stdout: &live})
			if err == nil {
				t.Fatalf("exec returned %d bytes, exit %d and no error; want an error", len(r.Stdout), r.ExitCode)
			}
			if !errors.Is(err, sandbox.ErrOutcomeUnknown) {
				t.Errorf("err %v, want ErrOutcomeUnknown", err)
			}
			// The partial output of a timed-out command is lost too.
			_, err = sb.Exec(ctxT(t), sandbox.Command{Shell: "echo partial; sleep 30", Timeout: 2 * time.Second})
			if !errors.Is(err, sandbox.ErrOutcomeUnknown) {
				t.Errorf("timed out, output lost: %v, want ErrOutcomeUnknown", err)
			}
			stop()
			// Small outputs travel inline: a poll that fails loses nothing.
			stop = e.fake.FailEvery("GET", "/toolbox/"+sb.ID()+"/files/download", f.fault)
			r, err = sb.Exec(ctxT(t), sandbox.Command{Shell: "echo a; sleep 1; echo b"})
			if err != nil || string(r.Stdout) != "a\nb\n" {
				t.Errorf("inline output with failing polls: %q, %v", r.Stdout, err)
			}
		})
	}
}

// A stalled connection (the answer stops moving, the connection stays
// open) ends Exec within Command.Timeout plus ExecGrace, with an error.
// The Runtime's grace is testGrace, so that the test need not wait
// ExecGrace for each stall.
func TestExecStallIsBounded(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil, daytona.WithExecGraceForTest(testGrace))
	const timeout = 3 * time.Second
	bound := timeout + testGrace
	// Each case waits out its bound on a sandbox of its own (the fake's
	// faults are armed per sandbox), all at once.
	check := func(what string, run func(ctx context.Context, sb *sandbox.Sandbox) error) {
		t.Run(what, func(t *testing.T) {
			t.Parallel()
			sb := e.create(t)
			ctx, cancel := context.WithTimeout(context.Background(), 5*bound)
			defer cancel()
			start := time.Now()
			err := run(ctx, sb)
			took := time.Since(start)
			t.Logf("returned after %v (bound %v): %v", took.Round(time.Millisecond), bound, err)
			if err == nil {
				t.Errorf("nil error")
			} else if !errors.Is(err, sandbox.ErrOutcomeUnknown) {
				t.Errorf("%v, want ErrOutcomeUnknown", err)
			}
			if took > bound+5*time.Second {
				t.Errorf("took %v, want at most %v (+5 s of scheduling slack)", took, bound)
			}
		})
	}
	// The execute answer stalls after the command ran.
	check("StalledExecute", func(ctx context.Context, sb *sandbox.Sandbox) error {
		e.fake.FailNext("POST", "/toolbox/"+sb.ID()+"/process/execute", daytonafake.FaultStall)
		_, err := sb.Exec(ctx, sandbox.Command{Shell: "echo hi", Timeout: timeout})
		return err
	})
	// Every download stalls: the output of a large result cannot come.
	check("StalledDownload", func(ctx context.Context, sb *sandbox.Sandbox) error {
		stop := e.fake.FailEvery("GET", "/toolbox/"+sb.ID()+"/files/download", daytonafake.FaultStall)
		defer stop()
		_, err := sb.Exec(ctx, sandbox.Command{Shell: "head -c 3145728 /dev/zero", Timeout: timeout})
		return err
	})
	// Every execute hangs, the kill's too: the context ends the command
	// and the kill is bounded within the grace.
	t.Run("HungExecuteAndKill", func(t *testing.T) {
		t.Parallel()
		sb := e.create(t)
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		stop := e.fake.FailEvery("POST", "/toolbox/"+sb.ID()+"/process/execute", daytonafake.FaultHang)
		start := time.Now()
		_, err := sb.Exec(ctx, sandbox.Command{Shell: "echo hi", Timeout: time.Minute})
		took := time.Since(start)
		stop()
		t.Logf("%v context: returned after %v: %v", timeout, took.Round(time.Millisecond), err)
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("hung execute: %v, want DeadlineExceeded", err)
		}
		if took > bound+5*time.Second {
			t.Errorf("hung execute: took %v, want at most %v", took, bound)
		}
	})
}

// testGrace is the grace of the Runtime TestExecStallIsBounded uses: its
// half, the wait for the execute answer past the command's timeout, is
// still long enough for an answer on a loaded machine, and the whole is
// less than half ExecGrace.
const testGrace = 4 * time.Second

// blockingReader blocks every Read until released, and counts the Reads
// begun.
type blockingReader struct {
	mu      sync.Mutex
	reads   int
	release chan struct{}
}

func (b *blockingReader) Read(p []byte) (int, error) {
	b.mu.Lock()
	b.reads++
	b.mu.Unlock()
	<-b.release
	return 0, io.EOF
}

func (b *blockingReader) count() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.reads
}

// A Stdin that never ends is streamed to a command that waits for it: the
// command's timeout ends it as on any provider, Exec returns within the
// bound, and never reads the caller's reader after it returned.
func TestExecStdinNotReadAfterReturn(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	sb := e.create(t)
	in := &blockingReader{release: make(chan struct{})}
	defer close(in.release)
	// Long enough for the wrapper to start on a loaded host: a timeout
	// that fires before it made its files loses the result.
	const timeout = 5 * time.Second
	start := time.Now()
	res, err := sb.Exec(ctxT(t), sandbox.Command{Args: []string{"cat"}, Stdin: in, Timeout: timeout})
	took := time.Since(start)
	t.Logf("never-ending stdin: returned after %v: %+v, %v", took.Round(time.Millisecond), res, err)
	if err != nil || !res.TimedOut {
		t.Errorf("Exec = %+v, %v; want a timed-out result", res, err)
	}
	if took > timeout+daytona.ExecGrace+5*time.Second {
		t.Errorf("took %v, want at most %v", took, timeout+daytona.ExecGrace)
	}
	n := in.count()
	select {
	case in.release <- struct{}{}: // the abandoned Read returns
	case <-time.After(time.Second):
	}
	time.Sleep(200 * time.Millisecond)
	if m := in.count(); m != n {
		t.Errorf("%d Reads of Stdin began after Exec returned", m-n)
	}
}

// A finished command's output survives one failed download: the final
// fetch only reads, so it is tried again from the offset it reached (a
// dropped connection under load once turned a finished exec into lost
// output). Whether a fault meets a poll or the final fetch depends on
// timing, so three execs each get one.
func TestExecOutputSurvivesOneFailedDownload(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	sb := e.create(t)
	want := bytes.Repeat([]byte{0}, 3<<20)
	for i, f := range []daytonafake.Fault{daytonafake.Fault502, daytonafake.FaultResetMidBody, daytonafake.Fault502} {
		e.fake.FailNext("GET", "/files/download", f)
		r, err := sb.Exec(ctxT(t), sandbox.Command{Shell: "head -c 3145728 /dev/zero"})
		if err != nil {
			t.Fatalf("exec %d with one failed download: %v", i, err)
		}
		if !bytes.Equal(r.Stdout, want) || r.ExitCode != 0 {
			t.Fatalf("exec %d: %d bytes (want %d), exit %d", i, len(r.Stdout), len(want), r.ExitCode)
		}
	}
}

// connCounter counts the requests that went out on a new connection and
// those that reused a pooled one, the most in flight at once, and those
// cancelled before their response was read (the transport closes their
// connection).
type connCounter struct {
	fresh, reused  atomic.Int64
	inFlight, peak atomic.Int64
	cancelled      atomic.Int64
	next           http.RoundTripper
}

func (c *connCounter) RoundTrip(r *http.Request) (*http.Response, error) {
	n := c.inFlight.Add(1)
	defer c.inFlight.Add(-1)
	for p := c.peak.Load(); n > p && !c.peak.CompareAndSwap(p, n); p = c.peak.Load() {
	}
	trace := &httptrace.ClientTrace{GotConn: func(i httptrace.GotConnInfo) {
		if i.Reused {
			c.reused.Add(1)
		} else {
			c.fresh.Add(1)
		}
	}}
	resp, err := c.next.RoundTrip(r.WithContext(httptrace.WithClientTrace(r.Context(), trace)))
	if err != nil {
		if r.Context().Err() != nil {
			c.cancelled.Add(1)
		}
		return nil, err
	}
	resp.Body = &cancelSeen{ReadCloser: resp.Body, ctx: r.Context(), c: c}
	return resp, nil
}

// cancelSeen counts its request as cancelled when a read of its body
// fails after the request's context ended.
type cancelSeen struct {
	io.ReadCloser
	ctx  context.Context
	c    *connCounter
	seen bool
}

func (b *cancelSeen) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil && err != io.EOF && b.ctx.Err() != nil && !b.seen {
		b.seen = true
		b.c.cancelled.Add(1)
	}
	return n, err
}

// Exec keeps its connections whatever its output's size: each response is
// read to its end, so its connection goes back to the pool, and new
// connections are made only as requests overlap (an exec that runs a while
// polls its output beside its request). With the JSON decoder's read
// alone (the encoder's final newline left unread), about half of the
// execs with some KiB of output ended their connection, and against the
// real service each next call paid a new TLS handshake.
func TestExecReusesItsConnection(t *testing.T) {
	t.Parallel()
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 64 // the pool keeps every connection made
	defer tr.CloseIdleConnections()
	cc := &connCounter{next: tr}
	e := newHostEnv(t, nil, daytona.WithTransport(cc))
	sb := e.create(t)
	ctx := ctxT(t)
	sh(t, sb, "true") // the sandbox's toolbox connection, made once
	cc.fresh.Store(0)
	cc.peak.Store(0)
	cc.cancelled.Store(0)
	calls := 0
	for n := 0; n < 64<<10; n += 1021 {
		res, err := sb.Exec(ctx, sandbox.Command{Shell: fmt.Sprintf("head -c %d /dev/zero | tr '\\0' x", n)})
		if err != nil || len(res.Stdout) != n {
			t.Fatalf("exec with %d bytes of output: %d bytes, %v", n, len(res.Stdout), err)
		}
		calls++
	}
	// Each connection beyond the one pooled before is one more request in
	// flight at once, or replaces one a cancelled request ended (an exec
	// ends its output poll when it returns), at most.
	if f, peak, cancelled := cc.fresh.Load(), cc.peak.Load(), cc.cancelled.Load(); f > peak+cancelled {
		t.Errorf("%d of %d execs (outputs of 0 to 64 KiB) opened a new connection (%d requests reused one), with at most %d requests in flight at once and %d cancelled: a response was closed before its end", f, calls, cc.reused.Load(), peak, cancelled)
	}
}
