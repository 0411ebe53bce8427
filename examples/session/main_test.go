package main

import (
	"os/exec"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The example must say what happens: a second manager adopts the sandbox
// the first one created (it did not create it), the two turns share it,
// and the runaway program is ended by its timeout.
func TestSessionExample(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("the example runs Python on the local provider: python3 is not installed")
	}
	// Its own root: a sandbox is adopted by its label, so another run of
	// this example on the machine (another checkout's tests) sharing the
	// default root could adopt this one's sandbox and end it.
	var out strings.Builder
	if err := run(&out, "local://"+t.TempDir()); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	for _, want := range []string{
		": wrote state\n",
		": turn 1 was here\n",
		"runaway: timed out=true by command",
		"(same sandbox: true, adopted: true, created by this manager: false)\n",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}
