package local

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"golang.org/x/sys/cpu"

	"github.com/sandboxkit/sandbox"
)

// TestPastaFailureFailsCreate: Create no longer waits for pasta to finish
// its start, so a pasta that ends before the namespace is configured must
// still fail the Create (naming the isolated network), leave no sandbox
// and no agent behind.
func TestPastaFailureFailsCreate(t *testing.T) {
	dir := t.TempDir()
	fake := filepath.Join(dir, "pasta")
	if err := os.WriteFile(fake, []byte("#!/bin/sh\necho 'fake pasta: refusing' >&2\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	saved := lookPasta
	lookPasta = func() string { return fake }
	t.Cleanup(func() { lookPasta = saved })
	ctx := context.Background()
	c := nsClient(t)
	sb, err := c.Create(ctx, sandbox.CreateOptions{})
	if err == nil {
		_ = sb.Destroy(ctx)
		t.Fatal("Create succeeded with a pasta that exits at once")
	}
	if !strings.Contains(err.Error(), "isolated network") {
		t.Errorf("Create: %v, want an error naming the isolated network", err)
	}
	for info, err := range c.List(ctx, sandbox.ListOptions{}) {
		if err != nil {
			t.Fatal(err)
		}
		t.Errorf("a failed Create left sandbox %s (%s)", info.ID, info.State)
	}
}

// TestPastaBinaryPrefersAVX2Build: on an x86-64 host with AVX2 the
// spawner runs pasta's AVX2 build directly when it is installed beside
// pasta (and executable), instead of pasta, which would exec it itself;
// in every other case pasta.
func TestPastaBinaryPrefersAVX2Build(t *testing.T) {
	dir := t.TempDir()
	pasta := filepath.Join(dir, "pasta")
	if err := os.WriteFile(pasta, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if got := pastaBinary(pasta); got != pasta {
		t.Fatalf("without an AVX2 build: %q, want %q", got, pasta)
	}
	if err := os.WriteFile(pasta+".avx2", []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := pastaBinary(pasta); got != pasta {
		t.Fatalf("with a non-executable AVX2 build: %q, want %q", got, pasta)
	}
	if err := os.Chmod(pasta+".avx2", 0o755); err != nil {
		t.Fatal(err)
	}
	want := pasta
	if runtime.GOARCH == "amd64" && cpu.X86.HasAVX2 {
		want = pasta + ".avx2"
	}
	if got := pastaBinary(pasta); got != want {
		t.Fatalf("with an AVX2 build: %q, want %q (AVX2: %v)", got, want, cpu.X86.HasAVX2)
	}
}
