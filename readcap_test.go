package sandbox_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/driver"
	"github.com/sandboxkit/sandbox/provider/memory"
)

func TestReadFileDefaultCap(t *testing.T) {
	t.Parallel()
	rt := memory.New()
	c := sandbox.NewClient(rt)
	if c.MaxReadFile() != sandbox.DefaultMaxReadFile || sandbox.DefaultMaxReadFile != 10<<20 {
		t.Fatalf("default cap %d, want 10 MiB", c.MaxReadFile())
	}
	ctx := context.Background()
	sb, err := c.Create(ctx, sandbox.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	big := make([]byte, sandbox.DefaultMaxReadFile+1)
	if err := sb.WriteFile(ctx, "big", big); err != nil {
		t.Fatal(err)
	}
	before := len(rt.CallsOf(memory.OpDownload))
	_, err = sb.ReadFile(ctx, "big")
	if sandbox.CodeOf(err) != sandbox.ResourceExhausted || !errors.Is(err, sandbox.ErrLimit) || !strings.Contains(err.Error(), "10485761 bytes") {
		t.Fatalf("ReadFile of 10 MiB + 1: %v", err)
	}
	if n := len(rt.CallsOf(memory.OpDownload)) - before; n != 0 {
		t.Fatalf("the oversized file was downloaded %d times; Stat should refuse it first", n)
	}
	if err := sb.WriteFile(ctx, "big", big[:sandbox.DefaultMaxReadFile]); err != nil {
		t.Fatal(err)
	}
	if got, err := sb.ReadFile(ctx, "big"); err != nil || len(got) != sandbox.DefaultMaxReadFile {
		t.Fatalf("ReadFile at the cap: %d %v", len(got), err)
	}
}

func TestReadFileCapConfigurable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, tc := range []struct {
		cap    int64
		wantOK bool
	}{{0, true}, {-1, true}, {99, false}, {100, true}} {
		c := sandbox.NewClient(memory.New())
		c = sandbox.NewClient(c.Runtime(), sandbox.WithMaxReadFile(tc.cap))
		sb, err := c.Create(ctx, sandbox.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if err := sb.WriteFile(ctx, "f", make([]byte, 100)); err != nil {
			t.Fatal(err)
		}
		_, err = sb.ReadFile(ctx, "f")
		if (err == nil) != tc.wantOK {
			t.Fatalf("cap %d: ReadFile of 100 bytes: %v", tc.cap, err)
		}
	}
}

// growingRuntime reports a stale, small size from Stat, as a file that
// grows between the Stat and the transfer would.
type growingRuntime struct{ driver.Runtime }

func (g growingRuntime) Stat(ctx context.Context, id, p string) (driver.FileInfo, error) {
	fi, err := g.Runtime.Stat(ctx, id, p)
	fi.Size = 1
	return fi, err
}

func TestReadFileCapEnforcedWhileReading(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := sandbox.NewClient(growingRuntime{memory.New()}, sandbox.WithMaxReadFile(1000))
	sb, err := c.Create(ctx, sandbox.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := sb.WriteFile(ctx, "f", bytes.Repeat([]byte("x"), 5000)); err != nil {
		t.Fatal(err)
	}
	got, err := sb.ReadFile(ctx, "f")
	if !errors.Is(err, sandbox.ErrLimit) || !strings.Contains(err.Error(), "at least 1001 bytes") || got != nil {
		t.Fatalf("ReadFile past the cap: %d bytes, %v", len(got), err)
	}
}
