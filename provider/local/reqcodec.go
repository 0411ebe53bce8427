package local

import (
	"encoding/json"
	"math"
	"slices"
	"strconv"

	"github.com/sandboxkit/sandbox/internal/jsonscan"
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
	if directRequest(b, req) {
		return nil
	}
	*req = request{}
	return json.Unmarshal(b, req)
}

// reqKeys are request's JSON keys, in its field order.
var reqKeys = [...]string{"op", "args", "env", "dir", "stdin", "timeout_ns", "pid", "signal", "port", "raw", "pass", "recursive", "rows", "cols", "term"}

// directRequest reads the JSON appendRequest writes into req; false on
// anything else, for encoding/json to decide. An unknown key, or one
// seen before, is encoding/json's too (it matches keys without regard to
// case, and merges repeats).
func directRequest(b []byte, req *request) bool {
	sc := jsonscan.New(b)
	var seen uint32
	ok := sc.Object(func(key string) bool {
		if !firstKey(reqKeys[:], &seen, key) {
			return false
		}
		var ok bool
		var n int64
		switch key {
		case "op":
			req.Op, ok = sc.Text()
		case "dir":
			req.Dir, ok = sc.Text()
		case "term":
			req.Term, ok = sc.Text()
		case "args":
			req.Args, ok = texts(sc)
		case "env":
			req.Env, ok = texts(sc)
		case "stdin":
			req.Stdin, ok = sc.Bool()
		case "raw":
			req.Raw, ok = sc.Bool()
		case "pass":
			req.Pass, ok = sc.Bool()
		case "recursive":
			req.Recursive, ok = sc.Bool()
		case "timeout_ns":
			req.Timeout, ok = sc.Int(math.MinInt64, math.MaxInt64)
		case "pid":
			n, ok = sc.Int(math.MinInt, math.MaxInt)
			req.PID = int(n)
		case "signal":
			n, ok = sc.Int(math.MinInt, math.MaxInt)
			req.Signal = int(n)
		case "port":
			n, ok = sc.Int(math.MinInt, math.MaxInt)
			req.Port = int(n)
		case "rows":
			n, ok = sc.Int(0, math.MaxUint16)
			req.Rows = uint16(n)
		case "cols":
			n, ok = sc.Int(0, math.MaxUint16)
			req.Cols = uint16(n)
		}
		return ok
	})
	return ok && sc.End()
}

// firstKey reports whether key is one of keys not seen before, and marks
// it seen (a bit of seen each).
func firstKey(keys []string, seen *uint32, key string) bool {
	k := slices.Index(keys, key)
	if k < 0 || *seen&(1<<k) != 0 {
		return false
	}
	*seen |= 1 << k
	return true
}

// texts reads an array of strings; [] is an empty slice, not nil, as
// encoding/json makes it, and null is left to encoding/json.
func texts(sc *jsonscan.Scanner) ([]string, bool) {
	out := []string{}
	ok := sc.Array(func() bool {
		s, ok := sc.Text()
		out = append(out, s)
		return ok
	})
	return out, ok
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
	if directExit(b, ex) {
		return nil
	}
	*ex = exitMsg{}
	return json.Unmarshal(b, ex)
}

// exitKeys are exitMsg's JSON keys.
var exitKeys = [...]string{"code", "timed_out", "signal"}

// directExit reads {"code":N,"timed_out":B,"signal":N}, each key at most
// once, into ex; false on anything else.
func directExit(b []byte, ex *exitMsg) bool {
	sc := jsonscan.New(b)
	var seen uint32
	ok := sc.Object(func(key string) bool {
		if !firstKey(exitKeys[:], &seen, key) {
			return false
		}
		var n int64
		var ok bool
		switch key {
		case "code":
			n, ok = sc.Int(math.MinInt, math.MaxInt)
			ex.Code = int(n)
		case "signal":
			n, ok = sc.Int(math.MinInt, math.MaxInt)
			ex.Signal = int(n)
		case "timed_out":
			ex.TimedOut, ok = sc.Bool()
		}
		return ok
	})
	return ok && sc.End()
}
