// Command session shows the session layer a service running model-written
// code uses: one sandbox per conversation, created on first use, reused by
// later turns, reattached after a restart, ended by Close.
//
//	go run ./examples/session                  # the local provider (needs python3)
//	go run ./examples/session -url local:///tmp/sbx
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"time"

	"github.com/sandboxkit/sandbox"
	_ "github.com/sandboxkit/sandbox/provider/local"
	"github.com/sandboxkit/sandbox/session"
)

func main() {
	url := flag.String("url", "", "provider URL (empty: $SANDBOX_URL, then local://)")
	flag.Parse()
	if err := run(os.Stdout, *url); err != nil {
		log.Fatal(err)
	}
}

func run(w io.Writer, url string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	client, err := sandbox.Open(ctx, url)
	if err != nil {
		return err
	}
	defer client.Close()

	opts := session.Options{
		Create:      sandbox.CreateOptions{Labels: map[string]string{"app": "session-example"}},
		IdleTimeout: 10 * time.Minute,
	}
	m := session.NewManager(client, opts)
	defer m.Close(context.WithoutCancel(ctx)) // destroys the sandboxes m owns

	// Two turns of one conversation share a sandbox (and its files).
	turns := []string{
		"from __future__ import annotations\nopen('state.txt', 'w').write('turn 1 was here')\nprint('wrote state')\n",
		"print(open('state.txt').read())\n",
	}
	for i, code := range turns {
		start := time.Now()
		s, err := m.Acquire(ctx, "conversation-42")
		if err != nil {
			return err
		}
		res, err := s.Run(ctx, code, session.RunOptions{Prelude: "import sys\nsys.dont_write_bytecode = True"})
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "turn %d in %s (%v): %s", i+1, s.ID(), time.Since(start).Round(time.Millisecond), res.Stdout)
	}

	// A runaway program is ended by its timeout; the Result says whose.
	s, err := m.Acquire(ctx, "conversation-42")
	if err != nil {
		return err
	}
	first := s.ID()
	res, err := s.Run(ctx, "while True: pass\n", session.RunOptions{Timeout: 500 * time.Millisecond})
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "runaway: timed out=%v by %s after %v\n", res.TimedOut, res.TimeoutBy, res.Timeout)

	// A restarted process finds the same sandbox by its label and adopts
	// it: it now owns it (Owned is true), so its Close destroys it as it
	// would one it created, and nothing leaks when the old process is gone.
	// (Here the old manager still runs in this process; whichever Close
	// comes first ends the sandbox, and the other finds it gone.)
	restarted := session.NewManager(client, opts)
	defer restarted.Close(context.WithoutCancel(ctx)) // destroys what it created or adopted
	again, err := restarted.Acquire(ctx, "conversation-42")
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "after restart: %s (same sandbox: %v, adopted: %v, created by this manager: %v)\n",
		again.ID(), again.ID() == first, again.Adopted(), !again.Adopted())
	return nil
}
