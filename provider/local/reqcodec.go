package local

import (
	"bytes"
	"encoding/json"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// A request frame's payload is the JSON encoding of request, as
// encoding/json writes it: agents and clients of other versions read it.
// Every exec sends one, and encoding/json's reflection costs more than the
// rest of the agent's work before the fork, so the common requests take a
// direct path both ways: appendRequest writes exactly the bytes
// json.Marshal does, and decodeRequest reads what it writes (plain
// strings, integers, booleans, the known keys once each), handing
// anything else to encoding/json, which decides as it always did.

// appendRequest appends the JSON encoding of req to b: the bytes
// json.Marshal(req) returns.
func appendRequest(b []byte, req *request) []byte {
	b = append(b, `{"op":`...)
	b = appendJSONString(b, req.Op)
	if len(req.Args) > 0 {
		b = appendStrings(append(b, `,"args":`...), req.Args)
	}
	if len(req.Env) > 0 {
		b = appendStrings(append(b, `,"env":`...), req.Env)
	}
	if req.Dir != "" {
		b = appendJSONString(append(b, `,"dir":`...), req.Dir)
	}
	b = appendTrue(b, `,"stdin":true`, req.Stdin)
	b = appendInt(b, `,"timeout_ns":`, req.Timeout)
	b = appendInt(b, `,"pid":`, int64(req.PID))
	b = appendInt(b, `,"signal":`, int64(req.Signal))
	b = appendInt(b, `,"port":`, int64(req.Port))
	b = appendTrue(b, `,"raw":true`, req.Raw)
	b = appendTrue(b, `,"pass":true`, req.Pass)
	b = appendTrue(b, `,"recursive":true`, req.Recursive)
	b = appendInt(b, `,"rows":`, int64(req.Rows))
	b = appendInt(b, `,"cols":`, int64(req.Cols))
	if req.Term != "" {
		b = appendJSONString(append(b, `,"term":`...), req.Term)
	}
	return append(b, '}')
}

func appendTrue(b []byte, field string, v bool) []byte {
	if v {
		b = append(b, field...)
	}
	return b
}

// appendInt appends prefix and n unless n is 0 (omitempty).
func appendInt(b []byte, prefix string, n int64) []byte {
	if n == 0 {
		return b
	}
	return strconv.AppendInt(append(b, prefix...), n, 10)
}

func appendStrings(b []byte, ss []string) []byte {
	b = append(b, '[')
	for i, s := range ss {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, s)
	}
	return append(b, ']')
}

// appendJSONString appends s as encoding/json writes it: printable ASCII
// that needs no escape as it is, anything else through encoding/json
// itself (its escapes, its HTML-safe forms, its replacement of invalid
// UTF-8).
func appendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s) // a string always encodes
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// decodeRequest decodes a request frame's payload into req, as
// json.Unmarshal would.
func decodeRequest(b []byte, req *request) error {
	*req = request{}
	if (&reqDecoder{b: b}).decode(req) {
		return nil
	}
	*req = request{}
	return json.Unmarshal(b, req)
}

// reqDecoder reads the JSON that appendRequest writes. Each method
// reports false on anything else, for encoding/json to decide.
type reqDecoder struct {
	b    []byte
	i    int
	seen uint32 // the keys read, one bit each
}

func (d *reqDecoder) decode(req *request) bool {
	if !d.byte('{') {
		return false
	}
	if d.byte('}') {
		return d.i == len(d.b)
	}
	for {
		key, ok := d.plainString()
		if !ok || !d.byte(':') || !d.field(key, req) {
			return false
		}
		if d.byte('}') {
			return d.i == len(d.b)
		}
		if !d.byte(',') {
			return false
		}
	}
}

// reqKeys are request's JSON keys, in its field order.
var reqKeys = [...]string{"op", "args", "env", "dir", "stdin", "timeout_ns", "pid", "signal", "port", "raw", "pass", "recursive", "rows", "cols", "term"}

func (d *reqDecoder) field(key []byte, req *request) bool {
	k := -1
	for i, name := range reqKeys {
		if string(key) == name {
			k = i
			break
		}
	}
	// An unknown key, or one seen before, is encoding/json's to decide (it
	// matches keys without regard to case, and merges repeats).
	if k < 0 || d.seen&(1<<k) != 0 {
		return false
	}
	d.seen |= 1 << k
	var ok bool
	switch key := reqKeys[k]; key {
	case "op", "dir", "term":
		var s string
		s, ok = d.string()
		switch key {
		case "op":
			req.Op = s
		case "dir":
			req.Dir = s
		default:
			req.Term = s
		}
	case "args":
		req.Args, ok = d.strings()
	case "env":
		req.Env, ok = d.strings()
	case "stdin":
		req.Stdin, ok = d.bool()
	case "raw":
		req.Raw, ok = d.bool()
	case "pass":
		req.Pass, ok = d.bool()
	case "recursive":
		req.Recursive, ok = d.bool()
	case "timeout_ns":
		req.Timeout, ok = d.int(64)
	case "pid", "signal", "port":
		var n int64
		n, ok = d.int(strconv.IntSize)
		switch key {
		case "pid":
			req.PID = int(n)
		case "signal":
			req.Signal = int(n)
		default:
			req.Port = int(n)
		}
	case "rows", "cols":
		var n uint64
		n, ok = d.uint16()
		if key == "rows" {
			req.Rows = uint16(n)
		} else {
			req.Cols = uint16(n)
		}
	}
	return ok
}

// byte consumes c if it comes next.
func (d *reqDecoder) byte(c byte) bool {
	if d.i < len(d.b) && d.b[d.i] == c {
		d.i++
		return true
	}
	return false
}

// plainString reads a string with no escape and no byte outside
// printable ASCII or valid UTF-8 (a key), and returns its contents (not
// copied).
func (d *reqDecoder) plainString() ([]byte, bool) {
	s, ok := d.stringBytes()
	if !ok || bytes.IndexByte(s, '\\') >= 0 {
		return nil, false
	}
	d.i += len(s) + 1
	return s, true
}

// stringBytes returns the contents of the string that comes next, up to
// its closing quote, as they are (escapes included), without consuming
// them; false on a control byte or invalid UTF-8 (encoding/json replaces
// invalid bytes).
func (d *reqDecoder) stringBytes() ([]byte, bool) {
	if !d.byte('"') {
		return nil, false
	}
	ascii := true
	for j := d.i; j < len(d.b); j++ {
		switch c := d.b[j]; {
		case c == '"':
			s := d.b[d.i:j]
			return s, ascii || utf8.Valid(s)
		case c == '\\':
			j++ // the escaped byte cannot end the string
		case c < 0x20:
			return nil, false
		case c >= utf8.RuneSelf:
			ascii = false
		}
	}
	return nil, false
}

// string reads a string, its escapes decoded as encoding/json decodes
// them; a \u escape of a surrogate is left to encoding/json.
func (d *reqDecoder) string() (string, bool) {
	s, ok := d.stringBytes()
	if !ok {
		return "", false
	}
	d.i += len(s) + 1
	k := bytes.IndexByte(s, '\\')
	if k < 0 {
		return string(s), true
	}
	out := make([]byte, 0, len(s))
	for k >= 0 {
		out = append(out, s[:k]...)
		if k+1 >= len(s) {
			return "", false
		}
		n := 2
		switch c := s[k+1]; c {
		case '"', '\\', '/':
			out = append(out, c)
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			if k+6 > len(s) {
				return "", false
			}
			r, err := strconv.ParseUint(string(s[k+2:k+6]), 16, 16)
			if err != nil || utf16.IsSurrogate(rune(r)) {
				return "", false
			}
			out = utf8.AppendRune(out, rune(r))
			n = 6
		default:
			return "", false
		}
		s = s[k+n:]
		k = bytes.IndexByte(s, '\\')
	}
	return string(append(out, s...)), true
}

func (d *reqDecoder) strings() ([]string, bool) {
	if !d.byte('[') {
		return nil, false // null among others
	}
	out := []string{} // encoding/json makes [] an empty slice, not nil
	if d.byte(']') {
		return out, true
	}
	for {
		s, ok := d.string()
		if !ok {
			return nil, false
		}
		out = append(out, s)
		if d.byte(']') {
			return out, true
		}
		if !d.byte(',') {
			return nil, false
		}
	}
}

func (d *reqDecoder) bool() (bool, bool) {
	switch {
	case bytes.HasPrefix(d.b[d.i:], []byte("true")):
		d.i += 4
		return true, true
	case bytes.HasPrefix(d.b[d.i:], []byte("false")):
		d.i += 5
		return false, true
	}
	return false, false
}

// number reads an integer as JSON writes one: an optional minus, then 0
// or digits with no leading zero. A fraction or exponent is not read.
func (d *reqDecoder) number() ([]byte, bool) {
	start := d.i
	d.byte('-')
	digits := d.i
	for d.i < len(d.b) && d.b[d.i] >= '0' && d.b[d.i] <= '9' {
		d.i++
	}
	n := d.i - digits
	if n == 0 || (n > 1 && d.b[digits] == '0') {
		return nil, false
	}
	if d.i < len(d.b) && (d.b[d.i] == '.' || d.b[d.i] == 'e' || d.b[d.i] == 'E') {
		return nil, false
	}
	return d.b[start:d.i], true
}

func (d *reqDecoder) int(bits int) (int64, bool) {
	s, ok := d.number()
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(string(s), 10, bits)
	return n, err == nil
}

func (d *reqDecoder) uint16() (uint64, bool) {
	s, ok := d.number()
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseUint(string(s), 10, 16)
	return n, err == nil
}

// The exit frame ends every command's stream. appendExit writes the bytes
// json.Marshal(ex) does; decodeExit reads those directly and hands
// anything else to encoding/json.

// appendExit appends the JSON encoding of ex to b.
func appendExit(b []byte, ex *exitMsg) []byte {
	b = strconv.AppendInt(append(b, `{"code":`...), int64(ex.Code), 10)
	b = appendTrue(b, `,"timed_out":true`, ex.TimedOut)
	b = appendInt(b, `,"signal":`, int64(ex.Signal))
	return append(b, '}')
}

// decodeExit decodes an exit frame's payload into ex, as json.Unmarshal
// would.
func decodeExit(b []byte, ex *exitMsg) error {
	*ex = exitMsg{}
	if (&reqDecoder{b: b}).exit(ex) {
		return nil
	}
	*ex = exitMsg{}
	return json.Unmarshal(b, ex)
}

// exit reads {"code":N[,"timed_out":B][,"signal":N]}.
func (d *reqDecoder) exit(ex *exitMsg) bool {
	if !d.byte('{') || !d.key("code") {
		return false
	}
	n, ok := d.int(strconv.IntSize)
	if !ok {
		return false
	}
	ex.Code = int(n)
	if d.byte(',') {
		more := true
		if d.key("timed_out") {
			if ex.TimedOut, ok = d.bool(); !ok {
				return false
			}
			more = d.byte(',')
		}
		if more {
			if !d.key("signal") {
				return false
			}
			if n, ok = d.int(strconv.IntSize); !ok {
				return false
			}
			ex.Signal = int(n)
		}
	}
	return d.byte('}') && d.i == len(d.b)
}

// key consumes "name": if it comes next.
func (d *reqDecoder) key(name string) bool {
	n := len(name) + 3
	if d.i+n <= len(d.b) && d.b[d.i] == '"' && string(d.b[d.i+1:d.i+n-2]) == name && d.b[d.i+n-2] == '"' && d.b[d.i+n-1] == ':' {
		d.i += n
		return true
	}
	return false
}
