package sandbox_test

import (
	"context"
	"fmt"
	"log"

	"github.com/sandboxkit/sandbox"
)

// Wait for a server through its Process: when it dies before listening
// (here, its port is taken), the wait fails at once with its exit status
// and the end of its stderr, instead of polling until ctx ends.
func ExampleProcess_WaitForPort() {
	ctx := context.Background()
	client, err := sandbox.Open(ctx, "memory://")
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	sb, err := client.Create(ctx, sandbox.CreateOptions{})
	if err != nil {
		log.Fatal(err)
	}
	defer sb.Destroy(ctx)

	srv, err := sb.Start(ctx, sandbox.Command{Shell: "echo 'OSError: [Errno 98] Address already in use' >&2; exit 1"})
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	// ctx has no deadline: the wait would still end, after
	// sandbox.DefaultPortWait, if the server lived on without listening.
	err = srv.WaitForPort(ctx, 8000)
	fmt.Println(sandbox.CodeOf(err))
	res, _ := srv.Wait(ctx)
	fmt.Printf("exit %d: %s", res.ExitCode, res.Stderr)
	// Output:
	// FailedPrecondition
	// exit 1: OSError: [Errno 98] Address already in use
}
