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
