//go:build linux

package sandbox_test

import (
	"context"
	"encoding/json"
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/provider/local"
)

// TestRunTaskLocal is the main job on local:// with a real python3: two
// CSVs in, a Python program, a JSON out; then a Python exception, a
// signal and a timeout as *ExitError.
func TestRunTaskLocal(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 is not installed on this machine")
	}
	ctx := context.Background()
	rt, err := local.New(local.WithRoot(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	client := sandbox.NewClient(rt)
	defer client.Close()
	sb, err := client.Create(ctx, sandbox.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Destroy(ctx)

	const stats = `import csv, json
rows = [r for f in ("a.csv", "b.csv") for r in csv.DictReader(open(f))]
json.dump({"rows": len(rows), "sum": sum(int(r["v"]) for r in rows)}, open("out/stats.json", "w"))
`
	res, err := sb.Run(ctx, sandbox.Command{Shell: "mkdir -p out && python3 stats.py", Dir: "job"}, sandbox.RunOptions{
		Files:   []sandbox.File{{Path: "a.csv", Data: []byte("id,v\n1,2\n2,3\n")}, {Path: "b.csv", Data: []byte("id,v\n3,4\n")}, {Path: "stats.py", Data: []byte(stats)}},
		Outputs: []string{"out/stats.json"},
	})
	if err != nil {
		t.Fatal(err)
	}
	var got struct{ Rows, Sum int }
	if err := json.Unmarshal(res.Files["out/stats.json"], &got); err != nil || got.Rows != 3 || got.Sum != 9 {
		t.Fatalf("stats.json %q: %+v, %v", res.Files["out/stats.json"], got, err)
	}

	_, err = sb.Output(ctx, sandbox.Command{Args: []string{"python3", "-c", "import nosuchmodule"}})
	var ee *sandbox.ExitError
	if !errors.As(err, &ee) || ee.ExitCode != 1 || !strings.Contains(err.Error(), "ModuleNotFoundError") || strings.Contains(err.Error(), "\n") {
		t.Errorf("python exception: %v", err)
	}
	if !strings.Contains(string(ee.Stderr), "Traceback") {
		t.Errorf("stderr tail %q", ee.Stderr)
	}

	_, err = sb.Output(ctx, sandbox.Command{Args: []string{"python3", "-c", "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"}})
	if !errors.As(err, &ee) || ee.ExitCode != -1 || (client.Capabilities().ReportsSignal && ee.Signal != 9) {
		t.Errorf("signal: %v (%+v)", err, ee)
	}

	_, err = sb.Output(ctx, sandbox.Command{Args: []string{"python3", "-c", "import time; time.sleep(30)"}, Timeout: 300 * time.Millisecond})
	if !errors.As(err, &ee) || !ee.TimedOut || sandbox.CodeOf(err) != sandbox.DeadlineExceeded {
		t.Errorf("timeout: %v (%+v)", err, ee)
	}
}
