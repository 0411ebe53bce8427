package sandbox_test

import (
	"context"
	"fmt"
	"log"

	"github.com/sandboxkit/sandbox"
)

// Save a sandbox that is set up, and start new ones from it.
func ExampleSandbox_Snapshot() {
	ctx := context.Background()
	client, err := sandbox.Open(ctx, "memory://")
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	base, err := client.Create(ctx, sandbox.CreateOptions{})
	if err != nil {
		log.Fatal(err)
	}
	defer base.Destroy(ctx)
	if err := base.WriteFile(ctx, "config.toml", []byte("ready = true\n")); err != nil {
		log.Fatal(err)
	}
	snap, err := base.Snapshot(ctx, sandbox.SnapshotOptions{Name: "configured"})
	if err != nil {
		log.Fatal(err)
	}
	defer client.DeleteSnapshot(ctx, snap.ID)

	sb, err := client.Create(ctx, sandbox.CreateOptions{FromSnapshot: snap.ID})
	if err != nil {
		log.Fatal(err)
	}
	defer sb.Destroy(ctx)
	b, err := sb.ReadFile(ctx, "config.toml")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s %s", snap.Mode, b)
	// Output: filesystem ready = true
}

// Branch a sandbox into three and change each on its own.
func ExampleSandbox_Fork() {
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
	if err := sb.WriteFile(ctx, "n.txt", []byte("parent")); err != nil {
		log.Fatal(err)
	}
	kids, err := sb.Fork(ctx, 3, sandbox.ForkOptions{})
	for _, k := range kids {
		defer k.Destroy(ctx)
	}
	if err != nil {
		log.Fatal(err)
	}
	for i, k := range kids {
		if err := k.WriteFile(ctx, "n.txt", []byte(fmt.Sprint("child ", i))); err != nil {
			log.Fatal(err)
		}
	}
	for _, s := range append([]*sandbox.Sandbox{sb}, kids...) {
		b, err := s.ReadFile(ctx, "n.txt")
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(string(b))
	}
	// Output:
	// parent
	// child 0
	// child 1
	// child 2
}
