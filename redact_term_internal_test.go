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
