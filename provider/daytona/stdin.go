package daytona

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
	"time"

	"github.com/sandboxkit/sandbox/internal/iox"
	"github.com/sandboxkit/sandbox/internal/stdinread"
)

// How Exec streams Stdin. The toolbox API has no stdin for a command, so
// Exec uploads the caller's Stdin in chunks while the command runs, and a
// small shell loop in the sandbox (the feeder) copies them to the
// command's stdin through a pipe: chunk n is the file d.i<n>, complete
// once its empty commit file d.c<n> exists (an upload becomes visible
// before its last byte is written); d.ie says there are no more. The
// feeder consumes the chunks in order, removing each, and stops at d.ie,
// or as soon as the command has ended (d.q, made by the command's
// subshell when it exits), so that a command that does not read its stdin
// is never held by it. When the command's Exec returns, the upload of
// chunks is stopped and joined first: no Read of the caller's Stdin starts
// after Exec returns, and a Read still blocked is abandoned (its data
// discarded), as with os/exec's WaitDelay.

// stdinChunk is the most bytes one chunk carries; a chunk is sent earlier
// when the caller's reader has nothing more for stdinLinger.
const (
	stdinChunk  = 4 << 20
	stdinLinger = 20 * time.Millisecond
)

// feedScript returns the shell text that runs run (a command in a
// subshell or "sh file") with its stdin fed from the chunks of d.
func feedScript(d, run string) string {
	return fmt.Sprintf(`{ { _i=0; while :; do if [ -f %[1]s.c$_i ]; then cat %[1]s.i$_i; rm -f %[1]s.i$_i %[1]s.c$_i; _i=$((_i+1)); elif [ -f %[1]s.q ]; then break; elif [ -f %[1]s.ie ]; then [ -f %[1]s.c$_i ] || break; else sleep 0.02 2>/dev/null || sleep 1; fi; done; } 2>/dev/null | ( %[2]s; _r=$?; : >%[1]s.q; exit $_r ); }`, d, run)
}

// stdinFiles is the command that removes what a stream of Stdin may leave.
func stdinFiles(d string) string {
	return fmt.Sprintf("rm -f %[1]s.q %[1]s.ie %[1]s.i[0-9]* %[1]s.c[0-9]*", d)
}

// stdinFeed uploads the caller's Stdin as chunks for the feeder.
type stdinFeed struct {
	in     *stdinread.Reader
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu       sync.Mutex
	err      error // a failure to read Stdin or deliver a chunk
	ended    bool  // d.ie was delivered
	uploaded bool  // something was uploaded
}

type stdinPiece struct {
	b   []byte
	err error
}

// feedStdin starts streaming src to the feeder of the command d.
func (r *Runtime) feedStdin(ctx context.Context, id, d string, src io.Reader) *stdinFeed {
	ctx, cancel := context.WithCancel(ctx)
	f := &stdinFeed{in: stdinread.New(src), cancel: cancel}
	pieces := make(chan stdinPiece)
	f.wg.Add(2)
	go func() { // reads the caller's Stdin, one Read at a time
		defer f.wg.Done()
		for {
			b := make([]byte, 32<<10)
			n, err := f.in.Read(b)
			select {
			case pieces <- stdinPiece{b[:n], err}:
			case <-ctx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	}()
	go func() { // uploads chunks
		defer f.wg.Done()
		f.upload(ctx, r, id, d, pieces)
	}()
	return f
}

func (f *stdinFeed) upload(ctx context.Context, r *Runtime, id, d string, pieces <-chan stdinPiece) {
	put := func(name string, data []byte) error {
		cr := &iox.CountingReader{R: bytes.NewReader(data)}
		f.mu.Lock()
		f.uploaded = true
		f.mu.Unlock()
		return r.upload(ctx, id, name, cr, func() bool { return cr.N == 0 })
	}
	fail := func(err error) {
		f.mu.Lock()
		if f.err == nil && ctx.Err() == nil {
			f.err = err
		}
		f.mu.Unlock()
	}
	linger := time.NewTimer(stdinLinger)
	defer linger.Stop()
	for n := 0; ; n++ {
		var chunk []byte
		var rerr error
		select {
		case p := <-pieces:
			chunk, rerr = append(chunk, p.b...), p.err
		case <-ctx.Done():
			return
		}
		for rerr == nil && len(chunk) < stdinChunk {
			linger.Reset(stdinLinger)
			select {
			case p := <-pieces:
				chunk, rerr = append(chunk, p.b...), p.err
				continue
			case <-linger.C:
			case <-ctx.Done():
				return
			}
			break
		}
		if len(chunk) > 0 {
			k := strconv.Itoa(n)
			if err := put(d+".i"+k, chunk); err != nil {
				fail(fmt.Errorf("delivering Stdin: %w", err))
				return
			}
			if err := put(d+".c"+k, nil); err != nil {
				fail(fmt.Errorf("delivering Stdin: %w", err))
				return
			}
		} else {
			n--
		}
		if rerr != nil {
			if !errors.Is(rerr, io.EOF) {
				fail(fmt.Errorf("reading Command.Stdin: %w", rerr))
			}
			if err := put(d+".ie", nil); err != nil {
				fail(fmt.Errorf("delivering the end of Stdin: %w", err))
				return
			}
			f.mu.Lock()
			f.ended = true
			f.mu.Unlock()
			return
		}
	}
}

// stop ends the stream and waits for its goroutines: no Read of the
// caller's Stdin starts after it returns. It returns the failure to read
// or deliver Stdin, if any, and whether files may be left in the sandbox.
func (f *stdinFeed) stop() (leftovers bool, err error) {
	f.in.Stop()
	f.cancel()
	f.wg.Wait()
	f.mu.Lock()
	defer f.mu.Unlock()
	if errors.Is(f.err, stdinread.ErrStopped) {
		f.err = nil
	}
	return f.uploaded && !f.ended || f.err != nil, f.err
}

// cleanupStdin removes the chunks a stream left (best effort, bounded).
func (r *Runtime) cleanupStdin(id, d string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = r.execute(ctx, id, "{ "+stdinFiles(d)+"; } </dev/null", "", 10)
}
