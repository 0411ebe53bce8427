package e2bfake_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"net/http"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
)

// The pty messages are encoded here by hand with envd's field numbers
// (packages/envd/spec/process/process.proto), so that the fake (and the
// generated code the adapter shares with it) is held to the real wire:
//
//	StartRequest{process=1: ProcessConfig{cmd=1, args=2}, pty=2: PTY{size=1: Size{cols=1, rows=2}}}
//	SendInputRequest{process=1: ProcessSelector{pid=1}, input=2: ProcessInput{stdin=1 | pty=2}}
//	UpdateRequest{process=1, pty=2}
//	StartResponse{event=1: ProcessEvent{start=1: {pid=1}, data=2: {stdout=1 | stderr=2 | pty=3}, end=3: {exit_code=1 (sint32), exited=2, status=3}}}

func msg(fields ...[]byte) []byte { return bytes.Join(fields, nil) }

func bytesField(num protowire.Number, b []byte) []byte {
	return protowire.AppendBytes(protowire.AppendTag(nil, num, protowire.BytesType), b)
}

func varintField(num protowire.Number, v uint64) []byte {
	return protowire.AppendVarint(protowire.AppendTag(nil, num, protowire.VarintType), v)
}

func ptySize(rows, cols uint64) []byte {
	return bytesField(1, msg(varintField(1, cols), varintField(2, rows)))
}

func startPty(cmd string, args []string, pty []byte) []byte {
	cfg := [][]byte{bytesField(1, []byte(cmd))}
	for _, a := range args {
		cfg = append(cfg, bytesField(2, []byte(a)))
	}
	return msg(bytesField(1, msg(cfg...)), bytesField(2, pty))
}

func byPID(pid uint64) []byte { return bytesField(1, varintField(1, pid)) }

// fields decodes one message into its fields (last one wins).
func fields(t *testing.T, b []byte) map[protowire.Number][]byte {
	t.Helper()
	out := map[protowire.Number][]byte{}
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			t.Fatalf("bad tag in %x", b)
		}
		b = b[n:]
		switch typ {
		case protowire.BytesType:
			v, m := protowire.ConsumeBytes(b)
			if m < 0 {
				t.Fatalf("bad bytes in %x", b)
			}
			out[num], b = v, b[m:]
		case protowire.VarintType:
			v, m := protowire.ConsumeVarint(b)
			if m < 0 {
				t.Fatalf("bad varint in %x", b)
			}
			out[num], b = protowire.AppendVarint(nil, v), b[m:]
		default:
			t.Fatalf("unexpected wire type %v", typ)
		}
	}
	return out
}

func varint(b []byte) uint64 { v, _ := protowire.ConsumeVarint(b); return v }

// ptyStream is a Start stream read in the proto codec.
type ptyStream struct {
	t    *testing.T
	resp *http.Response
}

func (f *rawFake) openPty(c created, body []byte) *ptyStream {
	f.t.Helper()
	env := make([]byte, 5+len(body))
	binary.BigEndian.PutUint32(env[1:], uint32(len(body)))
	copy(env[5:], body)
	// The stream is bounded, so that a stream that never ends fails the
	// test instead of hanging it.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	f.t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, "POST", f.SandboxURL()+"/process.Process/Start", bytes.NewReader(env))
	for k, v := range f.envdHeaders(c) {
		req.Header.Set(k, v)
	}
	req.Header.Set("Content-Type", "application/connect+proto")
	req.Header.Set("Connect-Protocol-Version", "1")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { resp.Body.Close() })
	if resp.StatusCode != 200 {
		f.t.Fatalf("Start: HTTP %d", resp.StatusCode)
	}
	return &ptyStream{t: f.t, resp: resp}
}

// next returns the next ProcessEvent's fields, or the end-of-stream JSON.
func (s *ptyStream) next() (map[protowire.Number][]byte, string) {
	s.t.Helper()
	var hdr [5]byte
	if _, err := readFull(s.resp, hdr[:]); err != nil {
		s.t.Fatalf("read envelope: %v", err)
	}
	b := make([]byte, binary.BigEndian.Uint32(hdr[1:]))
	if _, err := readFull(s.resp, b); err != nil {
		s.t.Fatalf("read envelope: %v", err)
	}
	if hdr[0]&0x02 != 0 {
		return nil, string(b)
	}
	return fields(s.t, fields(s.t, b)[1]), ""
}

func readFull(r *http.Response, b []byte) (int, error) {
	n := 0
	for n < len(b) {
		m, err := r.Body.Read(b[n:])
		n += m
		if err != nil && n < len(b) {
			return n, err
		}
	}
	return n, nil
}

func (f *rawFake) unary(c created, procedure string, body []byte) (int, string) {
	f.t.Helper()
	h := f.envdHeaders(c)
	h["Content-Type"] = "application/proto"
	st, _, b := f.do("POST", f.SandboxURL()+"/process.Process/"+procedure, h, body)
	return st, string(b)
}

func TestPtyWire(t *testing.T) {
	f := start(t)
	c := f.create(`{"templateID":"base"}`)
	s := f.openPty(c, startPty("sh", []string{"-c", `stty size; read x; echo "got-$x"; exit 3`}, ptySize(22, 77)))
	ev, _ := s.next()
	st := ev[1]
	if st == nil {
		t.Fatalf("first event is not start: %v", ev)
	}
	pid := varint(fields(t, st)[1])
	if pid == 0 {
		t.Fatal("start event without a pid")
	}
	var out strings.Builder
	typed := false
	deadline := time.Now().Add(20 * time.Second)
	var end map[protowire.Number][]byte
	for end == nil && time.Now().Before(deadline) {
		ev, eos := s.next()
		if ev == nil {
			t.Fatalf("stream ended without an end event: %s; output %q", eos, out.String())
		}
		switch {
		case ev[2] != nil:
			d := fields(t, ev[2])
			if d[1] != nil || d[2] != nil {
				t.Fatalf("a pty process's output came as stdout/stderr: %v", d)
			}
			out.Write(d[3])
			if !typed && strings.Contains(out.String(), "22 77") {
				typed = true
				// Input as ProcessInput.pty (field 2).
				if st, b := f.unary(c, "SendInput", msg(byPID(pid), bytesField(2, bytesField(2, []byte("hey\r"))))); st != 200 {
					t.Fatalf("SendInput pty: %d %s", st, b)
				}
			}
		case ev[3] != nil:
			end = fields(t, ev[3])
		}
	}
	if !typed {
		t.Fatalf("stty size did not show the pty's size 22 77: %q", out.String())
	}
	if !strings.Contains(out.String(), "got-hey") {
		t.Errorf("the typed line did not reach read: %q", out.String())
	}
	if end == nil {
		t.Fatal("no end event")
	}
	if code := protowire.DecodeZigZag(varint(end[1])); code != 3 || varint(end[2]) != 1 || string(end[3]) != "exit status 3" {
		t.Errorf("end event: exit_code %d exited %d status %q, want 3, 1, exit status 3", code, varint(end[2]), end[3])
	}
}

// envd's answers for a pty start without a size, for input and resizes
// that do not fit the process, and for CloseStdin of a pty process.
func TestPtyAnswers(t *testing.T) {
	f := start(t)
	c := f.create(`{"templateID":"base"}`)
	// A pty with no size starts (envd's is 0x0; the fake's backends
	// refuse 0, so its terminal is 1x1), not an error.
	s := f.openPty(c, startPty("sh", []string{"-c", `stty size; read x`}, nil))
	ev, eos := s.next()
	if ev == nil {
		t.Fatalf("Start with a pty without a size: %s", eos)
	}
	pid := varint(fields(t, ev[1])[1])
	ev, _ = s.next()
	if got := string(fields(t, ev[2])[3]); !strings.Contains(got, "1 1") {
		t.Errorf("stty size on a pty without a size: %q, want 1 1", got)
	}
	// stdin input to a pty process: internal.
	if st, b := f.unary(c, "SendInput", msg(byPID(pid), bytesField(2, bytesField(1, []byte("x\n"))))); st != 500 || !strings.Contains(b, "tty assigned to process") {
		t.Errorf("stdin input to a pty process: %d %s, want 500 (internal)", st, b)
	}
	// CloseStdin of a pty process: unknown.
	if st, b := f.unary(c, "CloseStdin", byPID(pid)); st != 500 || !strings.Contains(b, "Ctrl+D") {
		t.Errorf("CloseStdin of a pty process: %d %s, want 500 (unknown)", st, b)
	}
	// Update with a size resizes; the unknown pid is not_found.
	if st, b := f.unary(c, "Update", msg(byPID(pid), bytesField(2, ptySize(10, 20)))); st != 200 {
		t.Errorf("Update: %d %s", st, b)
	}
	if st, b := f.unary(c, "Update", msg(byPID(999999), bytesField(2, ptySize(10, 20)))); st != 404 || !strings.Contains(b, "process with pid 999999 not found") {
		t.Errorf("Update of an unknown pid: %d %s, want 404 (not_found)", st, b)
	}
	if st, b := f.unary(c, "SendInput", msg(byPID(pid), bytesField(2, bytesField(2, []byte("\r"))))); st != 200 {
		t.Fatalf("SendInput: %d %s", st, b)
	}
	for {
		ev, eos := s.next()
		if ev == nil {
			t.Fatalf("stream ended without an end event: %s", eos)
		}
		if ev[3] != nil {
			break
		}
	}
	// A process without a pty: pty input and resizes are internal.
	s2 := f.openPty(c, bytesField(1, msg(bytesField(1, []byte("sh")), bytesField(2, []byte("-c")), bytesField(2, []byte("read x")))))
	ev, _ = s2.next()
	pid2 := varint(fields(t, ev[1])[1])
	if st, b := f.unary(c, "SendInput", msg(byPID(pid2), bytesField(2, bytesField(2, []byte("x\r"))))); st != 500 || !strings.Contains(b, "tty not assigned to process") {
		t.Errorf("pty input to a process without a pty: %d %s, want 500 (internal)", st, b)
	}
	if st, b := f.unary(c, "Update", msg(byPID(pid2), bytesField(2, ptySize(10, 20)))); st != 500 || !strings.Contains(b, "error resizing tty: tty not assigned to process") {
		t.Errorf("Update of a process without a pty: %d %s, want 500 (internal)", st, b)
	}
	if st, b := f.unary(c, "SendSignal", msg(byPID(pid2), varintField(2, 9))); st != 200 {
		t.Fatalf("SendSignal: %d %s", st, b)
	}
	for {
		ev, eos := s2.next()
		if ev == nil {
			t.Fatalf("stream ended without an end event: %s", eos)
		}
		if ev[3] != nil {
			break
		}
	}
}
