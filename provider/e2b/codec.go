package e2b

import (
	"fmt"
	"math"
	"strconv"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/sandboxkit/sandbox/internal/jsonscan"
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
	sc := jsonscan.New(b)
	var ev *process.ProcessEvent
	ok := sc.Object(func(key string) bool {
		if key != "event" || ev != nil {
			return false
		}
		ev = &process.ProcessEvent{}
		return sc.Object(func(key string) bool {
			if ev.Event != nil {
				return false // a second member of the oneof
			}
			switch key {
			case "start":
				st := &process.ProcessEvent_StartEvent{}
				ev.Event = &process.ProcessEvent_Start{Start: st}
				seen := false
				return sc.Object(func(key string) bool {
					if key != "pid" || seen {
						return false
					}
					seen = true
					n, ok := sc.Int(0, math.MaxUint32)
					st.Pid = uint32(n)
					return ok
				})
			case "data":
				d := &process.ProcessEvent_DataEvent{}
				ev.Event = &process.ProcessEvent_Data{Data: d}
				return sc.Object(func(key string) bool {
					if d.Output != nil {
						return false
					}
					out, ok := sc.Bytes()
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
				return sc.Object(func(key string) bool {
					f, known := endFields[key]
					if !known || seen[f] {
						return false
					}
					seen[f] = true
					switch key {
					case "exitCode", "exit_code":
						n, ok := sc.Int(math.MinInt32, math.MaxInt32)
						end.ExitCode = int32(n)
						return ok
					case "exited":
						v, ok := sc.Bool()
						end.Exited = v
						return ok
					case "status":
						v, ok := sc.String()
						end.Status = v
						return ok
					case "error":
						v, ok := sc.String()
						end.Error = &v
						return ok
					}
					return false
				})
			case "keepalive":
				ev.Event = &process.ProcessEvent_Keepalive{Keepalive: &process.ProcessEvent_KeepAlive{}}
				return sc.Object(func(string) bool { return false })
			}
			return false
		}) && ev.Event != nil
	})
	if !ok || ev == nil || !sc.End() {
		return nil, false
	}
	return ev, true
}

// endFields numbers the end event's fields, by JSON and proto name, so
// that a field given twice (under either name) is refused as protojson
// refuses it.
var endFields = map[string]int{"exitCode": 0, "exit_code": 0, "exited": 1, "status": 2, "error": 3}
