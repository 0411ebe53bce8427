package sandbox

import (
	"bytes"
	"strings"
	"testing"
)

// A terminal's redactor finds a secret that a program split with colour
// codes (grep --color highlighting a match inside it), in one write or
// across writes cut anywhere, replaces the whole span and keeps the
// colour codes so the terminal's state is as the program left it.
func TestTerminalRedactorSkipsEscapes(t *testing.T) {
	t.Parallel()
	const secret = "tok-9f8e7d6c5b4a-SECRET"
	cases := []struct{ in, want string }{
		{"TOK=tok-\x1b[01;31m\x1b[K9f8e7d\x1b[m\x1b[K6c5b4a-SECRET\r\n", "TOK=[REDACTED]\x1b[01;31m\x1b[K\x1b[m\x1b[K\r\n"},
		{"a tok-9f8e7d6c5b4a-SECRET b", "a [REDACTED] b"},
		{"t\x1b]0;x\x07ok-9f8e7d6c5b4a-SECRET.", "[REDACTED]."},
		{"tok-9f8e\x1b[1mX", "tok-9f8e\x1b[1mX"},
		{"\x1b[31mtok-9f8e7d6c5b4a-SECRET\x1b[m", "\x1b[31m[REDACTED]\x1b[m"},
	}
	for _, c := range cases {
		for cut := 0; cut <= len(c.in); cut++ {
			var out bytes.Buffer
			r := newTermRedactor(&out, [][]byte{[]byte(secret)})
			_, _ = r.Write([]byte(c.in[:cut]))
			_, _ = r.Write([]byte(c.in[cut:]))
			flushWriter(r)
			if out.String() != c.want {
				t.Fatalf("%q cut at %d: got %q, want %q", c.in, cut, out.String(), c.want)
			}
			if strings.Contains(out.String(), secret) {
				t.Fatalf("%q cut at %d: the secret in clear", c.in, cut)
			}
		}
	}
}

// A terminal writes a newline as CR LF: a secret of several lines (a
// private key) is found with a CR before each of its LFs, in one write or
// cut anywhere; and two secrets that overlap in a terminal's text are
// replaced as one span, as in a command's output.
func TestTerminalRedactorMultiLineAndOverlap(t *testing.T) {
	t.Parallel()
	const key = "-----BEGIN KEY-----\nb3BlbnNzaC1rZXktdjE\n-----END KEY-----"
	const user, pass = "deploy-X", "X9f2c71d0b8e4a6_db"
	cases := []struct{ in, want string }{
		{"-----BEGIN KEY-----\r\nb3BlbnNzaC1rZXktdjE\r\n-----END KEY-----\r\n$ ", "[REDACTED]\r\n$ "},
		{"-----BEGIN KEY-----\nb3BlbnNzaC1rZXktdjE\n-----END KEY-----\n", "[REDACTED]\n"},
		{"-----BEGIN KEY-----\r\nb3Bl\x1b[1mbnNzaC1rZXktdjE\r\n-----END KEY-----", "[REDACTED]\x1b[1m"},
		{"login deploy-X9f2c71d0b8e4a6_db ok", "login [REDACTED] ok"},
		{"login deploy-\x1b[31mX9f2c71d0b8e4a6_db\x1b[m ok", "login [REDACTED]\x1b[31m\x1b[m ok"},
	}
	secrets := [][]byte{[]byte(key), []byte(pass), []byte(user)}
	for _, c := range cases {
		for cut := 0; cut <= len(c.in); cut++ {
			var out bytes.Buffer
			r := newTermRedactor(&out, secrets)
			_, _ = r.Write([]byte(c.in[:cut]))
			_, _ = r.Write([]byte(c.in[cut:]))
			flushWriter(r)
			if out.String() != c.want {
				t.Fatalf("%q cut at %d: got %q, want %q", c.in, cut, out.String(), c.want)
			}
		}
	}
}
