package session_test

import (
	"context"
	"fmt"
	"log"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/provider/memory"
	"github.com/sandboxkit/sandbox/session"
)

// A service that runs model-written code keeps one sandbox per
// conversation: the first Run creates it, later ones reuse it, and Close
// destroys what the manager created.
func ExampleManager() {
	ctx := context.Background()
	rt := memory.New()
	client := sandbox.NewClient(rt) // or sandbox.Open(ctx, "") for the local provider
	rt.Handle("python3", func(_ context.Context, c *memory.Call) int {
		fmt.Fprintln(c.Stdout, "ran", c.Args[1])
		return 0
	})

	m := session.NewManager(client, session.Options{})
	defer m.Close(ctx)

	for range 2 {
		s, err := m.Acquire(ctx, "conversation-42")
		if err != nil {
			log.Fatal(err)
		}
		res, err := s.Run(ctx, "print('hello')", session.RunOptions{Entrypoint: "task.py"})
		if err != nil {
			log.Fatal(err)
		}
		fmt.Print(string(res.Stdout))
	}
	fmt.Println("sandboxes:", rt.Live())
	// Output:
	// ran /home/user/workspace/task.py
	// ran /home/user/workspace/task.py
	// sandboxes: 1
}
