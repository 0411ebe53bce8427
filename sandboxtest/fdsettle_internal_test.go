package sandboxtest

import (
	"context"
	"os"
	"runtime"
	"testing"
	"time"
)

// fdsSettle is what tells a relay that leaks a descriptor per connection
// from a neighbour that held some of its own while the count was taken: a
// leak in every round fails, a surplus in the first round only does not.
func TestFdsSettleTellsALeakFromANeighbour(t *testing.T) {
	if _, ok := openFDs(); !ok {
		t.Skipf("needs /proc/self/fd, not readable on %s", runtime.GOOS)
	}
	var held []*os.File
	t.Cleanup(func() {
		for _, f := range held {
			f.Close()
		}
	})
	// open keeps n more descriptors open until the test ends.
	open := func(t *testing.T, n int) {
		for range n {
			r, w, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			held = append(held, r, w)
		}
	}
	ctx := context.Background()
	const wait = 200 * time.Millisecond

	t.Run("clean", func(t *testing.T) {
		s := fdsSettle(ctx, t, wait, func(context.Context) {})
		if !s.checked() || !s.ok || s.rounds != 1 {
			t.Errorf("a round that leaves nothing: %+v, want ok after one round", s)
		}
	})
	t.Run("leak", func(t *testing.T) {
		rounds := 0
		s := fdsSettle(ctx, quiet{}, wait, func(context.Context) {
			rounds++
			open(t, concFDSlack) // two descriptors a pipe: twice the slack
		})
		if !s.checked() || s.ok || s.rounds != 2 || rounds != 2 {
			t.Errorf("a round that leaks each time: %+v after %d rounds, want not ok after two", s, rounds)
		}
		if s.first == "" {
			t.Errorf("the first round's counts are not kept: %v", s)
		}
	})
	t.Run("neighbour", func(t *testing.T) {
		rounds := 0
		s := fdsSettle(ctx, quiet{}, wait, func(context.Context) {
			rounds++
			if rounds == 1 {
				open(t, concFDSlack)
			}
		})
		if !s.checked() || !s.ok || s.rounds != 2 {
			t.Errorf("a surplus in the first round only: %+v, want ok after two rounds", s)
		}
	})
	t.Run("closed within the wait", func(t *testing.T) {
		s := fdsSettle(ctx, quiet{}, 5*time.Second, func(context.Context) {
			var fs []*os.File
			for range concFDSlack {
				r, w, err := os.Pipe()
				if err != nil {
					t.Fatal(err)
				}
				fs = append(fs, r, w)
			}
			time.AfterFunc(100*time.Millisecond, func() {
				for _, f := range fs {
					f.Close()
				}
			})
		})
		if !s.ok || s.rounds != 1 {
			t.Errorf("descriptors closed soon after the round: %+v, want ok after one round", s)
		}
	})
	// A leak of one kind is not hidden by descriptors of another kind
	// closing meanwhile (a neighbour's files): the total comes back, the
	// kind that leaked does not, and the round does not count as settled.
	t.Run("leak hidden by another kind", func(t *testing.T) {
		var files []*os.File
		for range 3 * concFDSlack {
			f, err := os.Open(os.DevNull)
			if err != nil {
				t.Fatal(err)
			}
			files = append(files, f)
		}
		t.Cleanup(func() {
			for _, f := range files {
				f.Close()
			}
		})
		rounds := 0
		s := fdsSettle(ctx, quiet{}, wait, func(context.Context) {
			rounds++
			open(t, concFDSlack) // 2×slack pipe ends
			if rounds == 1 {
				for _, f := range files {
					f.Close() // 3×slack files
				}
			}
		})
		if s.ok || rounds != 2 {
			t.Errorf("pipes leaked while more files closed: %+v after %d rounds, want not ok after two", s, rounds)
		}
	})
}

// quiet is a reporter that drops its logs and has not failed: the rounds
// fdsSettle logs are expected here.
type quiet struct{}

func (quiet) Helper()             {}
func (quiet) Logf(string, ...any) {}
func (quiet) Failed() bool        { return false }
