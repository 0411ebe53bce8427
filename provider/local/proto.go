package local

import (
	"crypto/subtle"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/sandboxkit/sandbox/sberrors"
)

// The agent protocol, over the sandbox's unix socket. Every message is a
// frame: one type byte, a 4-byte big-endian payload length, then the
// payload. The client sends an auth frame first (the sandbox's key), then
// a request frame; the agent answers with frames until it closes the
// connection.
const (
	frameRequest = 'R' // client→agent: JSON request
	frameStdin   = 'I' // client→agent: stdin bytes
	frameEOF     = 'E' // client→agent: close stdin
	frameStarted = 'S' // agent→client: JSON {pid}
	frameStdout  = '1' // agent→client: stdout bytes
	frameStderr  = '2' // agent→client: stderr bytes
	frameExit    = 'W' // agent→client: JSON exit status; last frame
	frameFail    = 'F' // agent→client: JSON failure; last frame
	frameOK      = 'K' // agent→client: JSON reply to a control request
	frameAuth    = 'A' // client→agent: the sandbox's key; first frame of every connection

	// Terminals (see terminal_linux.go): a "term" or "term-attach"
	// connection carries input as frameStdin and these control frames;
	// the terminal's output comes as frameStdout.
	frameResize  = 'Z' // client→agent: JSON termSize
	frameTermSig = 'G' // client→agent: JSON termSignal, to the foreground process group
	frameTermAck = 'Q' // agent→client: one input frame written to the terminal (empty)
)

// keySize is the length of a sandbox's agent key. Every connection to an
// agent opens with an auth frame carrying it (exactly keySize bytes); the
// agent reads nothing else before it has compared the key.
const keySize = 32

// maxFrame bounds a frame's payload; output and stdin are sent in chunks
// far below it.
const maxFrame = 4 << 20

// request is the first frame of every connection.
type request struct {
	Op      string   `json:"op"` // exec, start, attach, signal, ping, stop, cont, shutdown, lease, dial, egress, term, term-attach, watch, ps
	Args    []string `json:"args,omitempty"`
	Env     []string `json:"env,omitempty"`
	Dir     string   `json:"dir,omitempty"`
	Stdin   bool     `json:"stdin,omitempty"`
	Timeout int64    `json:"timeout_ns,omitempty"`
	PID     int      `json:"pid,omitempty"`
	Signal  int      `json:"signal,omitempty"`
	Port    int      `json:"port,omitempty"` // dial: the sandbox port to connect to; egress: the relay's port
	// Raw (dial) asks for a raw byte stream once connected, instead of
	// frames: see forwardPort.
	Raw bool `json:"raw,omitempty"`
	// Pass (dial, with Raw) asks the agent to hand over the connected
	// socket itself (SCM_RIGHTS on the OK frame) instead of relaying: the
	// client then moves the bytes, with one hop less.
	Pass bool `json:"pass,omitempty"`
	// Recursive (watch) watches the directories below Dir too.
	Recursive bool `json:"recursive,omitempty"`
	// Rows and Cols (term) are the terminal's initial window size; Term
	// (term-attach) names the terminal.
	Rows uint16 `json:"rows,omitempty"`
	Cols uint16 `json:"cols,omitempty"`
	Term string `json:"term,omitempty"`

	level Level // the level the client built the request for (not sent)
}

// startedMsg answers exec, start and attach once the process runs.
type startedMsg struct {
	PID int `json:"pid"`
}

// exitMsg is the last frame of exec, start and attach.
type exitMsg struct {
	Code     int  `json:"code"`
	TimedOut bool `json:"timed_out,omitempty"`
	// Signal is the number of the signal that ended the process (Code is
	// then -1); absent when it exited or timed out, so an older client
	// reads the frame as before.
	Signal int `json:"signal,omitempty"`
}

// failMsg reports a request the agent could not serve.
type failMsg struct {
	Code string `json:"code"` // NotFound, InvalidArgument, Internal...
	Msg  string `json:"msg"`
}

func (f failMsg) err() error {
	code := sberrors.Internal
	switch f.Code {
	case "NotFound":
		code = sberrors.NotFound
	case "InvalidArgument":
		code = sberrors.InvalidArgument
	case "PermissionDenied":
		code = sberrors.PermissionDenied
	case "FailedPrecondition":
		code = sberrors.FailedPrecondition
	case "Unavailable":
		code = sberrors.Unavailable
	case "ResourceExhausted":
		code = sberrors.ResourceExhausted
	case "NotDirectory":
		return fmt.Errorf("local agent: %s: %w", f.Msg, sberrors.ErrNotDirectory)
	}
	return sberrors.Errorf(code, "local agent: %s", f.Msg)
}

// frameWriter writes frames; it is safe for concurrent use.
type frameWriter struct {
	mu  sync.Mutex
	w   io.Writer
	buf []byte
	err error
}

func (fw *frameWriter) write(typ byte, p []byte) error {
	fw.mu.Lock()
	defer fw.mu.Unlock()
	if fw.err != nil {
		return fw.err
	}
	// One write per frame: one wake-up of the reader, not two.
	fw.buf = append(fw.buf[:0], typ, 0, 0, 0, 0)
	binary.BigEndian.PutUint32(fw.buf[1:5], uint32(len(p)))
	fw.buf = append(fw.buf, p...)
	if _, err := fw.w.Write(fw.buf); err != nil {
		fw.err = err
		return err
	}
	if cap(fw.buf) > 64<<10 {
		fw.buf = nil
	}
	return nil
}

func (fw *frameWriter) writeJSON(typ byte, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return fw.write(typ, b)
}

// writeRequest writes req as a request frame.
func (fw *frameWriter) writeRequest(req *request) error {
	var b [512]byte
	return fw.write(frameRequest, appendRequest(b[:0], req))
}

// writeExit writes ex as an exit frame.
func (fw *frameWriter) writeExit(ex *exitMsg) error {
	var b [64]byte
	return fw.write(frameExit, appendExit(b[:0], ex))
}

// authFrame returns the auth frame for key.
func authFrame(key []byte) []byte {
	b := make([]byte, 5, 5+len(key))
	b[0] = frameAuth
	binary.BigEndian.PutUint32(b[1:5], uint32(len(key)))
	return append(b, key...)
}

// checkAuth reads exactly one auth frame from r and reports whether it
// carries key, compared in constant time. It never reads past that frame,
// so nothing a client sends before authenticating is parsed.
func checkAuth(r io.Reader, key []byte) bool {
	var b [5 + keySize]byte
	if _, err := io.ReadFull(r, b[:]); err != nil {
		return false
	}
	ok := b[0] == frameAuth && binary.BigEndian.Uint32(b[1:5]) == keySize && len(key) == keySize
	return subtle.ConstantTimeCompare(b[5:], key) == 1 && ok
}

// readFrame reads one frame into buf (grown as needed) and returns its
// type and payload.
func readFrame(r io.Reader, buf []byte) (byte, []byte, error) {
	var hdr [5]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return 0, buf, err
	}
	n := binary.BigEndian.Uint32(hdr[1:])
	if n > maxFrame {
		return 0, buf, fmt.Errorf("local: protocol: frame of %d bytes", n)
	}
	if cap(buf) < int(n) {
		buf = make([]byte, n)
	}
	buf = buf[:n]
	if _, err := io.ReadFull(r, buf); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return 0, buf, err
	}
	return hdr[0], buf, nil
}
