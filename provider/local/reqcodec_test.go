package local

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"testing"
)

// reqStrings are strings a request may carry that encoding/json escapes
// or rewrites, beside plain ones.
var reqStrings = []string{
	"", "exec", "/bin/true", "PATH=/usr/bin:/bin", "a b\tc", `quote"d`, `back\slash`,
	"<html>&amp;", "line\nfeed\r", "\x00\x01\x1f", "\x7f", "é ü 日本", "\u2028\u2029",
	"bad\xffutf8", "\xc3", "emoji 😀", "key=val=ue", "ctrl\b\f",
}

func randomRequest(r *rand.Rand) *request {
	str := func() string {
		if r.IntN(3) == 0 {
			return reqStrings[r.IntN(len(reqStrings))]
		}
		b := make([]byte, r.IntN(12))
		for i := range b {
			b[i] = byte(r.IntN(256))
			if r.IntN(4) > 0 {
				b[i] = byte(0x20 + r.IntN(0x5f))
			}
		}
		return string(b)
	}
	strs := func() []string {
		switch r.IntN(4) {
		case 0:
			return nil
		case 1:
			return []string{}
		}
		ss := make([]string, 1+r.IntN(5))
		for i := range ss {
			ss[i] = str()
		}
		return ss
	}
	num := func() int64 {
		switch r.IntN(4) {
		case 0:
			return 0
		case 1:
			return -r.Int64()
		}
		return r.Int64N(1 << (1 + r.IntN(62)))
	}
	pick := func() bool { return r.IntN(2) == 0 }
	return &request{
		Op: str(), Args: strs(), Env: strs(), Dir: str(), Stdin: pick(), Timeout: num(),
		PID: int(num()), Signal: int(num()), Port: int(num()), Raw: pick(), Pass: pick(),
		Recursive: pick(), Rows: uint16(r.UintN(1 << 16)), Cols: uint16(r.UintN(1 << 16)), Term: str(),
	}
}

// TestRequestCodecIsEncodingJSON checks that the request frames a client
// writes are the bytes encoding/json writes (agents of other versions
// read them), and that the agent reads any of them as encoding/json does.
func TestRequestCodecIsEncodingJSON(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 5000 {
		req := randomRequest(r)
		want, err := json.Marshal(req)
		if err != nil {
			t.Fatal(err)
		}
		got := appendRequest(nil, req)
		if !bytes.Equal(got, want) {
			t.Fatalf("request %d: appendRequest wrote\n%s\nencoding/json writes\n%s", i, got, want)
		}
		checkDecode(t, want)
	}
}

// TestRequestDecodeTakesDirectPath checks that an exec request as a
// client sends it is read without encoding/json: the point of the codec.
func TestRequestDecodeTakesDirectPath(t *testing.T) {
	req := &request{Op: "exec", Args: []string{"/bin/sh", "-c", "echo hi > /tmp/x && ls"},
		Env: []string{"HOME=/home/user", "LANG=C.UTF-8", "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "GREETING=héllo wörld"},
		Dir: "/home/user/work", Stdin: true, Timeout: 30e9}
	b := appendRequest(nil, req)
	var got request
	if !directRequest(b, &got) {
		t.Fatalf("the direct path refused %s", b)
	}
	if !reflect.DeepEqual(&got, req) {
		t.Fatalf("decoded %+v, want %+v", got, *req)
	}
}

// checkDecode fails t unless decodeRequest reads b as json.Unmarshal
// does: the same error or none, and the same request.
func checkDecode(t *testing.T, b []byte) {
	t.Helper()
	var want, got request
	werr := json.Unmarshal(b, &want)
	gerr := decodeRequest(b, &got)
	if (werr == nil) != (gerr == nil) {
		t.Fatalf("%q: decodeRequest error %v, encoding/json error %v", b, gerr, werr)
	}
	if werr == nil && !reflect.DeepEqual(got, want) {
		t.Fatalf("%q: decodeRequest read %+v, encoding/json %+v", b, got, want)
	}
}

// FuzzDecodeRequest checks decodeRequest against encoding/json on any
// payload a client may send: the agent must read every request as
// encoding/json reads it.
func FuzzDecodeRequest(f *testing.F) {
	for _, s := range []string{
		`{"op":"exec","args":["/bin/true"],"env":["A=1"],"dir":"/d","stdin":true,"timeout_ns":5}`,
		`{}`, `{"op":"a","op":"b"}`, `{"OP":"exec"}`, `{"args":null}`, `{"args":[]}`, `{"pid":1.0}`,
		`{"pid":01}`, `{"pid":-0}`, `{"rows":70000}`, `{"rows":-1}`, `{"cols":65535}`, ` {"op":"x"}`,
		`{"op":"x"} `, `{"op":"x"}x`, `{"op":"\u00e9"}`, "{\"op\":\"\xff\"}", `{"op":"a\"b"}`,
		`{"stdin":truex}`, `{"stdin":false}`, `{"timeout_ns":9223372036854775808}`, `{"port":1e3}`,
		`{"term":"t","raw":true,"pass":true,"recursive":true}`, `{"unknown":1}`, `{"op":}`, `{"op"`, `[]`, `null`,
		"{\"op\":\"tab\there\"}", `{"env":["a",1]}`, `{"signal":-9}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		checkDecode(t, b)
	})
}

// TestExitCodecIsEncodingJSON checks the exit frame both ways against
// encoding/json, and that the frames an agent sends take the direct path.
func TestExitCodecIsEncodingJSON(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	cases := []exitMsg{{}, {Code: 1}, {Code: -1, Signal: 9}, {Code: -1, TimedOut: true}, {Code: 255}, {Code: -1, TimedOut: true, Signal: 15}}
	for range 2000 {
		cases = append(cases, exitMsg{Code: int(r.Int64()) >> r.IntN(64), TimedOut: r.IntN(2) == 0, Signal: r.IntN(3) * r.IntN(65)})
	}
	for _, ex := range cases {
		want, _ := json.Marshal(ex)
		got := appendExit(nil, &ex)
		if !bytes.Equal(got, want) {
			t.Fatalf("appendExit wrote %s, encoding/json writes %s", got, want)
		}
		var back exitMsg
		if !directExit(got, &back) || back != ex {
			t.Fatalf("%s: the direct path read %+v (want %+v)", got, back, ex)
		}
		checkExitDecode(t, got)
	}
}

func checkExitDecode(t *testing.T, b []byte) {
	t.Helper()
	var want, got exitMsg
	werr := json.Unmarshal(b, &want)
	gerr := decodeExit(b, &got)
	if (werr == nil) != (gerr == nil) || (werr == nil && got != want) {
		t.Fatalf("%q: decodeExit read %+v (error %v), encoding/json %+v (error %v)", b, got, gerr, want, werr)
	}
}

// FuzzDecodeExit checks decodeExit against encoding/json on any payload
// an agent (of any version) may send.
func FuzzDecodeExit(f *testing.F) {
	for _, s := range []string{
		`{"code":0}`, `{"code":-1,"signal":9}`, `{"code":-1,"timed_out":true}`, `{"code":-1,"timed_out":true,"signal":9}`,
		`{"code":1,"timed_out":false}`, `{"code":1,}`, `{"code":1,"timed_out":true,}`, `{"signal":9,"code":1}`,
		`{"code":01}`, `{"code":1.5}`, `{"Code":2}`, `{"code":1} `, `{"code":1,"extra":2}`, `{}`, `{"code":99999999999999999999}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		checkExitDecode(t, b)
	})
}
