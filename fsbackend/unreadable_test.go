package fsbackend

import (
	"testing"

	"github.com/sandboxkit/sandbox/backend"

	"github.com/stretchr/testify/require"
)

// TestUnreadableReported: grep and glob report each file and directory
// they cannot read (GrepResult.Unreadable, also in Skipped;
// GlobResult.Unreadable), never silently leave it out. A file with mode
// 000 and a directory with mode 000 or 400 (listed, not entered) were
// neither a match nor listed as skipped, while a grep of the file itself
// said permission_denied.
func TestUnreadableReported(t *testing.T) {
	t.Parallel()
	for name, mk := range badInputEnvs(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := mk(t)
			e.sh(t, "mkdir -p "+e.base+" && cd "+e.base+" && mkdir -p g/closed g/open g/nox && echo needle > g/nox/hidden.txt && echo needle > g/ok.txt && echo needle > g/noperm.txt && echo needle > g/closed/in.txt && echo needle > g/open/deep.txt && chmod 000 g/noperm.txt g/closed && chmod 400 g/nox")
			t.Cleanup(func() { e.try("chmod -R u+rwx " + e.base + "/g") })
			if e.try("cat " + e.base + "/g/noperm.txt") {
				t.Skipf("the sandbox user of %s reads a file with mode 000 (it is root or has CAP_DAC_OVERRIDE): no permission to deny", name)
			}
			g, err := e.b.Grep(ctx, &backend.GrepRequest{Pattern: "needle", Path: "g"})
			require.NoError(t, err)
			require.Nil(t, g.Error)
			require.Equal(t, []backend.GrepMatch{{Path: "g/ok.txt", Line: 1, Text: "needle"}, {Path: "g/open/deep.txt", Line: 1, Text: "needle"}}, g.Matches)
			require.Equal(t, []string{"g/closed/", "g/noperm.txt", "g/nox/"}, g.Unreadable)
			require.Equal(t, []string{"g/closed/", "g/noperm.txt", "g/nox/"}, g.Skipped)
			require.Contains(t, g.Text(), "[could not be read (permission denied or an I/O error): g/closed/, g/noperm.txt, g/nox/]")

			// From the root too, and a glob keeps only the files it would
			// search (a directory is reported whatever the glob).
			g, err = e.b.Grep(ctx, &backend.GrepRequest{Pattern: "needle", Glob: "**/ok.txt"})
			require.NoError(t, err)
			require.Nil(t, g.Error)
			require.Equal(t, []backend.GrepMatch{{Path: "g/ok.txt", Line: 1, Text: "needle"}}, g.Matches)
			require.Equal(t, []string{"g/closed/", "g/nox/"}, g.Unreadable)

			// The file or directory itself: an error, not an empty result.
			for _, p := range []string{"g/noperm.txt", "g/closed"} {
				g, err = e.b.Grep(ctx, &backend.GrepRequest{Pattern: "needle", Path: p})
				require.NoError(t, err)
				require.NotNil(t, g.Error, "grep %s: %+v", p, g)
				require.Equal(t, backend.CodePermissionDenied, g.Error.Code, "grep %s: %s", p, g.Error.Message)
			}

			// Glob lists what it can and names the directory it could
			// not open.
			gl, err := e.b.Glob(ctx, &backend.GlobRequest{Pattern: "**/*.txt", Path: "g"})
			require.NoError(t, err)
			require.Nil(t, gl.Error)
			var paths []string
			for _, f := range gl.Files {
				paths = append(paths, f.Path)
			}
			require.Equal(t, []string{"g/noperm.txt", "g/ok.txt", "g/open/deep.txt"}, paths)
			require.Equal(t, []string{"g/closed/", "g/nox/"}, gl.Unreadable)
			require.Contains(t, gl.Text(), "could not be read (permission denied or an I/O error): g/closed/")
		})
	}
}
