package sandboxgenkit

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// A cap that falls inside a secret must not leave its first part; a
// multi-line secret is redacted line by line, as read_file and grep show
// it; a cut never splits a UTF-8 sequence.
func TestRedactor(t *testing.T) {
	const key = "sk-live-0123456789abcdef"
	rd := newRedactor([]string{key, "-----BEGIN KEY-----\nMIIEvQIBADANBgkq\n-----END KEY-----", ""})

	out := "token=" + key
	for n := len("token=") + 1; n < len(out); n++ {
		assert.Equal(t, "token=", rd.cut(out, n), "cut at %d", n)
	}
	assert.Equal(t, "token=[REDACTED]", rd.text(out))
	assert.Equal(t, "     2\t[REDACTED]", rd.text("     2\tMIIEvQIBADANBgkq"))
	assert.Equal(t, "é", cutUTF8("éé", 3))
	assert.Equal(t, "plain", rd.cut("plain text", 5))

	none := newRedactor(nil)
	assert.Equal(t, key, none.text(key))
	assert.Equal(t, strings.Repeat("a", 4), none.cut(strings.Repeat("a", 10), 4))
}
