package docker_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandboxkit/sandbox"
)

// syncBuffer is a terminal screen safe for concurrent use.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// A terminal is kept by the Runtime that started it (the engine cannot
// attach to a running exec): another Runtime's AttachTerminal is
// NotFound, and the program keeps running for the first one.
func TestTerminalAttachOnlyFromItsRuntime(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c1 := newClient(t)
	sb := create(ctx, t, c1, sandbox.CreateOptions{})
	scr := &syncBuffer{}
	term, err := sb.StartTerminal(ctx, sandbox.TerminalOptions{Args: []string{"sh"}, Output: scr})
	require.NoError(t, err)
	defer term.Close()
	c2 := newClient(t)
	sb2, err := c2.Attach(ctx, sb.ID())
	require.NoError(t, err)
	_, err = sb2.AttachTerminal(ctx, term.ID(), &syncBuffer{})
	assert.ErrorIs(t, err, sandbox.ErrNotFound)
	_, err = term.Write([]byte("echo still-$((20+3))\r"))
	require.NoError(t, err)
	require.Eventually(t, func() bool { return strings.Contains(scr.String(), "still-23") }, 20*time.Second, 10*time.Millisecond, "screen %q", scr)
	_, err = term.Write([]byte("exit 2\r"))
	require.NoError(t, err)
	st, err := term.Wait(ctx)
	require.NoError(t, err)
	assert.Equal(t, 2, st.ExitCode)
}

// A program that does not exist, or a working directory that does not,
// fails StartTerminal itself, as Exec's would (not later, at Wait).
func TestTerminalStartErrors(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := newClient(t)
	sb := create(ctx, t, c, sandbox.CreateOptions{})
	_, err := sb.StartTerminal(ctx, sandbox.TerminalOptions{Args: []string{"no-such-program-x"}})
	assert.Equal(t, sandbox.NotFound, sandbox.CodeOf(err), "missing program: %v", err)
	_, err = sb.StartTerminal(ctx, sandbox.TerminalOptions{Dir: "/etc/passwd"})
	assert.ErrorIs(t, err, sandbox.ErrNotDirectory)
}
