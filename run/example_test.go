package run_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/sandboxkit/sandbox"
	_ "github.com/sandboxkit/sandbox/provider/local"
	"github.com/sandboxkit/sandbox/run"
)

// A long job started by one process, found again by another after a
// restart, with its output followed line by line.
func Example() {
	ctx := context.Background()
	c, err := sandbox.Open(ctx, "") // the local provider
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	sb, err := c.Create(ctx, sandbox.CreateOptions{Timeout: time.Hour})
	if err != nil {
		log.Fatal(err)
	}

	// A short deadline bounds the start only; the budget bounds the run.
	startCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	_, err = run.Start(startCtx, sb, run.Request{
		ID:      "nightly-build",
		Command: []string{"make", "-j8", "all"},
		Dir:     "src",
		Budget:  45 * time.Minute,
	})
	if err != nil {
		log.Fatal(err)
	}

	// Later, perhaps in another process: attach by sandbox id, open the run
	// by its id, and follow its output.
	sb2, err := c.Attach(ctx, sb.ID())
	if err != nil {
		log.Fatal(err)
	}
	r, err := run.Open(ctx, sb2, "nightly-build")
	if err != nil {
		log.Fatal(err)
	}
	var off int64
	for {
		chunk, err := r.ReadLogs(ctx, off, 0)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Print(string(chunk.Data))
		off = chunk.Next
		if chunk.EOF {
			break
		}
		time.Sleep(time.Second)
	}
	st, err := r.Status(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("exit code", st.ExitCode)
}
