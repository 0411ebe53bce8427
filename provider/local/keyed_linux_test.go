//go:build linux

package local

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandboxkit/sandbox"
)

const keyedChildEnv = "SANDBOXKIT_LOCAL_GETORCREATE_CHILD"

// getOrCreateMany runs n concurrent GetOrCreate calls with labels on c and
// writes "GOT <id> <created>" per answer to out.
func getOrCreateMany(ctx context.Context, t testing.TB, c *sandbox.Client, labels map[string]string, n int, out io.Writer) {
	var wg sync.WaitGroup
	var mu sync.Mutex
	start := make(chan struct{})
	for range n {
		wg.Go(func() {
			<-start
			sb, made, err := c.GetOrCreate(ctx, sandbox.CreateOptions{Labels: labels, Timeout: 10 * time.Minute})
			if err != nil {
				t.Errorf("GetOrCreate: %v", err)
				return
			}
			mu.Lock()
			fmt.Fprintf(out, "GOT %s %t\n", sb.ID(), made)
			mu.Unlock()
		})
	}
	close(start)
	wg.Wait()
}

// tally reads the GOT lines.
func tally(t *testing.T, outs ...string) (ids map[string]int, created, total int) {
	ids = map[string]int{}
	for _, o := range outs {
		sc := bufio.NewScanner(strings.NewReader(o))
		for sc.Scan() {
			var id string
			var made bool
			if _, err := fmt.Sscanf(sc.Text(), "GOT %s %t", &id, &made); err == nil {
				ids[id]++
				total++
				if made {
					created++
				}
			}
		}
	}
	return ids, created, total
}

// surviving lists the sandboxes under root carrying labels, and destroys
// them when the test ends.
func surviving(t *testing.T, root string, labels map[string]string) []string {
	t.Helper()
	rt := newRuntimeAt(t, root)
	c := sandbox.NewClient(rt)
	var ids []string
	for in, err := range c.List(context.Background(), sandbox.ListOptions{Labels: labels}) {
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, in.ID)
	}
	t.Cleanup(func() {
		for _, id := range ids {
			_ = rt.Destroy(context.Background(), id)
		}
	})
	return ids
}

func newRuntimeAt(t *testing.T, root string) *Runtime {
	t.Helper()
	rt, err := New(WithRoot(root))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rt.Close() })
	return rt
}

// TestGetOrCreateOnceAcrossRuntimes: 4 Runtimes on one root (as 4
// processes would have) × 50 goroutines leave one sandbox.
func TestGetOrCreateOnceAcrossRuntimes(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	labels := map[string]string{"across": "runtimes"}
	var wg sync.WaitGroup
	outs := make([]bytes.Buffer, 4)
	for i := range 4 {
		c := sandbox.NewClient(newRuntimeAt(t, root))
		wg.Go(func() { getOrCreateMany(ctx, t, c, labels, 50, &outs[i]) })
	}
	wg.Wait()
	ids, created, total := tally(t, outs[0].String(), outs[1].String(), outs[2].String(), outs[3].String())
	live := surviving(t, root, labels)
	if total != 200 || len(ids) != 1 || created != 1 || len(live) != 1 {
		t.Fatalf("4 Runtimes × 50: %d answers, sandboxes %v, %d told created, %v live; want 200, 1, 1, 1", total, ids, created, live)
	}
}

// TestGetOrCreateOnceAcrossProcesses: 4 OS processes × 50 goroutines on
// one root leave exactly one sandbox, which every caller got.
func TestGetOrCreateOnceAcrossProcesses(t *testing.T) {
	t.Parallel()
	if os.Getenv(keyedChildEnv) != "" {
		t.Skip("in a child process")
	}
	root := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	outs := make([]string, 4)
	errs := make([]error, 4)
	gates := make([]io.WriteCloser, 4)
	ready := make(chan bool, 4)
	for i := range 4 {
		cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestGetOrCreateChild$", "-test.count=1", "-test.v")
		cmd.Env = append(os.Environ(), keyedChildEnv+"=1", "CHILD_ROOT="+root)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if gates[i], err = cmd.StdinPipe(); err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			br := bufio.NewReader(stdout)
			var all strings.Builder
			signalled := false
			for {
				line, err := br.ReadString('\n')
				all.WriteString(line)
				if !signalled && strings.HasPrefix(line, "READY") {
					signalled = true
					ready <- true
				}
				if err != nil {
					break
				}
			}
			if !signalled {
				ready <- false
			}
			errs[i] = cmd.Wait()
			outs[i] = all.String() + stderr.String()
		})
	}
	allReady := true
	for range 4 {
		allReady = <-ready && allReady
	}
	for _, g := range gates {
		_, _ = io.WriteString(g, "go\n")
		_ = g.Close()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil || !allReady {
			t.Fatalf("child %d (all ready: %v): %v\n%s", i, allReady, err, outs[i])
		}
	}
	ids, created, total := tally(t, outs...)
	live := surviving(t, root, map[string]string{"across": "processes"})
	if total != 200 || len(ids) != 1 || created != 1 || len(live) != 1 {
		t.Fatalf("4 processes × 50: %d answers, sandboxes %v, %d told created, %v live; want 200, 1, 1, 1", total, ids, created, live)
	}
}

// TestGetOrCreateChild is the child process of
// TestGetOrCreateOnceAcrossProcesses.
func TestGetOrCreateChild(t *testing.T) {
	if os.Getenv(keyedChildEnv) == "" {
		t.Skip("runs only as a child of TestGetOrCreateOnceAcrossProcesses")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := sandbox.NewClient(newRuntimeAt(t, os.Getenv("CHILD_ROOT")))
	defer c.Close()
	fmt.Println("READY")
	if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
		t.Fatalf("waiting for the go-ahead: %v", err)
	}
	var out strings.Builder
	getOrCreateMany(ctx, t, c, map[string]string{"across": "processes"}, 50, &out)
	fmt.Print(out.String())
}
