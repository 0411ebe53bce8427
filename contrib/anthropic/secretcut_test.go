package anthropic_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	sbanthropic "github.com/sandboxkit/sandbox/contrib/anthropic"
)

// A line longer than MaxReadBytes is cut at the cap before redaction: a
// secret value straddling the cut shows its first part.
func TestViewLongLineCutHidesSecretStart(t *testing.T) {
	for name, mk := range providers(t) {
		t.Run(name, func(t *testing.T) {
			sb := mk(t)
			tools, err := sbanthropic.New(sb, sbanthropic.Options{MaxReadBytes: 4096,
				SecretEnv: map[string]string{"TOK": secret}})
			require.NoError(t, err)
			defer tools.Close()
			ctx := context.Background()
			// 4096-10 bytes of padding, then the secret: the cap falls 10 bytes into it.
			cmd := `printf '%s%s\n' "$(head -c 4086 /dev/zero | tr '\0' A)" "$TOK" > f.txt; printf 'x\n' >> f.txt; head -c 100000 /dev/zero | tr '\0' B >> f.txt`
			in, _ := json.Marshal(map[string]any{"command": cmd})
			_, err = tools.Bash().Execute(ctx, in)
			require.NoError(t, err)
			in, _ = json.Marshal(map[string]any{"command": "view", "path": "f.txt"})
			res, err := tools.TextEditor().Execute(ctx, in)
			var text string
			if err != nil {
				text = err.Error()
			} else {
				text = res[0].OfText.Text
			}
			prefix := secret[:10]
			require.NotContains(t, text, prefix, "the view shows the start of the secret: %q", text[max(0, len(text)-200):])
		})
	}
}
