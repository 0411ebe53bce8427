package fsbackend

import (
	"regexp"
	"strings"
	"testing"
)

// TestScriptRedirectsSurvive checks the shell programs for a redirection on
// the special builtins ":" and "exec" without "command" before it: in a
// POSIX shell such a redirection that fails (a name made or swapped
// meanwhile by a command in the sandbox, a descriptor that cannot be
// opened) ends the whole shell (dash exits 2, bash --posix 1), so the call
// fails with a Go error instead of the typed answer the script would
// give. "exec cmd <file", which replaces the shell anyway, is not one.
func TestScriptRedirectsSurvive(t *testing.T) {
	t.Parallel()
	bare := regexp.MustCompile(`(^|[^a-z ]|[^a-z]\s+)(:|exec)\s+[0-9]*(<|>)`)
	for name, text := range map[string]string{"opScript": opScript, "helperWrapper": helperWrapper} {
		for i, line := range strings.Split(text, "\n") {
			if strings.HasPrefix(strings.TrimSpace(line), "#") {
				continue
			}
			if loc := bare.FindStringIndex(line); loc != nil {
				t.Errorf("%s line %d: a redirection on a special builtin without \"command\": %s", name, i+1, strings.TrimSpace(line))
			}
		}
	}
}
