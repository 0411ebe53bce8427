// Package jsonscan reads the plain JSON that hand-written encoders emit,
// for decoders on a hot path that leave everything else to a full
// decoder (encoding/json, protojson): objects, strings, integers without
// fractions or exponents, booleans, base64. Each method reports false on
// anything it does not read, and the caller then falls back.
package jsonscan

import (
	"bytes"
	"encoding/base64"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// Scanner reads b from offset 0.
type Scanner struct {
	b []byte
	i int
}

// New returns a Scanner over b.
func New(b []byte) *Scanner { return &Scanner{b: b} }

func (s *Scanner) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

func (s *Scanner) peek() byte {
	s.ws()
	if s.i < len(s.b) {
		return s.b[s.i]
	}
	return 0
}

// End reports whether only whitespace is left.
func (s *Scanner) End() bool { return s.peek() == 0 && s.i == len(s.b) }

// Object reads {"key": value, ...}, calling member to read each value.
// Keys are read as String reads them.
func (s *Scanner) Object(member func(key string) bool) bool {
	if s.peek() != '{' {
		return false
	}
	s.i++
	if s.peek() == '}' {
		s.i++
		return true
	}
	for {
		key, ok := s.String()
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

// Array reads [value, ...], calling elem to read each value.
func (s *Scanner) Array(elem func() bool) bool {
	if s.peek() != '[' {
		return false
	}
	s.i++
	if s.peek() == ']' {
		s.i++
		return true
	}
	for {
		if !elem() {
			return false
		}
		switch s.peek() {
		case ',':
			s.i++
		case ']':
			s.i++
			return true
		default:
			return false
		}
	}
}

// String reads a string without escapes, in valid UTF-8.
func (s *Scanner) String() (string, bool) {
	raw, ok := s.raw()
	if !ok || bytes.IndexByte(raw, '\\') >= 0 {
		return "", false
	}
	s.i += len(raw) + 2
	return string(raw), true
}

// raw returns the contents of the string that comes next, escapes as
// they are, without consuming it; false on a control byte or invalid
// UTF-8 (which the full decoders replace).
func (s *Scanner) raw() ([]byte, bool) {
	if s.peek() != '"' {
		return nil, false
	}
	start := s.i + 1
	ascii := true
	for j := start; j < len(s.b); j++ {
		switch c := s.b[j]; {
		case c == '"':
			v := s.b[start:j]
			return v, ascii || utf8.Valid(v)
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

// Text reads a string with its escapes decoded as encoding/json decodes
// them; a \u escape of a surrogate is refused.
func (s *Scanner) Text() (string, bool) {
	raw, ok := s.raw()
	if !ok {
		return "", false
	}
	s.i += len(raw) + 2
	k := bytes.IndexByte(raw, '\\')
	if k < 0 {
		return string(raw), true
	}
	out := make([]byte, 0, len(raw))
	for k >= 0 {
		out = append(out, raw[:k]...)
		if k+1 >= len(raw) {
			return "", false
		}
		n := 2
		switch c := raw[k+1]; c {
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
			if k+6 > len(raw) {
				return "", false
			}
			r, err := strconv.ParseUint(string(raw[k+2:k+6]), 16, 16)
			if err != nil || utf16.IsSurrogate(rune(r)) {
				return "", false
			}
			out = utf8.AppendRune(out, rune(r))
			n = 6
		default:
			return "", false
		}
		raw = raw[k+n:]
		k = bytes.IndexByte(raw, '\\')
	}
	return string(append(out, raw...)), true
}

// Bytes reads a base64 string (standard alphabet, padded).
func (s *Scanner) Bytes() ([]byte, bool) {
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

// Int reads an integer in [lo, hi]: an optional minus sign and digits,
// without leading zeros, fraction or exponent.
func (s *Scanner) Int(lo, hi int64) (int64, bool) {
	s.ws()
	j := s.i
	if j < len(s.b) && s.b[j] == '-' {
		j++
	}
	digits := j
	for j < len(s.b) && s.b[j] >= '0' && s.b[j] <= '9' {
		j++
	}
	if j == digits || (s.b[digits] == '0' && j-digits > 1) {
		return 0, false
	}
	if j < len(s.b) {
		if c := s.b[j]; c == '.' || c == 'e' || c == 'E' {
			return 0, false
		}
	}
	n, err := strconv.ParseInt(string(s.b[s.i:j]), 10, 64)
	if err != nil || n < lo || n > hi {
		return 0, false
	}
	s.i = j
	return n, true
}

// Bool reads true or false.
func (s *Scanner) Bool() (bool, bool) {
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
