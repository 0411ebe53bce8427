package docker

import (
	"bytes"
	"io"
)

// endMark is the mark the wrapper writes after an exec's output (see
// wrapper): control characters around the exec's random token, which the
// command's own output cannot be expected to hold.
func endMark(token string) string { return "\x1e\x1fsbx-end-" + token + "\x1f\x1e" }

// endPair holds the two end-detecting writers of one exec; done runs once
// both marks arrived.
type endPair struct {
	out, err *endWriter
	seen     int
	done     func()
}

func newEndPair(mark string, stdout, stderr io.Writer, done func()) *endPair {
	p := &endPair{done: done}
	p.out = &endWriter{w: stdout, mark: []byte(mark), pair: p}
	p.err = &endWriter{w: stderr, mark: []byte(mark), pair: p}
	return p
}

// flush passes on what each writer still holds.
func (p *endPair) flush() error {
	if err := p.out.flush(); err != nil {
		return err
	}
	return p.err.flush()
}

// endWriter passes a stream on until its end mark, which it removes. It
// holds back only a tail of the stream that could be the start of the
// mark (none, for output that does not end in the mark's first byte), so
// output streams on as it comes. What comes after the mark (a process
// that left the command's process group writing on) is dropped: the
// command's output ended there.
type endWriter struct {
	w    io.Writer
	mark []byte
	held []byte // a proper prefix of mark
	seen bool
	pair *endPair
}

func (e *endWriter) Write(p []byte) (int, error) {
	n := len(p)
	if e.seen || n == 0 {
		return n, nil
	}
	if len(e.held) > 0 {
		// The mark may start in what is held and go on in p.
		need := len(e.mark) - len(e.held)
		if len(p) >= need {
			if bytes.Equal(p[:need], e.mark[len(e.held):]) {
				return n, e.found(nil)
			}
		} else if bytes.Equal(p, e.mark[len(e.held):len(e.held)+len(p)]) {
			e.held = append(e.held, p...)
			return n, nil
		}
		// Not the mark: what was held is output. Part of it could
		// still start a mark that goes on in p, so it is looked at again
		// with p (held is shorter than the mark: the cost is bounded).
		all := append(append([]byte(nil), e.held...), p...)
		e.held = e.held[:0]
		return n, e.scan(all)
	}
	return n, e.scan(p)
}

// scan passes b on up to the mark, or all of it but the tail that could
// start the mark.
func (e *endWriter) scan(b []byte) error {
	if i := bytes.Index(b, e.mark); i >= 0 {
		return e.found(b[:i])
	}
	keep := partialMark(b, e.mark)
	if err := e.emit(b[:len(b)-keep]); err != nil {
		return err
	}
	e.held = append(e.held[:0], b[len(b)-keep:]...)
	return nil
}

// partialMark returns the length of the longest tail of b that is a proper
// prefix of mark.
func partialMark(b, mark []byte) int {
	for i := max(0, len(b)-(len(mark)-1)); i < len(b); i++ {
		if b[i] == mark[0] && bytes.Equal(b[i:], mark[:len(b)-i]) {
			return len(b) - i
		}
	}
	return 0
}

func (e *endWriter) found(before []byte) error {
	err := e.emit(before)
	e.seen, e.held = true, nil
	e.pair.seen++
	if e.pair.seen == 2 && e.pair.done != nil {
		e.pair.done()
	}
	return err
}

func (e *endWriter) emit(b []byte) error {
	if len(b) == 0 {
		return nil
	}
	_, err := e.w.Write(b)
	return err
}

func (e *endWriter) flush() error {
	if e.seen {
		return nil
	}
	b := e.held
	e.held = nil
	return e.emit(b)
}
