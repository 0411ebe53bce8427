package e2b_test

import (
	"context"
	"testing"
	"time"

	"github.com/sandboxkit/sandbox"
)

func TestSmoke(t *testing.T) {
	e := newEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sb, err := e.client.Create(ctx, sandbox.CreateOptions{Labels: map[string]string{"a": "b"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("info %+v", sb.Info())
	res, err := sb.Exec(ctx, sandbox.Command{Shell: "echo hi; echo err >&2; exit 3"})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("res %d %q %q", res.ExitCode, res.Stdout, res.Stderr)
	if err := sb.WriteFile(ctx, "x/y.txt", []byte("hello")); err != nil {
		t.Fatal(err)
	}
	b, err := sb.ReadFile(ctx, "x/y.txt")
	t.Logf("read %q %v", b, err)
	list, err := sb.ReadDir(ctx, "x")
	t.Logf("list %+v %v", list, err)
	if err := sb.Destroy(ctx); err != nil {
		t.Fatal(err)
	}
}
