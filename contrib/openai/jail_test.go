package openai

import (
	"context"
	"os"
	"testing"

	"github.com/openai/openai-go/v3/responses"
	"github.com/sandboxkit/sandbox/sandboxtest"
	"github.com/stretchr/testify/require"
)

// swapRounds is how many calls TestDeleteFileParentSwapRace makes while
// the racer swaps: 400 in a full run (sandboxtest.FullEnv=1, as CI sets
// it), a quarter in a plain run, a tenth under -short. Each is the same
// race again: fewer give an escape fewer chances to show, never a check
// that cannot fail, and CI still makes them all. (The racer is a busy
// shell loop: the 400 calls took 11 s of the test's CPU.)
func swapRounds() int {
	switch {
	case os.Getenv(sandboxtest.FullEnv) == "1":
		return 400
	case testing.Short():
		return 40
	}
	return 100
}

// A legacy local_shell call whose working_directory does not exist (or is
// a file) is the model's mistake, but it ends the loop with a Go error.
func TestLocalShellBadWorkingDirectory(t *testing.T) {
	t.Parallel()
	for name, e := range envs(t) {
		t.Run(name, func(t *testing.T) {
			tools := toolsFor(t, e, Options{})
			e.sh(t, "mkdir -p "+e.ws+" && : > "+e.ws+"/afile")
			for _, wd := range []string{"no/such/dir", "/no/such/dir", "afile"} {
				call := responses.ResponseOutputItemLocalShellCall{CallID: "c1",
					Action: responses.ResponseOutputItemLocalShellCallAction{Command: []string{"pwd"}, WorkingDirectory: wd}}
				out, err := tools.LocalShell(context.Background(), call)
				require.NoError(t, err, "working_directory %q: the model's mistake ends the loop", wd)
				require.Contains(t, out.Output, `"exit_code":127`, "working_directory %q", wd)
				require.NotContains(t, out.Output, e.ws, "no host path in the output")
				require.Contains(t, out.Output, "working directory", "the output says what was wrong")
			}
		})
	}
}

// delete_file checks the parent through the jail (Ls), then removes the
// entry with the unjailed Sandbox.Remove: a parent swapped for a symbolic
// link between the two removes a file outside the workspace.
func TestDeleteFileParentSwapRace(t *testing.T) {
	t.Parallel()
	for name, e := range envs(t) {
		if name != "local" {
			continue
		}
		t.Run(name, func(t *testing.T) {
			tools := toolsFor(t, e, Options{})
			e.sh(t, "mkdir -p "+e.ws+" && printf 'keep\\n' > "+e.out+"/victim.txt")
			flip := `cd ` + e.ws + ` && (while [ ! -e stop ]; do mkdir -p dreal; : > dreal/victim.txt; rm -f d; mv -T dreal d; mv -T d dreal; ln -s ` + e.out + ` d; done) >/dev/null 2>&1 &`
			e.sh(t, flip)
			defer e.sh(t, "touch "+e.ws+"/stop")
			goErrs := 0
			for i := 0; i < swapRounds(); i++ {
				_, err := tools.ApplyPatch(context.Background(), patch("c", "delete_file", "d/victim.txt", ""))
				if err != nil {
					goErrs++
					if goErrs == 1 {
						t.Logf("Go error (ends the loop): %v", err)
					}
				}
				if !e.exists(t, e.out+"/victim.txt") {
					t.Fatalf("after %d calls: %s/victim.txt, outside the workspace, was deleted (%d Go errors)", i+1, e.out, goErrs)
				}
			}
			t.Logf("held; %d Go errors", goErrs)
		})
	}
}
