package e2b

import (
	"encoding/json"
	"fmt"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/sandboxkit/sandbox/provider/e2b/internal/envd/process"
)

// jsonCodec is Connect's "json" codec, as the official SDKs use it. The
// messages of every exec (the Start request and the process events) take
// a fast path through encoding/json, which is several times cheaper than
// protojson's reflection; anything the fast path does not recognise
// exactly falls back to protojson, so the wire format is unchanged.
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

type startJSON struct {
	Process struct {
		Cmd  string            `json:"cmd"`
		Args []string          `json:"args,omitempty"`
		Envs map[string]string `json:"envs,omitempty"`
		Cwd  *string           `json:"cwd,omitempty"`
	} `json:"process"`
	Tag   *string `json:"tag,omitempty"`
	Stdin *bool   `json:"stdin,omitempty"`
}

// marshalStart encodes a StartRequest without a PTY whose strings are all
// valid UTF-8 (protojson rejects invalid UTF-8; encoding/json would
// silently replace it, so such requests take the slow path).
func marshalStart(sr *process.StartRequest) ([]byte, bool) {
	p := sr.GetProcess()
	if sr.Pty != nil || p == nil {
		return nil, false
	}
	valid := utf8.ValidString(p.GetCmd()) && utf8.ValidString(p.GetCwd()) && utf8.ValidString(sr.GetTag())
	for _, a := range p.GetArgs() {
		valid = valid && utf8.ValidString(a)
	}
	for k, v := range p.GetEnvs() {
		valid = valid && utf8.ValidString(k) && utf8.ValidString(v)
	}
	if !valid {
		return nil, false
	}
	var j startJSON
	j.Process.Cmd, j.Process.Args, j.Process.Envs, j.Process.Cwd = p.GetCmd(), p.GetArgs(), p.GetEnvs(), p.Cwd
	j.Tag, j.Stdin = sr.Tag, sr.Stdin
	b, err := json.Marshal(&j)
	return b, err == nil
}

type eventJSON struct {
	Event *struct {
		Start *struct {
			Pid uint32 `json:"pid"`
		} `json:"start"`
		Data *struct {
			Stdout []byte `json:"stdout"`
			Stderr []byte `json:"stderr"`
			Pty    []byte `json:"pty"`
		} `json:"data"`
		End *struct {
			ExitCode  int32   `json:"exitCode"`
			ExitCode2 int32   `json:"exit_code"`
			Exited    bool    `json:"exited"`
			Status    string  `json:"status"`
			Error     *string `json:"error"`
		} `json:"end"`
		Keepalive *struct{} `json:"keepalive"`
	} `json:"event"`
}

// unmarshalEvent decodes a process event holding exactly one member of
// its oneof; anything else is left to protojson.
func unmarshalEvent(b []byte) (*process.ProcessEvent, bool) {
	var j eventJSON
	if json.Unmarshal(b, &j) != nil || j.Event == nil {
		return nil, false
	}
	e := j.Event
	set := 0
	ev := &process.ProcessEvent{}
	if e.Start != nil {
		set++
		ev.Event = &process.ProcessEvent_Start{Start: &process.ProcessEvent_StartEvent{Pid: e.Start.Pid}}
	}
	if e.Data != nil {
		set++
		d := &process.ProcessEvent_DataEvent{}
		switch {
		case e.Data.Stdout != nil && e.Data.Stderr == nil && e.Data.Pty == nil:
			d.Output = &process.ProcessEvent_DataEvent_Stdout{Stdout: e.Data.Stdout}
		case e.Data.Stderr != nil && e.Data.Stdout == nil && e.Data.Pty == nil:
			d.Output = &process.ProcessEvent_DataEvent_Stderr{Stderr: e.Data.Stderr}
		case e.Data.Pty != nil && e.Data.Stdout == nil && e.Data.Stderr == nil:
			d.Output = &process.ProcessEvent_DataEvent_Pty{Pty: e.Data.Pty}
		default:
			return nil, false
		}
		ev.Event = &process.ProcessEvent_Data{Data: d}
	}
	if e.End != nil {
		set++
		code := e.End.ExitCode
		if code == 0 {
			code = e.End.ExitCode2
		}
		ev.Event = &process.ProcessEvent_End{End: &process.ProcessEvent_EndEvent{
			ExitCode: code, Exited: e.End.Exited, Status: e.End.Status, Error: e.End.Error}}
	}
	if e.Keepalive != nil {
		set++
		ev.Event = &process.ProcessEvent_Keepalive{Keepalive: &process.ProcessEvent_KeepAlive{}}
	}
	return ev, set == 1
}
