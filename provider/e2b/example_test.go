package e2b_test

import (
	"context"
	"fmt"
	"log"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/provider/e2b"
	"github.com/sandboxkit/sandbox/provider/e2b/e2bfake"
	"github.com/sandboxkit/sandbox/provider/memory"
)

// Example runs the adapter against the in-process fake, as a program's own
// tests can: point the adapter at the fake's URLs with the fake's key. In
// production, New() reads E2B_API_KEY and talks to E2B.
func Example() {
	fake := e2bfake.New(memory.New())
	defer fake.Close()

	rt, err := e2b.New(
		e2b.WithAPIKey(fake.APIKey()),
		e2b.WithAPIURL(fake.APIURL()),
		e2b.WithSandboxURL(fake.SandboxURL()),
	)
	if err != nil {
		log.Fatal(err)
	}
	client := sandbox.NewClient(rt)
	defer client.Close()

	ctx := context.Background()
	sb, err := client.Create(ctx, sandbox.CreateOptions{Labels: map[string]string{"app": "demo"}})
	if err != nil {
		log.Fatal(err)
	}
	defer sb.Destroy(ctx)

	res, err := sb.Exec(ctx, sandbox.Command{Args: []string{"echo", "hello from", sb.Info().Template}})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s", res.Stdout)
	// Output: hello from base
}
