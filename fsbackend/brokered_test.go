package fsbackend_test

import (
	"context"
	"strings"
	"testing"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/backend"
	"github.com/sandboxkit/sandbox/fsbackend"
	"github.com/sandboxkit/sandbox/provider/memory"
)

// fsbackend creates no sandbox: it works over the one it is given, and its
// execute sees what that sandbox was made with. A brokered secret's
// placeholder is the env value commands see, and the value, should a
// command print it, is redacted from execute's output.
func TestExecuteOverBrokeredSecret(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := sandbox.NewClient(memory.New())
	defer c.Close()
	const value = "sk-fsbackend-brokered-2718"
	sb, err := c.Create(ctx, sandbox.CreateOptions{
		Network:         &sandbox.NetworkPolicy{Allow: []string{"api.example.com"}},
		BrokeredSecrets: []sandbox.BrokeredSecret{{Value: value, Hosts: []string{"api.example.com"}, Env: "API_KEY"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	b, err := fsbackend.New(sb, fsbackend.Options{AllowExecute: true})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	res, err := b.Execute(ctx, &backend.ExecuteRequest{Command: "echo $API_KEY; echo " + value})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(res.Output, "SBX_BROKERED_API_KEY_") || strings.Contains(res.Output, value) {
		t.Fatalf("execute: %q", res.Output)
	}
}

// The sandbox's own secret values (here CreateOptions.SecretEnv), which the
// backend was not given but a caller redacting results with the sandbox's
// redaction finds, are not cut in two by grep's cut of a long line,
// wherever the cut falls in them.
func TestGrepCutKeepsTheSandboxsSecrets(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := sandbox.NewClient(memory.New())
	defer c.Close()
	const secret = "sk-own-5ecret-0123456789"
	sb, err := c.Create(ctx, sandbox.CreateOptions{SecretEnv: map[string]string{"K": secret}})
	if err != nil {
		t.Fatal(err)
	}
	b, err := fsbackend.New(sb, fsbackend.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	var text strings.Builder
	for k := 1; k < len(secret); k++ {
		// The value starts k characters before the cut.
		text.WriteString(strings.Repeat("a", fsbackend.MaxLineChars-k) + secret + "bbbb\n")
	}
	if _, err := b.Write(ctx, &backend.WriteRequest{Path: "long.txt", Content: text.String()}); err != nil {
		t.Fatal(err)
	}
	res, err := b.Grep(ctx, &backend.GrepRequest{Pattern: "aaaa"})
	if err != nil || res.Error != nil {
		t.Fatalf("grep: %v %v", err, res.Error)
	}
	if len(res.Matches) != len(secret)-1 {
		t.Fatalf("grep: %d matches, want %d", len(res.Matches), len(secret)-1)
	}
	for _, m := range res.Matches {
		if strings.Contains(m.Text, "sk-") {
			t.Fatalf("line %d: the cut keeps the start of the sandbox's secret: ...%q", m.Line, m.Text[len(m.Text)-30:])
		}
	}
}
