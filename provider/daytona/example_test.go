package daytona_test

import (
	"context"
	"fmt"
	"log"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/provider/daytona"
	"github.com/sandboxkit/sandbox/provider/daytona/daytonafake"
	"github.com/sandboxkit/sandbox/provider/memory"
)

// Example runs the adapter against the in-process fake of Daytona's API and
// toolbox, as a program's own tests can: point the adapter at the fake's URL
// with the fake's key. In production, New() reads DAYTONA_API_KEY (and
// DAYTONA_API_URL, DAYTONA_TARGET) and talks to Daytona; sandbox.Open(ctx,
// "daytona://") does the same from a URL.
func Example() {
	fake := daytonafake.New(memory.New()) // commands run in an in-memory sandbox
	defer fake.Close()

	rt, err := daytona.New(daytona.WithAPIKey(fake.APIKey()), daytona.WithAPIURL(fake.URL()))
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

	if err := sb.WriteFile(ctx, "greeting.txt", []byte("hello from daytona\n")); err != nil {
		log.Fatal(err)
	}
	res, err := sb.Exec(ctx, sandbox.Command{Args: []string{"cat", "greeting.txt"}})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("exit %d: %s", res.ExitCode, res.Stdout)
	// Output: exit 0: hello from daytona
}
