package run

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandboxkit/sandbox"
)

const hostileSecret = "SUPERSECRETVALUE0123"

// hostileSandbox is a sandbox on the host runtime with hostileSecret as a
// secret environment value.
func hostileSandbox(t *testing.T) *sandbox.Sandbox {
	t.Helper()
	c := sandbox.NewClient(newHostRuntime(t))
	t.Cleanup(func() { c.Close() })
	sb, err := c.Create(testCtx(t), sandbox.CreateOptions{SecretEnv: map[string]string{"TOKEN": hostileSecret}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sb.Destroy(context.Background()) })
	return sb
}

// A run's code writes its own admission record with the sandbox's secret
// in it: the error that reports the record malformed does not show it.
func TestForgedRecordNotQuoted(t *testing.T) {
	t.Parallel()
	sb := hostileSandbox(t)
	ctx := testCtx(t)
	// Start may read the forged record already, or a later Status does.
	// The command runs until a stop file appears (or its sandbox's home is
	// gone): with its record refused there may be no handle to kill it by,
	// and the host runtime ends no process when it destroys a sandbox. The
	// test ends it, and waits for its wrapper to finish writing into the
	// home, before the home is removed (else the removal can race the
	// wrapper's last record: "directory not empty").
	t.Cleanup(func() { stopHostileRun(t, sb) })
	r, err := Start(ctx, sb, Request{ID: "adm", Command: []string{"sh", "-c",
		`printf '1 %s\n' "$TOKEN" > "$SANDBOXKIT_RUN_DIR/admission"; echo ready; while [ -d "$SANDBOXKIT_RUN_DIR" ] && [ ! -e "$HOME/adm.stop" ]; do sleep 0.05; done`}})
	if err == nil {
		cleanupKill(t, r)
		for err == nil {
			time.Sleep(20 * time.Millisecond)
			_, err = r.Status(ctx)
		}
	}
	if !errors.Is(err, ErrBadRecord) {
		t.Fatalf("a run whose admission record was forged: %v, want ErrBadRecord", err)
	}
	if strings.Contains(err.Error(), hostileSecret) {
		t.Fatalf("the error shows the secret: %v", err)
	}
}

// stopHostileRun writes the stop file TestForgedRecordNotQuoted's command
// waits for, then waits (up to 10 s) until no process of the host has the
// sandbox's runs directory in its environment: the run's command and
// wrapper have ended.
func stopHostileRun(t *testing.T, sb *sandbox.Sandbox) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := sb.WriteFile(ctx, "adm.stop", nil); err != nil {
		t.Logf("stop file: %v", err)
		return
	}
	mark := []byte("SANDBOXKIT_RUN_DIR=" + path.Join(sb.Info().Home, ".sandboxkit", "runs") + "/")
	for ctx.Err() == nil {
		running := false
		ps, _ := filepath.Glob("/proc/[0-9]*/environ")
		for _, p := range ps {
			if b, err := os.ReadFile(p); err == nil && bytes.Contains(b, mark) {
				running = true
				break
			}
		}
		if !running {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("the run's processes still run 10 s after the stop file")
}

// A run's code plants a request record in a directory of its own: List
// returns no id that is not the one its directory is named for.
func TestListIgnoresPlantedRecords(t *testing.T) {
	t.Parallel()
	sb := hostileSandbox(t)
	r := start(t, sb, Request{ID: "lister", Command: []string{"sh", "-c",
		`d=$(dirname "$SANDBOXKIT_RUN_DIR")/bzzzz; mkdir -p "$d" && printf '%064d %s\n' 0 "$(printf %s "$TOKEN" | od -An -tx1 | tr -d ' \n')" > "$d/request"`}})
	waitDone(t, r)
	ids, err := List(testCtx(t), sb)
	if err != nil {
		t.Fatal(err)
	}
	if len(ids) != 1 || ids[0] != "lister" {
		t.Fatalf("List = %q, want only the real run", ids)
	}
}

// A run's code writes an exit record of 0 and goes on running: the run is
// still running (its wrapper lives), and Kill ends it.
func TestForgedExitRecord(t *testing.T) {
	t.Parallel()
	sb := hostileSandbox(t)
	ctx := testCtx(t)
	r := start(t, sb, Request{ID: "forge", Command: []string{"sh", "-c",
		`printf '0\n' > "$SANDBOXKIT_RUN_DIR/exit"; echo ready; exec sleep 300`}})
	waitReady(t, r)
	st, err := r.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.State != Running {
		t.Fatalf("a run whose code wrote an exit record and sleeps: %+v, want running", st)
	}
	wctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	if st, err := r.Wait(wctx); err == nil {
		t.Fatalf("Wait returned %+v for a run that still runs", st)
	}
	if err := r.Kill(ctx); err != nil {
		t.Fatal(err)
	}
	if _, n := procs(t, sb, r); n != 0 {
		t.Fatalf("Kill returned, but the run's command still runs (%d sleep processes)", n)
	}
	st = waitDone(t, r)
	if !st.Killed {
		t.Errorf("after Kill: %+v, want killed", st)
	}
}

// A page of ReadLogs ends, and a tail of Logs starts, where no secret runs
// across: pages of any size reassemble into the output redacted whole, and
// a tail never shows the end of a secret it cut.
func TestLogsNeverCutASecret(t *testing.T) {
	t.Parallel()
	sb := hostileSandbox(t)
	ctx := testCtx(t)
	r := start(t, sb, Request{ID: "split", Command: []string{"sh", "-c", `printf '%s%s\n' xxxxxxxxxx "$TOKEN"; printf 'token=%s\n' "$TOKEN"`}})
	waitDone(t, r)
	const want = "xxxxxxxxxx[REDACTED]\ntoken=[REDACTED]\n"
	for _, max := range []int{3, 7, 11, 16, 25, 40} {
		var got strings.Builder
		var off int64
		for range 200 {
			ch, err := r.ReadLogs(ctx, off, max)
			if err != nil {
				t.Fatal(err)
			}
			got.Write(ch.Data)
			if ch.Next <= off && !ch.EOF {
				t.Fatalf("max %d: ReadLogs stalled at %d", max, off)
			}
			off = ch.Next
			if ch.EOF {
				break
			}
		}
		if got.String() != want {
			t.Errorf("max %d: pages reassemble into %q, want %q", max, got.String(), want)
		}
	}
	for max := 1; max <= 40; max++ {
		logs, err := r.Logs(ctx, max)
		if err != nil {
			t.Fatal(err)
		}
		for i := 2; i < len(hostileSecret); i++ {
			if strings.Contains(string(logs), hostileSecret[i:]) && len(hostileSecret[i:]) >= 4 {
				t.Fatalf("Logs(%d) = %q shows the end of the secret", max, logs)
			}
		}
	}
}
