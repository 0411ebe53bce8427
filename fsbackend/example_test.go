package fsbackend_test

import (
	"context"
	"fmt"
	"log"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/backend"
	"github.com/sandboxkit/sandbox/fsbackend"
	_ "github.com/sandboxkit/sandbox/provider/memory" // registers memory://
)

// An agent's file tools over a sandbox: every path is jailed to the
// workspace, and what the agent got wrong comes back as a result with a code
// it can read, not as a Go error (Go errors are for the transport).
func Example() {
	ctx := context.Background()
	client, err := sandbox.Open(ctx, "memory://") // local://, e2b:// or daytona:// alike
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	sb, err := client.Create(ctx, sandbox.CreateOptions{})
	if err != nil {
		log.Fatal(err)
	}
	defer sb.Destroy(ctx)

	fb, err := fsbackend.New(sb, fsbackend.Options{BaseDir: "/home/user/workspace", AllowExecute: true})
	if err != nil {
		log.Fatal(err)
	}
	defer fb.Close()

	w, err := fb.Write(ctx, &backend.WriteRequest{Path: "notes/todo.txt", Content: "buy milk\ncall bob\n"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("wrote", w.Path, w.Bytes, "bytes")

	g, err := fb.Grep(ctx, &backend.GrepRequest{Pattern: "bob"})
	if err != nil {
		log.Fatal(err)
	}
	for _, m := range g.Matches {
		fmt.Printf("match %s:%d %q\n", m.Path, m.Line, m.Text)
	}

	x, err := fb.Execute(ctx, &backend.ExecuteRequest{Command: "wc -l < notes/todo.txt"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("execute: exit %d, %s", x.ExitCode, x.Output)

	r, err := fb.Read(ctx, &backend.ReadRequest{Path: "../../../etc/passwd"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("escape refused:", r.Error != nil && r.Error.Code == backend.CodeInvalidPath)
	// Output:
	// wrote notes/todo.txt 18 bytes
	// match notes/todo.txt:2 "call bob"
	// execute: exit 0, 2
	// escape refused: true
}
