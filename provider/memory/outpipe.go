package memory

import (
	"io"
	"sync"
)

// outPipeBuf bounds the output a command has written and its reader has
// not yet taken, as a pipe's buffer does (64 KiB on Linux, per stream).
const outPipeBuf = 128 << 10

// outPipe stands for the pipes between a command and the caller reading
// its stdout and stderr: a write returns once its bytes are queued, not
// once the caller's writer took them, so a slow reader holds a command up
// only when the queue is full, as on every other provider. One goroutine
// hands the chunks on in the order they were written, so the caller's
// writers are never called concurrently (they may be one writer).
type outPipe struct {
	mu      sync.Mutex
	cond    sync.Cond
	q       []outChunk
	queued  int
	closing bool
	done    chan struct{}
}

type outChunk struct {
	w io.Writer
	b []byte
}

// newOutPipe starts the goroutine that hands output on; close ends it.
func newOutPipe() *outPipe {
	p := &outPipe{done: make(chan struct{})}
	p.cond.L = &p.mu
	go p.run()
	return p
}

// writer returns the command's end of the pipe to w (nil: discarded).
func (p *outPipe) writer(w io.Writer) io.Writer {
	if w == nil {
		return io.Discard
	}
	return &outPipeEnd{p: p, w: w}
}

type outPipeEnd struct {
	p *outPipe
	w io.Writer
}

func (e *outPipeEnd) Write(b []byte) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	p := e.p
	p.mu.Lock()
	defer p.mu.Unlock()
	for p.queued >= outPipeBuf && !p.closing {
		p.cond.Wait()
	}
	if p.closing {
		// A write after the command's end (a detached goroutine of a
		// handler): taken as a pipe whose reader left would not be.
		return 0, io.ErrClosedPipe
	}
	p.q = append(p.q, outChunk{e.w, append([]byte(nil), b...)})
	p.queued += len(b)
	p.cond.Broadcast()
	return len(b), nil
}

func (p *outPipe) run() {
	defer close(p.done)
	p.mu.Lock()
	for {
		for len(p.q) == 0 && !p.closing {
			p.cond.Wait()
		}
		if len(p.q) == 0 {
			p.mu.Unlock()
			return
		}
		c := p.q[0]
		p.q[0] = outChunk{}
		p.q = p.q[1:]
		p.mu.Unlock()
		_, _ = c.w.Write(c.b) // a failing reader loses its output, as with a pipe's
		p.mu.Lock()
		p.queued -= len(c.b)
		p.cond.Broadcast()
	}
}

// close returns once everything queued was handed on; later writes fail.
func (p *outPipe) close() {
	p.mu.Lock()
	p.closing = true
	p.cond.Broadcast()
	p.mu.Unlock()
	<-p.done
}
