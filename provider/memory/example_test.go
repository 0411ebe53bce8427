package memory_test

import (
	"context"
	"fmt"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/provider/memory"
)

// runTests is the code under test: an agent tool that writes a test file
// and runs pytest in a sandbox.
func runTests(ctx context.Context, sb *sandbox.Sandbox) (string, error) {
	if err := sb.WriteFile(ctx, "test_app.py", []byte("def test_ok(): assert True\n")); err != nil {
		return "", err
	}
	r, err := sb.Exec(ctx, sandbox.Command{Args: []string{"pytest", "-q"}})
	if err != nil {
		return "", err
	}
	return string(r.Stdout), nil
}

// A unit test of agent code against the memory provider: script pytest,
// inject a stale-transport fault, and check nothing was left running.
func Example() {
	ctx := context.Background()
	fake := memory.New()
	client := sandbox.NewClient(fake)
	fake.Handle("pytest", func(ctx context.Context, c *memory.Call) int {
		src, _ := c.Files.ReadFile("test_app.py")
		fmt.Fprintf(c.Stdout, "1 passed (%d bytes of tests)\n", len(src))
		return 0
	})
	fake.FailNext(memory.OpExec, 1, sandbox.ErrStaleTransport) // the library retries once

	sb, _ := client.Create(ctx, sandbox.CreateOptions{})
	out, err := runTests(ctx, sb)
	fmt.Print(out)
	fmt.Println("err:", err, "exec calls:", len(fake.CallsOf(memory.OpExec)))
	_ = sb.Destroy(ctx)
	fmt.Println("live sandboxes:", fake.Live())
	// Output:
	// 1 passed (27 bytes of tests)
	// err: <nil> exec calls: 2
	// live sandboxes: 0
}
