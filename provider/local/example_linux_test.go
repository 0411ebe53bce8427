//go:build linux

package local_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"strings"
	"time"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/provider/local"
)

// Example runs a command in a real sandbox on this machine, isolated as far
// as the host allows: Info.Isolation says which level it got and Info.Detail
// why not more. sandbox.Open(ctx, "") does the same with the default root
// (<user cache dir>/sandboxkit/local, where sandboxes survive this process).
func Example() {
	root, err := os.MkdirTemp("", "sandboxes-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(root)

	rt, err := local.New(local.WithRoot(root), local.WithMinIsolation(local.L1))
	if err != nil {
		log.Fatal(err)
	}
	client := sandbox.NewClient(rt)
	defer client.Close()

	ctx := context.Background()
	sb, err := client.Create(ctx, sandbox.CreateOptions{NoNetwork: true})
	if err != nil {
		log.Fatal(err)
	}
	defer sb.Destroy(ctx)

	res, err := sb.Exec(ctx, sandbox.Command{
		Shell:   `echo "hello from $(uname -s)"; cat missing 2>/dev/null || echo "cat failed: $?"`,
		Timeout: time.Minute,
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("exit %d\n%s", res.ExitCode, res.Stdout)
	fmt.Println("isolated:", strings.HasPrefix(sb.Info().Isolation, "L"))
	// Output:
	// exit 0
	// hello from Linux
	// cat failed: 1
	// isolated: true
}
