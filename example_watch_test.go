package sandbox_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/provider/memory"
)

// Watch reports changes as they happen, until ctx ends or the loop stops.
func ExampleSandbox_Watch() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := sandbox.NewClient(memory.New())
	defer c.Close()
	sb, err := c.Create(ctx, sandbox.CreateOptions{})
	if err != nil {
		panic(err)
	}
	defer sb.Destroy(context.Background())
	if err := sb.MkdirAll(ctx, "out"); err != nil {
		panic(err)
	}
	events, err := sb.Watch(ctx, "out", sandbox.WatchOptions{Recursive: true})
	if err != nil {
		panic(err)
	}
	// Changes made once Watch returned are reported.
	if _, err := sb.Exec(ctx, sandbox.Command{Shell: "mkdir out/logs && echo done > out/logs/run.txt && rm out/logs/run.txt"}); err != nil {
		panic(err)
	}
	for ev, err := range events {
		if err != nil {
			panic(err)
		}
		if ev.Kind == sandbox.FileWritten {
			continue // one per write the program made: how many is its business
		}
		fmt.Println(ev.Kind, strings.TrimPrefix(ev.Path, sb.Home()+"/"))
		if ev.Kind == sandbox.FileRemoved {
			break
		}
	}
	// Output:
	// create out/logs
	// create out/logs/run.txt
	// remove out/logs/run.txt
}

// Processes lists what runs in a sandbox; Handle marks what Start started.
func ExampleSandbox_Processes() {
	ctx := context.Background()
	c := sandbox.NewClient(memory.New())
	defer c.Close()
	sb, err := c.Create(ctx, sandbox.CreateOptions{})
	if err != nil {
		panic(err)
	}
	defer sb.Destroy(ctx)
	p, err := sb.Start(ctx, sandbox.Command{Args: []string{"sleep", "60"}})
	if err != nil {
		panic(err)
	}
	defer func() { _ = p.Kill(ctx); _, _ = p.Wait(ctx) }()
	list, err := sb.Processes(ctx)
	if err != nil {
		panic(err)
	}
	for _, pi := range list {
		fmt.Println(pi.PID == p.PID(), pi.Handle, strings.Join(pi.Args, " "))
	}
	// Output:
	// true true sleep 60
}
