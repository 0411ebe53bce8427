package local

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

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
