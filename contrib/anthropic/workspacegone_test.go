package anthropic_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	sbanthropic "github.com/sandboxkit/sandbox/contrib/anthropic"
)

// The model may remove the workspace with a command: the next bash call
// makes it again and runs, rather than failing every call after.
func TestBashRecreatesRemovedWorkspace(t *testing.T) {
	for name, mk := range providers(t) {
		t.Run(name, func(t *testing.T) {
			tools, err := sbanthropic.New(mk(t), sbanthropic.Options{})
			require.NoError(t, err)
			defer tools.Close()
			ctx := context.Background()
			bash := func(cmd string) string {
				t.Helper()
				raw, _ := json.Marshal(map[string]any{"command": cmd})
				res, err := tools.Bash().Execute(ctx, raw)
				require.NoError(t, err, "bash %q", cmd)
				return res[0].OfText.Text
			}
			ws := bash("pwd")
			bash(`(cd / && rm -rf "$OLDPWD") && echo gone`)
			require.Equal(t, ws, bash("pwd"), "the next call runs in the workspace made again")
			require.Equal(t, "hi\n", bash("echo hi > x.txt && cat x.txt"))
		})
	}
}
