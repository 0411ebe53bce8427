package daytona_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandboxkit/sandbox"
)

// screen is a terminal's output, safe for concurrent use.
type screen struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *screen) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *screen) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// The daemon runs the login shell on every PTY session; the adapter
// types the line that runs the program into it. None of that (the
// greeting, the prompt, the typed line, the start marker) reaches the
// caller: the output is the program's alone.
func TestTerminalOutputIsTheProgramsOnly(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	e := newEnv(t, nil)
	sb, err := e.c.Create(ctx, sandbox.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Destroy(context.Background())
	scr := &screen{}
	term, err := sb.StartTerminal(ctx, sandbox.TerminalOptions{Args: []string{"printf", "%s", "only-this"}, Output: scr})
	if err != nil {
		t.Fatal(err)
	}
	defer term.Close()
	st, err := term.Wait(ctx)
	if err != nil || !st.Success() {
		t.Fatalf("Wait: %+v %v", st, err)
	}
	if got := scr.String(); got != "only-this" {
		t.Errorf("output %q, want exactly the program's %q", got, "only-this")
	}
}

// A missing program or a working directory that is a file fails
// StartTerminal itself, as Exec's would, and leaves no session behind.
func TestTerminalStartErrors(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	e := newEnv(t, nil)
	sb, err := e.c.Create(ctx, sandbox.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Destroy(context.Background())
	if _, err := sb.StartTerminal(ctx, sandbox.TerminalOptions{Args: []string{"no-such-program-x"}}); sandbox.CodeOf(err) != sandbox.NotFound {
		t.Errorf("missing program: %v, want NotFound", err)
	}
	if err := sb.WriteFile(ctx, "afile", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if _, err := sb.StartTerminal(ctx, sandbox.TerminalOptions{Dir: "afile"}); !errors.Is(err, sandbox.ErrNotDirectory) {
		t.Errorf("Dir a file: %v, want NotDirectory", err)
	}
}
