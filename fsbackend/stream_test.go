package fsbackend

import (
	"bytes"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandboxkit/sandbox/backend"

	"github.com/stretchr/testify/require"
)

// streamRecorder is an ExecuteRequest.Stream that records what it is given
// and closes first when the first write arrives.
type streamRecorder struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	once  sync.Once
	first chan struct{}
}

func (s *streamRecorder) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.buf.Write(p)
	s.once.Do(func() { close(s.first) })
	return len(p), nil
}

func (s *streamRecorder) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String()
}

// TestExecuteStream: a command's output reaches ExecuteRequest.Stream while
// the command runs (the command waits for a file the test writes only after
// the first output arrived, so a stream delivered at exit would time it
// out), both streams go to it, redacted, and the result is filled in as
// without a stream.
func TestExecuteStream(t *testing.T) {
	t.Parallel()
	opts := Options{AllowExecute: true, SecretEnv: map[string]string{"API_TOKEN": "tok-streamed-123"}}
	for name, mk := range envs(t, opts) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := mk(t)
			rec := &streamRecorder{first: make(chan struct{})}
			wrote := make(chan error, 1)
			go func() {
				select {
				case <-rec.first:
				case <-time.After(20 * time.Second):
					wrote <- nil
					return
				}
				r, err := e.b.Write(ctx, &backend.WriteRequest{Path: "go.flag", Content: "go"})
				if err == nil && r.Error != nil {
					err = r.Error
				}
				wrote <- err
			}()
			r, err := e.b.Execute(ctx, &backend.ExecuteRequest{
				Command: `echo "started $API_TOKEN"; i=0; while [ ! -e go.flag ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done; [ -e go.flag ] && echo finished >&2`,
				Timeout: 40 * time.Second,
				Stream:  rec,
			})
			require.NoError(t, err)
			require.NoError(t, <-wrote)
			require.Nil(t, r.Error)
			require.False(t, r.TimedOut)
			require.Equal(t, 0, r.ExitCode, "the command saw the flag written after its first output: %q", r.Output)
			require.Equal(t, "started [REDACTED]\nfinished\n", r.Output)
			got := rec.String()
			require.Contains(t, got, "started [REDACTED]\n")
			require.Contains(t, got, "finished\n")
			require.NotContains(t, got, "tok-streamed-123")
			require.Equal(t, len(r.Output), len(got), "both streams, nothing else: %q", got)
			require.True(t, strings.HasPrefix(got, "started"), "in order: %q", got)
		})
	}
}
