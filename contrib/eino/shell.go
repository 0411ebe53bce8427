package eino

import (
	"context"
	"fmt"
	"runtime/debug"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/cloudwego/eino/adk/filesystem"
	"github.com/cloudwego/eino/schema"

	"github.com/sandboxkit/sandbox/backend"
)

// Execute runs a shell command in the sandbox, with the workspace root as
// its working directory, bounded by Options.ExecuteTimeout, and returns its
// combined output (stdout, then stderr), capped at Options.MaxExecuteOutput
// (Truncated set) with secret values redacted, and its exit code. A command
// that timed out or was killed by a signal says so at the end of Output. A
// nonzero exit is a response, not an error.
//
// With req.RunInBackendGround the command is started detached from the
// call, its output discarded, and the response says its pid.
//
// Without Options.AllowExecute it returns a permission_denied
// *backend.Error.
func (b *Backend) Execute(ctx context.Context, req *filesystem.ExecuteRequest) (*filesystem.ExecuteResponse, error) {
	var out *filesystem.ExecuteResponse
	err := b.do(ctx, func(ctx context.Context, t *target) error {
		r, err := t.fsb.Execute(ctx, &backend.ExecuteRequest{Command: command(req)})
		if err != nil {
			return err
		}
		if r.Error != nil {
			return b.fail(r.Error)
		}
		out = b.response(r, r.Output)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// command returns the shell line to run for req: the command itself, or
// for a background run the command detached with nohup, quoted as one
// argument (the model's text is the command either way).
func command(req *filesystem.ExecuteRequest) string {
	if !req.RunInBackendGround {
		return req.Command
	}
	return "nohup sh -c " + shQuote(req.Command) + ` >/dev/null 2>&1 </dev/null & echo "started in the background, pid $! (its output is discarded: redirect it to a file to keep it)"`
}

// shQuote quotes s as one word for a POSIX shell.
func shQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// response is the eino response for r, with output as its text (the
// captured output, or "" when it was streamed already): the notes on a
// timeout or signal are added to the output, as eino's response has no
// field for them.
func (b *Backend) response(r *backend.ExecuteResult, output string) *filesystem.ExecuteResponse {
	code := r.ExitCode
	var tail []string
	if r.TimedOut {
		tail = append(tail, "[Command timed out]")
	}
	if r.Signal != "" {
		tail = append(tail, "[Command killed by signal "+r.Signal+"]")
	}
	if len(tail) > 0 {
		if output != "" && !strings.HasSuffix(output, "\n") {
			output += "\n"
		}
		output += strings.Join(tail, "\n")
	}
	return &filesystem.ExecuteResponse{Output: b.redact(output), ExitCode: &code, Truncated: r.Truncated}
}

// ExecuteStreaming runs a command as Execute does and returns its output
// as it comes: chunks of output (redacted by the sandbox as they pass),
// then a last response with the exit code, Truncated when the output went
// past Options.MaxExecuteOutput (the rest is not sent), and the notes on a
// timeout or signal. A failure to run the command at all is returned
// before any chunk when it can be, else as the stream's error.
//
// The command runs until it ends or ctx ends. Closing the reader early
// stops it too, at its next output (an eino stream tells its writer of a
// close only when it sends). The reader must be read to its end or closed,
// as every eino stream.
func (b *Backend) ExecuteStreaming(ctx context.Context, req *filesystem.ExecuteRequest) (*schema.StreamReader[*filesystem.ExecuteResponse], error) {
	if req.RunInBackendGround {
		r, err := b.Execute(ctx, req)
		if err != nil {
			return nil, err
		}
		return schema.StreamReaderFromArray([]*filesystem.ExecuteResponse{r}), nil
	}
	if !b.opts.AllowExecute {
		// Refused up front, so that the error comes before the stream.
		return nil, backend.Errorf(backend.CodePermissionDenied, "", "execute is disabled for this backend")
	}
	if strings.TrimSpace(req.Command) == "" {
		return nil, backend.Errorf(backend.CodeInvalidArgument, "", "invalid command: the command is empty")
	}
	sess, t, err := b.resolve(ctx)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	sr, sw := schema.Pipe[*filesystem.ExecuteResponse](16)
	live := &liveOutput{limit: b.opts.MaxExecuteOutput, secrets: b.secrets, wake: make(chan struct{}, 1), done: make(chan struct{})}
	var res *backend.ExecuteResult
	go func() {
		defer close(live.done)
		defer func() {
			if p := recover(); p != nil {
				err = fmt.Errorf("eino: execute: panic: %v\n%s", p, debug.Stack())
			}
		}()
		err = b.run(ctx, sess, t, func(ctx context.Context, t *target) error {
			r, err := t.fsb.Execute(ctx, &backend.ExecuteRequest{Command: req.Command, Stream: live})
			if err != nil {
				return err
			}
			if r.Error != nil {
				return b.fail(r.Error)
			}
			res = r
			return nil
		})
	}()
	go func() {
		defer sw.Close()
		defer cancel()
		for {
			var finished bool
			select {
			case <-live.wake:
			case <-live.done:
				finished = true
			}
			if chunk, _ := live.take(); chunk != "" {
				if sw.Send(&filesystem.ExecuteResponse{Output: b.redact(chunk)}, nil) {
					cancel() // the reader was closed: stop the command
					<-live.done
					return
				}
			}
			if !finished {
				continue
			}
			if err != nil {
				sw.Send(nil, err)
				return
			}
			_, cut := live.take()
			last := b.response(res, "")
			last.Truncated = last.Truncated || cut
			if last.Output != "" && live.sent() {
				last.Output = "\n" + last.Output
			}
			sw.Send(last, nil)
			return
		}
	}()
	return sr, nil
}

// liveOutput is the ExecuteRequest.Stream of a streaming command: it keeps
// what came since the last take, up to the output cap over the whole
// command, and wakes the sender. It never blocks the command's output.
type liveOutput struct {
	limit int
	// secrets are the redacted values: a tail that may be the start of
	// one is held back until more output comes or the command ends.
	secrets []string
	wake    chan struct{}
	done    chan struct{}

	mu      sync.Mutex
	pending []byte
	total   int  // bytes accepted over the command
	cut     bool // output went past limit
	any     bool // some output was taken
}

func (l *liveOutput) Write(p []byte) (int, error) {
	l.mu.Lock()
	q := p
	if room := l.limit - l.total; len(q) > room {
		q = trimPartial(q[:max(room, 0)]) // no character split at the cap
		l.cut = true
		l.total = l.limit
	} else {
		l.total += len(q)
	}
	l.pending = append(l.pending, q...)
	l.mu.Unlock()
	select {
	case l.wake <- struct{}{}:
	default:
	}
	return len(p), nil
}

// take returns what came since the last take, up to the end of the last
// whole character (the rest waits for the next write, or is given when the
// command has ended), and whether output was cut at the cap.
func (l *liveOutput) take() (string, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := len(l.pending)
	select {
	case <-l.done:
		if l.cut {
			// Cut at the cap: what may start a value is never completed.
			n = secretTail(l.pending, l.secrets)
		}
	default:
		n = len(trimPartial(l.pending))
		n = secretTail(l.pending[:n], l.secrets)
	}
	s := string(l.pending[:n])
	l.pending = append(l.pending[:0], l.pending[n:]...)
	if s != "" {
		l.any = true
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	return s, l.cut
}

func (l *liveOutput) sent() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.any
}

// trimPartial returns p without an incomplete UTF-8 sequence at its end.
func trimPartial(p []byte) []byte {
	for i := len(p) - 1; i >= 0 && i >= len(p)-utf8.UTFMax; i-- {
		if utf8.RuneStart(p[i]) {
			if !utf8.FullRune(p[i:]) {
				return p[:i]
			}
			return p
		}
	}
	return p
}
