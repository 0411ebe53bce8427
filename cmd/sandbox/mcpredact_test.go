package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/sandboxkit/sandbox/run"
)

// fakeLogs is a run's output as run.Run.ReadLogs reads it: up to max bytes
// from offset, whole lines only unless the run is done and the read
// reaches the end, or a line is longer than max.
type fakeLogs struct {
	out  []byte
	done bool
}

func (f *fakeLogs) read(_ context.Context, offset int64, max int) (run.Chunk, error) {
	if max <= 0 {
		max = run.DefaultLogBytes
	}
	max = min(max, run.MaxLogBytes)
	var data []byte
	if offset < int64(len(f.out)) {
		data = f.out[offset:min(int(offset)+max, len(f.out))]
	}
	n := len(data)
	tail := n - (bytes.LastIndexByte(data, '\n') + 1)
	eof := f.done && n < max
	next := offset + int64(n)
	if !eof && tail > 0 && (tail < n || n < max) {
		next -= int64(tail)
		data = data[:n-tail]
	}
	return run.Chunk{Data: append([]byte(nil), data...), Next: next, EOF: eof}, nil
}

// TestRedactedLogsPaging checks run_logs' paging against outputs holding
// secrets at every position: read in order with every page size, pages
// add up to the whole output redacted, none shows 2 bytes of a secret,
// from any offset either; and when the output grows a byte at a time
// while it is polled, no poll shows part of a secret being written.
func TestRedactedLogsPaging(t *testing.T) {
	t.Parallel()
	const pem = "-----BEGIN KEY-----\nzzqq77pp99\n-----END KEY-----"
	secrets := map[string]string{"K": testSecret, "PEM": pem}
	s := &mcpServer{secrets: newSecretSet(secrets)}
	redact := newRedactor(secrets)
	ctx := context.Background()
	outputs := []string{
		testSecret,
		"...." + testSecret + "....\n",
		"..\n" + testSecret + "\n" + testSecret + ".." + testSecret,
		strings.Repeat(".", 40) + testSecret + strings.Repeat(".", 40),
		"ab\n" + pem + "\n..\n",
		"\n" + pem,
		// Lines longer than the page and the margin, secrets inside and
		// across them: a margin reaching back over a line end must not
		// stop the paging.
		"hi\n" + strings.Repeat("x", 120) + "\nend\n",
		"ab\n" + strings.Repeat("x", 70) + testSecret + strings.Repeat("y", 70) + testSecret + "\n..",
		"\n" + strings.Repeat("x", 60) + pem + strings.Repeat("y", 60) + "\n",
	}
	for _, o := range outputs {
		whole := redact(o)
		for m := 1; m <= len(o)+2; m++ {
			f := &fakeLogs{out: []byte(o), done: true}
			var got strings.Builder
			var off int64
			for i := 0; ; i++ {
				lg, err := s.redactedLogs(ctx, f.read, off, m)
				if err != nil {
					t.Fatal(err)
				}
				if sh := showsPart(lg.Output, testSecret, pem); sh != "" {
					t.Fatalf("output %q, max_bytes %d, offset %d: page %q shows %q of a secret", o, m, off, lg.Output, sh)
				}
				got.WriteString(lg.Output)
				if lg.Done {
					break
				}
				if lg.Next <= off || i > 10*len(o) {
					t.Fatalf("output %q, max_bytes %d: no progress from offset %d (next %d)", o, m, off, lg.Next)
				}
				off = lg.Next
			}
			if got.String() != whole {
				t.Errorf("output %q, max_bytes %d: pages add up to %q, want %q", o, m, got.String(), whole)
			}
			for off := range int64(len(o)) + 1 {
				lg, err := s.redactedLogs(ctx, f.read, off, m)
				if err != nil {
					t.Fatal(err)
				}
				if sh := showsPart(lg.Output, testSecret, pem); sh != "" {
					t.Errorf("output %q, offset %d, max_bytes %d: %q shows %q of a secret", o, off, m, lg.Output, sh)
				}
			}
		}
		// The output grows a byte at a time, polled after each.
		for _, m := range []int{1, 3, 8, 64} {
			f := &fakeLogs{}
			var got strings.Builder
			var off int64
			for n := 0; n <= len(o); n++ {
				f.out = []byte(o[:n])
				f.done = n == len(o)
				for {
					lg, err := s.redactedLogs(ctx, f.read, off, m)
					if err != nil {
						t.Fatal(err)
					}
					if sh := showsPart(lg.Output, testSecret, pem); sh != "" {
						t.Fatalf("output %q written up to %d, max_bytes %d: %q shows %q of a secret", o, n, m, lg.Output, sh)
					}
					got.WriteString(lg.Output)
					if lg.Next == off || lg.Done {
						off = lg.Next
						break
					}
					off = lg.Next
				}
			}
			if got.String() != whole {
				t.Errorf("output %q grown a byte at a time, max_bytes %d: polls add up to %q, want %q", o, m, got.String(), whole)
			}
		}
	}
}
