package local

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/sandboxkit/sandbox"
)

// grep --color highlights its match inside a secret, splitting it with
// colour codes: the terminal's output still shows no part of it.
func TestTerminalSecretSplitByColourRedacted(t *testing.T) {
	t.Parallel()
	const secret = "tok-9f8e7d6c5b4a-SECRET"
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := sandbox.NewClient(levelRuntime(t, L4))
	defer c.Close()
	sb, err := c.Create(ctx, sandbox.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Destroy(context.Background())
	var out termOut
	tm, err := sb.StartTerminal(ctx, sandbox.TerminalOptions{
		Args:      []string{"sh", "-c", `env | grep --color=always 9f8e7d; echo end`},
		SecretEnv: map[string]string{"TOK": secret},
		Output:    &out,
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tm.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	s := out.String()
	if !strings.Contains(s, "TOK=") || !strings.Contains(s, "\x1b[") {
		t.Fatalf("grep printed no coloured match: %q", s)
	}
	stripped := s
	for _, seq := range []string{"\x1b[01;31m", "\x1b[K", "\x1b[m"} {
		stripped = strings.ReplaceAll(stripped, seq, "")
	}
	if strings.Contains(stripped, secret) || strings.Contains(s, "9f8e7d") {
		t.Fatalf("the secret, split by colour codes, is readable on the screen: %q", s)
	}
}
