package daytona_test

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"testing"
	"time"

	"github.com/sandboxkit/sandbox"
)

// A Stdin of several chunks reaches the command byte for byte. Not in
// parallel: its 9 MiB keep a CPU busy under -race, so beside the other
// tests it gains nothing and its one-minute bound gets tight.
func TestExecLargeStdin(t *testing.T) {
	e := newEnv(t, nil)
	sb := e.create(t)
	data := make([]byte, 9<<20+12345) // three chunks
	_, _ = rand.Read(data)
	sum := sha256.Sum256(data)
	res, err := sb.Exec(ctxT(t), sandbox.Command{Shell: "sha256sum | cut -d' ' -f1", Stdin: &slowReader{data: data}})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(res.Stdout), hex.EncodeToString(sum[:])+"\n"; got != want || res.ExitCode != 0 {
		t.Fatalf("sha256 of stdin %q (exit %d, stderr %q), want %q", got, res.ExitCode, res.Stderr, want)
	}
}

// A Stdin that arrives in pieces with pauses between them is delivered as
// it comes, in order, and its end ends the command's input.
func TestExecStdinInPieces(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	sb := e.create(t)
	pr, pw := io.Pipe()
	go func() {
		for _, s := range []string{"one\n", "two\n", "three\n"} {
			_, _ = pw.Write([]byte(s))
			time.Sleep(100 * time.Millisecond)
		}
		pw.Close()
	}()
	res, err := sb.Exec(ctxT(t), sandbox.Command{Args: []string{"cat"}, Stdin: pr})
	if err != nil || string(res.Stdout) != "one\ntwo\nthree\n" || res.ExitCode != 0 {
		t.Fatalf("cat of a piecewise stdin: %+v, %v", res, err)
	}
}

// slowReader returns data in reads of at most 64 KiB.
type slowReader struct{ data []byte }

func (r *slowReader) Read(p []byte) (int, error) {
	if len(r.data) == 0 {
		return 0, io.EOF
	}
	n := copy(p[:min(len(p), 64<<10)], r.data)
	r.data = r.data[n:]
	return n, nil
}
