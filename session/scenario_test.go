package session_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/provider/memory"
	"github.com/sandboxkit/sandbox/session"
)

// scenario is the provider-independent life of a session: single-flight
// acquire, run code, restart and reattach, gone and recreated, ABA-safe
// release, close. newClient returns a client over the same provider state
// each time it is called (a "restarted process"); python says whether
// python3 really runs in the provider's sandboxes.
func scenario(t *testing.T, newClient func(t *testing.T) *sandbox.Client, python bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c1 := newClient(t)
	labels := map[string]string{"scenario": strings.ReplaceAll(strings.ToLower(t.Name()), "/", "-")}
	opts := session.Options{Create: sandbox.CreateOptions{Labels: labels}, ReapInterval: -1}
	count := func(c *sandbox.Client) int {
		n := 0
		for _, err := range c.List(ctx, sandbox.ListOptions{Labels: labels}) {
			if err != nil {
				t.Fatal(err)
			}
			n++
		}
		return n
	}
	t.Cleanup(func() { // whatever the outcome, leave nothing behind
		c := newClient(t)
		for in, err := range c.List(context.Background(), sandbox.ListOptions{Labels: labels}) {
			if err == nil {
				_ = c.Destroy(context.Background(), in.ID)
			}
		}
	})

	// One create for many concurrent callers.
	m1 := session.NewManager(c1, opts)
	var wg sync.WaitGroup
	ids := make(chan string, 20)
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := m1.Acquire(ctx, "conv-1")
			if err != nil {
				t.Error(err)
				return
			}
			ids <- s.ID()
		}()
	}
	wg.Wait()
	close(ids)
	first := ""
	for id := range ids {
		if first == "" {
			first = id
		} else if id != first {
			t.Fatalf("two sandboxes for one key: %s and %s", first, id)
		}
	}
	if n := count(c1); n != 1 {
		t.Fatalf("%d labelled sandboxes, want 1", n)
	}
	s1 := mustAcquire(t, m1, "conv-1")

	// Files and commands work in the workspace.
	if err := s1.WriteFile(ctx, "notes/a.txt", []byte("persisted")); err != nil {
		t.Fatal(err)
	}
	res, err := s1.Exec(ctx, sandbox.Command{Args: []string{"cat", s1.Workspace() + "/notes/a.txt"}})
	if err != nil || string(res.Stdout) != "persisted" {
		t.Fatalf("cat: %+v %v", res, err)
	}
	// Listing and removing stay in the workspace.
	if err := s1.WriteFile(ctx, "notes/b.txt", []byte("scratch")); err != nil {
		t.Fatal(err)
	}
	if err := s1.Remove(ctx, "/notes/b.txt"); err != nil {
		t.Fatalf("Remove: %v", err)
	}
	if list, err := s1.ReadDir(ctx, "notes"); err != nil || len(list) != 1 || list[0].Path != s1.Workspace()+"/notes/a.txt" {
		t.Fatalf("ReadDir(notes) = %+v, %v; want a.txt alone", list, err)
	}
	if _, err := s1.ReadDir(ctx, "../.."); !errors.Is(err, sandbox.ErrPathEscape) {
		t.Fatalf("ReadDir(../..) = %v, want ErrPathEscape", err)
	}
	if err := s1.Remove(ctx, "notes/../../x"); !errors.Is(err, sandbox.ErrPathEscape) {
		t.Fatalf("Remove(notes/../../x) = %v, want ErrPathEscape", err)
	}
	if python {
		res, err := s1.Run(ctx, "from __future__ import annotations\nimport sys\nprint('hi', sys.argv[1], open('in.txt').read())\n",
			session.RunOptions{Prelude: "import os", Args: []string{"there"}, Files: []sandbox.File{{Path: "in.txt", Data: []byte("file")}}})
		if err != nil || strings.TrimSpace(string(res.Stdout)) != "hi there file" {
			t.Fatalf("Run: %+v (stderr %q) %v", res, res.Stderr, err)
		}
		res, err = s1.Run(ctx, "import time\ntime.sleep(30)\n", session.RunOptions{Timeout: 200 * time.Millisecond})
		if err != nil || !res.TimedOut || res.TimeoutBy != sandbox.TimeoutCommand {
			t.Fatalf("Run timeout: %+v %v", res, err)
		}
	}

	// A restarted process reattaches instead of creating.
	c2 := newClient(t)
	m2 := session.NewManager(c2, opts)
	defer m2.Close(ctx)
	s2 := mustAcquire(t, m2, "conv-1")
	if s2.ID() != s1.ID() || !s2.Adopted() {
		t.Fatalf("restart got %s (adopted %v), want to reattach to %s", s2.ID(), s2.Adopted(), s1.ID())
	}
	if b, err := s2.ReadFile(ctx, "notes/a.txt"); err != nil || string(b) != "persisted" {
		t.Fatalf("reattached workspace: %q %v", b, err)
	}

	// The sandbox disappears: the session is forgotten and replaced.
	if err := s1.Sandbox().Destroy(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := s2.Exec(ctx, sandbox.Command{Args: []string{"true"}}); !errors.Is(err, session.ErrGone) {
		t.Fatalf("Exec on a destroyed sandbox = %v, want ErrGone", err)
	}
	s3 := mustAcquire(t, m2, "conv-1")
	if s3.ID() == s2.ID() || s3.Adopted() {
		t.Fatal("no fresh sandbox after the old one was gone")
	}

	// A sandbox paused behind the session's back is woken for the next call.
	if c2.Capabilities().Pause {
		other, err := newClient(t).AttachWith(ctx, s3.ID(), sandbox.AttachOptions{Own: true}) // pausing takes the owner
		if err != nil {
			t.Fatal(err)
		}
		if err := other.Pause(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := s3.Exec(ctx, sandbox.Command{Args: []string{"true"}}); err != nil {
			t.Fatalf("Exec on a paused sandbox: %v", err)
		}
	}

	// A late release of the old session leaves the new one alone.
	if err := m2.Release(ctx, s2); err != nil {
		t.Fatal(err)
	}
	if _, err := s3.Exec(ctx, sandbox.Command{Args: []string{"true"}}); err != nil {
		t.Fatalf("new sandbox broken by a stale release: %v", err)
	}

	// Close destroys what this manager created.
	if err := m2.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if n := count(c2); n != 0 {
		t.Fatalf("%d labelled sandboxes after Close, want 0", n)
	}
	_ = m1 // the first "process" died without closing
}

func TestScenarioMemory(t *testing.T) {
	t.Parallel()
	rt := memory.New()
	scenario(t, func(*testing.T) *sandbox.Client { return sandbox.NewClient(rt) }, false)
}
