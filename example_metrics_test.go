package sandbox_test

import (
	"context"
	"fmt"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/provider/memory"
)

// Metrics reports what the provider can see; a field it cannot see is
// MetricUnknown, which Known tells from a measured 0.
func ExampleSandbox_Metrics() {
	ctx := context.Background()
	c := sandbox.NewClient(memory.New())
	defer c.Close()
	sb, err := c.Create(ctx, sandbox.CreateOptions{})
	if err != nil {
		panic(err)
	}
	defer sb.Destroy(ctx)
	if err := sb.WriteFile(ctx, "data.csv", make([]byte, 1500)); err != nil {
		panic(err)
	}
	m, err := sb.Metrics(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Println("disk bytes:", m.DiskBytes)
	if !sandbox.Known(m.MemoryBytes) {
		fmt.Println("memory: not reported by", c.Capabilities().Isolation)
	}
	// Output:
	// disk bytes: 1500
	// memory: not reported by none (in-memory fake)
}
