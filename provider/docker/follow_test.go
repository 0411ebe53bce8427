package docker_test

import (
	"bytes"
	"context"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/provider/docker"
)

// cutWriter passes on its first keep bytes and drops the rest, as an
// exec stream the engine stopped draining.
type cutWriter struct {
	w    io.Writer
	keep int
}

func (c *cutWriter) Write(p []byte) (int, error) {
	n := len(p)
	if c.keep <= 0 {
		return n, nil
	}
	if len(p) > c.keep {
		p = p[:c.keep]
	}
	c.keep -= len(p)
	if _, err := c.w.Write(p); err != nil {
		return 0, err
	}
	return n, nil
}

// The engine drains an exec's streams for a bounded time after it exits:
// on a starved host a background process's last output (often the stderr
// that says why a server died) never reached the caller. A stream that
// ends short is followed again from where it stopped, so Wait returns the
// whole output and the exit code.
func TestBackgroundOutputSurvivesACutStream(t *testing.T) {
	t.Parallel()
	r := newRuntime(t)
	var mu sync.Mutex
	rounds := 0
	docker.SetLoseTail(r, func(round int, stdout, stderr io.Writer) (io.Writer, io.Writer) {
		mu.Lock()
		rounds = max(rounds, round+1)
		mu.Unlock()
		switch round {
		case 0:
			return &cutWriter{w: stdout, keep: 3}, &cutWriter{w: stderr, keep: 5}
		case 1:
			return stdout, &cutWriter{w: stderr, keep: 4}
		}
		return stdout, stderr
	})
	c := sandbox.NewClient(r)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sb := create(ctx, t, c, sandbox.CreateOptions{})
	errLine := strings.Repeat("bind: address already in use; ", 40)
	var out, errb bytes.Buffer
	p, err := sb.Start(ctx, sandbox.Command{
		Shell:  "printf 'the output'; sleep 0.3; printf '%s' \"$E\" >&2; exit 7",
		Env:    map[string]string{"E": errLine},
		Stdout: &out, Stderr: &errb,
	})
	require.NoError(t, err)
	defer p.Close()
	res, err := p.Wait(ctx)
	require.NoError(t, err)
	assert.Equal(t, 7, res.ExitCode)
	assert.Equal(t, "the output", out.String())
	assert.Equal(t, errLine, errb.String())
	mu.Lock()
	defer mu.Unlock()
	assert.GreaterOrEqual(t, rounds, 3, "the cut streams were not followed again")
}

// An Exec's exec stays alive until the client has every byte of its
// output: the wrapper writes an end mark on each stream and exits only
// once the client, having seen both, acknowledges. The engine drains an
// exec's streams for a bounded time after it exits; with the exec still
// running, nothing can be cut.
func TestExecAwaitsTheClientBeforeExiting(t *testing.T) {
	t.Parallel()
	r := newRuntime(t)
	var mu sync.Mutex
	var calls []bool
	docker.SetBeforeAck(r, func(running bool) {
		mu.Lock()
		calls = append(calls, running)
		mu.Unlock()
	})
	c := sandbox.NewClient(r)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sb := create(ctx, t, c, sandbox.CreateOptions{})
	res, err := sb.Exec(ctx, sandbox.Command{Shell: "printf out; printf 'the last words' >&2; exit 3"})
	require.NoError(t, err)
	assert.Equal(t, 3, res.ExitCode)
	assert.Equal(t, "out", string(res.Stdout))
	assert.Equal(t, "the last words", string(res.Stderr))
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, []bool{true}, calls, "the exec had exited before the client acknowledged its output (or no end marks came)")
	// With stdin, the exec's stdin is the command's: no marks, no wait.
	calls = nil
	mu.Unlock()
	res, err = sb.Exec(ctx, sandbox.Command{Args: []string{"cat"}, Stdin: strings.NewReader("in")})
	mu.Lock()
	require.NoError(t, err)
	assert.Equal(t, "in", string(res.Stdout))
	assert.Empty(t, calls)
}
