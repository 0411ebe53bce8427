// Command quickstart is the README's main job: it creates a sandbox, writes
// a file, runs a command that reads it, reads a result back, pauses and
// resumes where the provider supports it, and destroys the sandbox.
//
//	go run ./examples/quickstart                 # the local provider
//	go run ./examples/quickstart -url memory://  # the in-memory fake
//	go run ./examples/quickstart -url 'docker://?image=sandboxkit/busybox:test'  # a Docker Engine at DOCKER_HOST
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/sandboxkit/sandbox"
	_ "github.com/sandboxkit/sandbox/provider/docker"
	_ "github.com/sandboxkit/sandbox/provider/local"
	_ "github.com/sandboxkit/sandbox/provider/memory"
)

func main() {
	url := flag.String("url", "", "provider URL (empty: $SANDBOX_URL, then local://)")
	flag.Parse()
	if err := run(*url); err != nil {
		log.Fatal(err)
	}
}

func run(url string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	client, err := sandbox.Open(ctx, url)
	if err != nil {
		return err
	}
	defer client.Close()
	caps := client.Capabilities()
	fmt.Printf("provider %s (isolation: %s)\n", client.Provider(), caps.Isolation)

	start := time.Now()
	sb, err := client.Create(ctx, sandbox.CreateOptions{Labels: map[string]string{"example": "quickstart"}})
	if err != nil {
		return err
	}
	defer func() {
		if err := sb.Destroy(context.WithoutCancel(ctx)); err != nil {
			log.Print(err)
		}
		fmt.Println("destroyed", sb.ID())
	}()
	info := sb.Info()
	fmt.Printf("created %s in %v (home %s, isolation %s)\n", sb.ID(), time.Since(start).Round(time.Millisecond), info.Home, info.Isolation)

	if err := sb.WriteFile(ctx, "greeting.txt", []byte("hello from the host\n")); err != nil {
		return err
	}
	res, err := sb.Exec(ctx, sandbox.Command{
		Shell:   "cat greeting.txt; echo computed in the sandbox > result.txt; echo a warning >&2",
		Timeout: 30 * time.Second,
	})
	if err != nil {
		return err
	}
	fmt.Printf("exit %d in %v\nstdout: %sstderr: %s", res.ExitCode, res.Duration.Round(time.Microsecond), res.Stdout, res.Stderr)

	out, err := sb.ReadFile(ctx, "result.txt")
	if err != nil {
		return err
	}
	fmt.Printf("result.txt: %s", out)

	if caps.Pause {
		if err := sb.Pause(ctx); err != nil {
			return err
		}
		// A paused sandbox runs nothing: show the failure and its code.
		_, err := sb.Exec(ctx, sandbox.Command{Args: []string{"true"}})
		if err == nil {
			return fmt.Errorf("exec of true in a paused sandbox succeeded; want an error")
		}
		fmt.Printf("paused; exec of \"true\" fails as expected: code %s, errors.Is(err, sandbox.ErrPaused) = %v\n  %v\n",
			sandbox.CodeOf(err), errors.Is(err, sandbox.ErrPaused), err)
		if err := sb.Resume(ctx); err != nil {
			return err
		}
		res, err := sb.Exec(ctx, sandbox.Command{Args: []string{"cat", "result.txt"}})
		if err != nil {
			return err
		}
		fmt.Printf("resumed; files kept: %s", res.Stdout)
	} else {
		fmt.Fprintln(os.Stderr, "provider cannot pause; skipping pause/resume")
	}
	return nil
}
