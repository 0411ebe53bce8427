package e2b

import (
	"testing"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/sandboxkit/sandbox/provider/e2b/internal/envd/process"
)

// TestCodecMatchesProtoJSON checks that the fast path decodes and encodes
// exactly what protojson does, and leaves what it does not know to it.
func TestCodecMatchesProtoJSON(t *testing.T) {
	t.Parallel()
	msg := "exit status 3"
	events := []*process.ProcessEvent{
		{Event: &process.ProcessEvent_Start{Start: &process.ProcessEvent_StartEvent{Pid: 412}}},
		{Event: &process.ProcessEvent_Data{Data: &process.ProcessEvent_DataEvent{Output: &process.ProcessEvent_DataEvent_Stdout{Stdout: []byte{0, 1, 0xff, '\n'}}}}},
		{Event: &process.ProcessEvent_Data{Data: &process.ProcessEvent_DataEvent{Output: &process.ProcessEvent_DataEvent_Stderr{Stderr: []byte("err")}}}},
		{Event: &process.ProcessEvent_End{End: &process.ProcessEvent_EndEvent{ExitCode: 3, Exited: true, Status: msg, Error: &msg}}},
		{Event: &process.ProcessEvent_End{End: &process.ProcessEvent_EndEvent{Exited: true, Status: "exit status 0"}}},
		{Event: &process.ProcessEvent_End{End: &process.ProcessEvent_EndEvent{ExitCode: -1, Status: "signal: killed"}}},
		{Event: &process.ProcessEvent_Keepalive{Keepalive: &process.ProcessEvent_KeepAlive{}}},
	}
	for _, ev := range events {
		for _, opts := range []protojson.MarshalOptions{{}, {UseProtoNames: true}} {
			b, err := opts.Marshal(&process.StartResponse{Event: ev})
			if err != nil {
				t.Fatal(err)
			}
			var got process.StartResponse
			if err := (jsonCodec{}).Unmarshal(b, &got); err != nil {
				t.Fatalf("%s: %v", b, err)
			}
			if !proto.Equal(got.GetEvent(), ev) {
				t.Fatalf("%s decoded as %v", b, got.GetEvent())
			}
		}
	}
	// Input the fast path does not handle goes to protojson.
	var got process.ConnectResponse
	if err := (jsonCodec{}).Unmarshal([]byte(`{"event":{"start":{"pid":"7"}},"extra":1}`), &got); err != nil || got.GetEvent().GetStart().GetPid() != 7 {
		t.Fatalf("fallback: %v %v", err, &got)
	}
	cwd, yes, tag := "/w d", true, "sandboxkit-01"
	for _, req := range []*process.StartRequest{
		{Process: &process.ProcessConfig{Cmd: "echo", Args: []string{"a <b>&", "ü"}, Envs: map[string]string{"K": "v"}, Cwd: &cwd}, Stdin: &yes, Tag: &tag},
		{Process: &process.ProcessConfig{Cmd: "x", Args: []string{"\xff"}}},
		{Process: &process.ProcessConfig{Cmd: "x"}, Pty: &process.PTY{Size: &process.PTY_Size{Cols: 80, Rows: 24}}},
	} {
		b, err := (jsonCodec{}).Marshal(req)
		if req.GetProcess().GetArgs() != nil && req.GetProcess().GetArgs()[0] == "\xff" {
			if err == nil {
				t.Fatal("invalid UTF-8 must be refused as protojson does")
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		var back process.StartRequest
		if err := protojson.Unmarshal(b, &back); err != nil || !proto.Equal(&back, req) {
			t.Fatalf("%s: %v %v", b, err, &back)
		}
	}
}

// FuzzEventFastPath holds the hand-written fast paths to protojson: an
// event the fast path accepts decodes as protojson decodes it, and a Start
// request it encodes reads back, through protojson, as the same request.
func FuzzEventFastPath(f *testing.F) {
	for _, s := range []string{
		`{"event":{"start":{"pid":412}}}`,
		`{"event": {"data": {"stdout": "AAH/Cg=="}}}`,
		`{"event":{"end":{"exitCode":-3, "exited":true, "status":"exit status 3", "error":"x"}}}`,
		`{"event":{"end":{"exit_code":2}}}`,
		`{"event":{"keepalive":{}}}`,
		`{"event":{"start":{"pid":1,"pid":2}}}`,
		`{"event":{"end":{"exitCode":1,"exit_code":2}}}`,
		`{"event":{"start":{"pid":"7"}}}`,
		`{"event":{"data":{"stderr":"aGk"}}}`,
		`{"event":{"start":{"pid":4294967296}}}`,
		"{\"event\":{\"data\":{\"stdout\":\"aG\nk=\"}}}",
	} {
		f.Add([]byte(s), "echo", "a b", "/w", true)
	}
	f.Fuzz(func(t *testing.T, b []byte, cmd, arg, cwd string, stdin bool) {
		if ev, ok := unmarshalEvent(b); ok {
			var want process.StartResponse
			if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(b, &want); err != nil {
				t.Fatalf("fast path accepted %q, protojson refuses it: %v", b, err)
			}
			if !proto.Equal(ev, want.GetEvent()) {
				t.Fatalf("%q: fast path %v, protojson %v", b, ev, want.GetEvent())
			}
		}
		req := &process.StartRequest{Process: &process.ProcessConfig{Cmd: cmd, Args: []string{arg}, Envs: map[string]string{arg: cmd}, Cwd: &cwd}, Stdin: &stdin, Tag: &arg}
		enc, ok := marshalStart(req)
		_, perr := protojson.Marshal(req)
		if ok != (perr == nil) {
			t.Fatalf("fast path ok=%v, protojson error %v", ok, perr)
		}
		if !ok {
			return
		}
		var back process.StartRequest
		if err := protojson.Unmarshal(enc, &back); err != nil || !proto.Equal(&back, req) {
			t.Fatalf("%s read back as %v (%v)", enc, &back, err)
		}
	})
}
