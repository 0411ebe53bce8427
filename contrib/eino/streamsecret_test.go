package eino_test

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/cloudwego/eino/adk/filesystem"
	"github.com/stretchr/testify/require"

	eino "github.com/sandboxkit/sandbox/contrib/eino"
)

// A line of a multi-line secret (which eino promises to redact on its own)
// printed in two writes reaches the stream unredacted: the sandbox's
// held-back redaction knows only whole values, eino's Replacer sees one
// chunk at a time.
func TestExecuteStreamingHoldsBackSplitSecretLine(t *testing.T) {
	for _, p := range providers() {
		t.Run(p.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			key := "-----BEGIN KEY-----\nMIIEsecretkeyline2xyz\n-----END KEY-----"
			b, _ := newFixed(t, p.client(t), eino.Options{AllowExecute: true,
				SecretEnv: map[string]string{"PEM": key}})
			// Non-streaming: the line alone is redacted.
			r, err := b.Execute(ctx, &filesystem.ExecuteRequest{Command: `printf '%s\n' "$PEM" | sed -n 2p`})
			require.NoError(t, err)
			require.NotContains(t, r.Output, "MIIEsecretkeyline2xyz")
			sr, err := b.ExecuteStreaming(ctx, &filesystem.ExecuteRequest{Command: `l=$(printf '%s\n' "$PEM" | sed -n 2p); printf '%s' "${l%????????}"; sleep 0.5; printf '%s\n' "${l#?????????????}"`})
			require.NoError(t, err)
			defer sr.Close()
			var out strings.Builder
			for {
				r, err := sr.Recv()
				if errors.Is(err, io.EOF) {
					break
				}
				require.NoError(t, err)
				out.WriteString(r.Output)
			}
			require.NotContains(t, out.String(), "MIIEsecretkeyline2xyz", "streamed output: %q", out.String())
		})
	}
}
