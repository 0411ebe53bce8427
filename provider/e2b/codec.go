package e2b

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"math"
	"strconv"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/sandboxkit/sandbox/provider/e2b/internal/envd/process"
)

// jsonCodec is Connect's "json" codec, as the official SDKs use it. The
// messages of every exec (the Start request and the process events) take
// a hand-written fast path, several times cheaper than protojson's
// reflection (and than encoding/json's); anything the fast path does not
// recognise exactly (an escape in a string, a number in quotes, an
// unknown field, null) falls back to protojson, so what is accepted and
// what is sent are unchanged. FuzzEventFastPath holds the two to the same
// answers.
type jsonCodec struct{}

func (jsonCodec) Name() string { return "json" }

func (jsonCodec) Marshal(m any) ([]byte, error) {
	if sr, ok := m.(*process.StartRequest); ok {
		if b, ok := marshalStart(sr); ok {
			return b, nil
		}
	}
	pm, ok := m.(proto.Message)
	if !ok {
		return nil, fmt.Errorf("e2b: cannot marshal %T", m)
	}
	return protojson.Marshal(pm)
}

func (jsonCodec) Unmarshal(b []byte, m any) error {
	switch v := m.(type) {
	case *process.StartResponse:
		if ev, ok := unmarshalEvent(b); ok {
			v.Event = ev
			return nil
		}
	case *process.ConnectResponse:
		if ev, ok := unmarshalEvent(b); ok {
			v.Event = ev
			return nil
		}
	}
	pm, ok := m.(proto.Message)
	if !ok {
		return fmt.Errorf("e2b: cannot unmarshal into %T", m)
	}
	return protojson.UnmarshalOptions{DiscardUnknown: true}.Unmarshal(b, pm)
}

// marshalStart encodes a StartRequest without a PTY whose strings are all
// valid UTF-8 (protojson refuses invalid UTF-8, so such requests take the
// slow path and fail there).
func marshalStart(sr *process.StartRequest) ([]byte, bool) {
	p := sr.GetProcess()
	if sr.Pty != nil || p == nil {
		return nil, false
	}
	b := make([]byte, 0, 128)
	b = append(b, `{"process":{"cmd":`...)
	b, ok := appendString(b, p.GetCmd())
	if args := p.GetArgs(); len(args) > 0 {
		b = append(b, `,"args":[`...)
		for i, a := range args {
			if i > 0 {
				b = append(b, ',')
			}
			b, ok = appendStringOK(b, a, ok)
		}
		b = append(b, ']')
	}
	if envs := p.GetEnvs(); len(envs) > 0 {
		b = append(b, `,"envs":{`...)
		first := true
		for k, v := range envs {
			if !first {
				b = append(b, ',')
			}
			first = false
			b, ok = appendStringOK(b, k, ok)
			b = append(b, ':')
			b, ok = appendStringOK(b, v, ok)
		}
		b = append(b, '}')
	}
	if p.Cwd != nil {
		b = append(b, `,"cwd":`...)
		b, ok = appendStringOK(b, *p.Cwd, ok)
	}
	b = append(b, '}')
	if sr.Tag != nil {
		b = append(b, `,"tag":`...)
		b, ok = appendStringOK(b, *sr.Tag, ok)
	}
	if sr.Stdin != nil {
		b = append(b, `,"stdin":`...)
		b = strconv.AppendBool(b, *sr.Stdin)
	}
	return append(b, '}'), ok
}

func appendStringOK(b []byte, s string, ok bool) ([]byte, bool) {
	b, ok2 := appendString(b, s)
	return b, ok && ok2
}

// appendString appends s as a JSON string; false when s is not valid
// UTF-8.
func appendString(b []byte, s string) ([]byte, bool) {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c < 0x20:
			b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		default:
			b = append(b, c)
		}
	}
	return append(b, '"'), utf8.ValidString(s)
}

// unmarshalEvent decodes {"event": {...}} holding exactly one member of
// the event oneof, written plainly; anything else is left to protojson.
func unmarshalEvent(b []byte) (*process.ProcessEvent, bool) {
	sc := scanner{b: b}
	var ev *process.ProcessEvent
	ok := sc.object(func(key string) bool {
		if key != "event" || ev != nil {
			return false
		}
		ev = &process.ProcessEvent{}
		return sc.object(func(key string) bool {
			if ev.Event != nil {
				return false // a second member of the oneof
			}
			switch key {
			case "start":
				st := &process.ProcessEvent_StartEvent{}
				ev.Event = &process.ProcessEvent_Start{Start: st}
				seen := false
				return sc.object(func(key string) bool {
					if key != "pid" || seen {
						return false
					}
					seen = true
					n, ok := sc.int(0, math.MaxUint32)
					st.Pid = uint32(n)
					return ok
				})
			case "data":
				d := &process.ProcessEvent_DataEvent{}
				ev.Event = &process.ProcessEvent_Data{Data: d}
				return sc.object(func(key string) bool {
					if d.Output != nil {
						return false
					}
					out, ok := sc.bytes()
					switch key {
					case "stdout":
						d.Output = &process.ProcessEvent_DataEvent_Stdout{Stdout: out}
					case "stderr":
						d.Output = &process.ProcessEvent_DataEvent_Stderr{Stderr: out}
					case "pty":
						d.Output = &process.ProcessEvent_DataEvent_Pty{Pty: out}
					default:
						return false
					}
					return ok
				}) && d.Output != nil
			case "end":
				end := &process.ProcessEvent_EndEvent{}
				ev.Event = &process.ProcessEvent_End{End: end}
				var seen [4]bool
				return sc.object(func(key string) bool {
					f, known := endFields[key]
					if !known || seen[f] {
						return false
					}
					seen[f] = true
					switch key {
					case "exitCode", "exit_code":
						n, ok := sc.int(math.MinInt32, math.MaxInt32)
						end.ExitCode = int32(n)
						return ok
					case "exited":
						v, ok := sc.bool()
						end.Exited = v
						return ok
					case "status":
						v, ok := sc.string()
						end.Status = v
						return ok
					case "error":
						v, ok := sc.string()
						end.Error = &v
						return ok
					}
					return false
				})
			case "keepalive":
				ev.Event = &process.ProcessEvent_Keepalive{Keepalive: &process.ProcessEvent_KeepAlive{}}
				return sc.object(func(string) bool { return false })
			}
			return false
		}) && ev.Event != nil
	})
	if !ok || ev == nil || !sc.end() {
		return nil, false
	}
	return ev, true
}

// endFields numbers the end event's fields, by JSON and proto name, so
// that a field given twice (under either name) is refused as protojson
// refuses it.
var endFields = map[string]int{"exitCode": 0, "exit_code": 0, "exited": 1, "status": 2, "error": 3}

// scanner reads the plain subset of JSON the fast path accepts: objects,
// strings without escapes, integers without sign tricks or exponents,
// booleans. Each method reports false on anything else.
type scanner struct {
	b []byte
	i int
}

func (s *scanner) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

func (s *scanner) peek() byte {
	s.ws()
	if s.i < len(s.b) {
		return s.b[s.i]
	}
	return 0
}

func (s *scanner) end() bool { return s.peek() == 0 && s.i == len(s.b) }

// object reads {"key": value, ...}, calling member to read each value.
func (s *scanner) object(member func(key string) bool) bool {
	if s.peek() != '{' {
		return false
	}
	s.i++
	if s.peek() == '}' {
		s.i++
		return true
	}
	for {
		key, ok := s.string()
		if !ok || s.peek() != ':' {
			return false
		}
		s.i++
		if !member(key) {
			return false
		}
		switch s.peek() {
		case ',':
			s.i++
		case '}':
			s.i++
			return true
		default:
			return false
		}
	}
}

// string reads a string without escapes, in valid UTF-8.
func (s *scanner) string() (string, bool) {
	if s.peek() != '"' {
		return "", false
	}
	start := s.i + 1
	for j := start; j < len(s.b); j++ {
		switch c := s.b[j]; {
		case c == '"':
			v := s.b[start:j]
			s.i = j + 1
			return string(v), utf8.Valid(v)
		case c == '\\' || c < 0x20:
			return "", false
		}
	}
	return "", false
}

// bytes reads a base64 string (standard alphabet, padded).
func (s *scanner) bytes() ([]byte, bool) {
	if s.peek() != '"' {
		return nil, false
	}
	start := s.i + 1
	j := bytes.IndexByte(s.b[start:], '"')
	if j < 0 {
		return nil, false
	}
	enc := s.b[start : start+j]
	for _, c := range enc {
		// Go's decoder skips CR and LF, which protojson refuses.
		if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '+' || c == '/' || c == '=') {
			return nil, false
		}
	}
	out := make([]byte, base64.StdEncoding.DecodedLen(len(enc)))
	n, err := base64.StdEncoding.Strict().Decode(out, enc)
	if err != nil {
		return nil, false
	}
	s.i = start + j + 1
	return out[:n], true
}

// int reads an integer in [lo, hi]: an optional minus sign and digits,
// without leading zeros.
func (s *scanner) int(lo, hi int64) (int64, bool) {
	s.ws()
	j := s.i
	neg := j < len(s.b) && s.b[j] == '-'
	if neg {
		j++
	}
	start := j
	var n int64
	for j < len(s.b) && s.b[j] >= '0' && s.b[j] <= '9' && j-start < 11 {
		n = n*10 + int64(s.b[j]-'0')
		j++
	}
	if j == start || (s.b[start] == '0' && j-start > 1) || j-start > 10 {
		return 0, false
	}
	if j < len(s.b) {
		if c := s.b[j]; c == '.' || c == 'e' || c == 'E' || (c >= '0' && c <= '9') {
			return 0, false
		}
	}
	if neg {
		n = -n
	}
	if n < lo || n > hi {
		return 0, false
	}
	s.i = j
	return n, true
}

// bool reads true or false.
func (s *scanner) bool() (bool, bool) {
	s.ws()
	switch {
	case bytes.HasPrefix(s.b[s.i:], []byte("true")):
		s.i += 4
		return true, true
	case bytes.HasPrefix(s.b[s.i:], []byte("false")):
		s.i += 5
		return false, true
	}
	return false, false
}
