package fsbackend

import (
	"context"
	"fmt"
	"os"
	"path"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/backend"
	"github.com/sandboxkit/sandbox/driver"
	"github.com/sandboxkit/sandbox/provider/e2b"
	"github.com/sandboxkit/sandbox/provider/e2b/e2bfake"
	"github.com/sandboxkit/sandbox/provider/local"
	"github.com/sandboxkit/sandbox/provider/local/localtest"
	"github.com/sandboxkit/sandbox/sandboxtest"

	"github.com/stretchr/testify/require"
)

// The adversarial tests play an agent that uses commands (execute) to
// rearrange the workspace under the file tools: swapping the workspace or a
// directory for a symbolic link, hard-linking outside files in, racing the
// tools, attacking the binary index, and planting FIFOs and huge sparse
// files. They run over provider/local at its best level (L4 where the host
// allows it), at L1 (where hard links across directories are allowed, as on
// images without Landlock), and over E2B's adapter talking to e2bfake.

// advEnv builds one environment; name says which.
type advEnv struct {
	name string
	make func(t *testing.T, opts Options) *env
	skip string // set: the environment is skipped, saying why
}

func advEnvs() []advEnv {
	return []advEnv{
		{name: "local", make: func(t *testing.T, opts Options) *env { return newLocalAt(t, opts) }},
		{name: "local-L1", make: func(t *testing.T, opts Options) *env { return newLocalAt(t, opts, local.WithIsolation(local.L1)) }},
		{name: "e2b", make: newE2B},
		{name: "local-shell", make: func(t *testing.T, opts Options) *env {
			e := newLocalAt(t, opts)
			e.shell = true
			e.b.shellOnly()
			return e
		}},
	}
}

// swapRacer is the command of a racer that, in its working directory,
// moves name to aside and puts a symbolic link to target in its place,
// holds that 3 ms, removes the link, moves aside back and holds that 3 ms,
// until stop exists or after 50,000 rounds; it then writes the number of
// rounds it made to stop+".rounds" (see checkRacer). It runs in Python where the
// sandbox has python3, a swap then being a few system calls; the shell
// loop otherwise forks mv, ln, sleep, rm, mv and sleep every round, which
// on a 2-core host kept a CPU busy for as long as the calls it raced took
// (and swapped more slowly).
func swapRacer(stop, name, aside, target string) string {
	q := strconv.Quote // a Go string literal of these paths is a Python one
	return `if command -v python3 >/dev/null 2>&1; then exec python3 - <<'EOF'
import os, time
stop, name, aside, target = ` + q(stop) + `, ` + q(name) + `, ` + q(aside) + `, ` + q(target) + `
rounds = 0
while rounds < 50000 and not os.path.lexists(stop):
    rounds += 1
    try:
        os.rename(name, aside)
        os.symlink(target, name)
    except OSError:
        pass
    time.sleep(0.003)
    for step in (lambda: os.unlink(name), lambda: os.rename(aside, name)):
        try:
            step()
        except OSError:
            pass
    time.sleep(0.003)
with open(stop + ".rounds", "w") as f:
    f.write(str(rounds))
EOF
fi
i=0
while [ ! -e ` + stop + ` ] && [ $i -lt 50000 ]; do
  mv ` + name + ` ` + aside + ` && ln -s ` + target + ` ` + name + `; sleep 0.003; rm -f ` + name + `; mv ` + aside + ` ` + name + `; sleep 0.003; i=$((i+1))
done
echo $i > ` + stop + `.rounds`
}

// checkRacer fails t unless the racer started by swapRacer with stop, now
// ended, made a swap: a racer that never ran would leave the race
// unchecked.
func checkRacer(t *testing.T, e *env, stop string) {
	t.Helper()
	if r := strings.TrimSpace(e.sh(t, "cat "+stop+".rounds 2>&1 || :")); r == "" || r == "0" || strings.Trim(r, "0123456789") != "" {
		t.Errorf("the swap racer made no round: %q", r)
	}
}

// forEach runs f over every adversarial environment, the environments in
// parallel.
func forEach(t *testing.T, opts Options, f func(t *testing.T, e *env)) {
	forEachEnv(t, opts, true, f)
}

// forEachEnv runs f over every adversarial environment, in parallel or one
// after another. A test whose sandbox command races the tools (busy,
// forking for as long as the calls take) runs its environments one after
// another: racers side by side slow each other's calls, which keeps every
// racer busy longer (under a load average of 60, four side by side had
// not ended after 18 minutes).
func forEachEnv(t *testing.T, opts Options, parallel bool, f func(t *testing.T, e *env)) {
	forEnvs(t, advEnvs(), opts, parallel, f)
}

// forEnvs is forEachEnv over the environments given; one with a skip
// reason is skipped with it.
func forEnvs(t *testing.T, list []advEnv, opts Options, parallel bool, f func(t *testing.T, e *env)) {
	for _, a := range list {
		t.Run(a.name, func(t *testing.T) {
			if a.skip != "" {
				t.Skip(a.skip)
			}
			if parallel {
				t.Parallel()
			}
			e := a.make(t, opts)
			t.Logf("isolation: %s", e.sb.Info().Isolation)
			f(t, e)
		})
	}
}

// newLocalAt is newLocal with provider options, off the network where
// the level allows it (localtest.Offline): no file tool needs one.
func newLocalAt(t *testing.T, opts Options, lopts ...local.Option) *env {
	t.Helper()
	rt, err := localtest.Offline(append([]local.Option{local.WithRoot(t.TempDir())}, lopts...)...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = rt.Close() })
	return newOver(t, rt, opts)
}

// newE2B returns a backend over E2B's adapter talking to e2bfake, which runs
// commands for real through provider/local.
func newE2B(t *testing.T, opts Options) *env {
	t.Helper()
	loc, err := localtest.Offline(local.WithRoot(t.TempDir()))
	require.NoError(t, err)
	t.Cleanup(func() { _ = loc.Close() })
	fake := e2bfake.New(loc)
	t.Cleanup(fake.Close)
	rt, err := e2b.New(e2b.WithAPIKey(fake.APIKey()), e2b.WithAPIURL(fake.APIURL()), e2b.WithSandboxURL(fake.SandboxURL()))
	require.NoError(t, err)
	return newOver(t, rt, opts)
}

func newOver(t *testing.T, rt driver.Runtime, opts Options) *env {
	t.Helper()
	c := sandbox.NewClient(rt)
	t.Cleanup(func() { _ = c.Close() })
	sb, err := c.Create(context.Background(), sandbox.CreateOptions{Timeout: 30 * time.Minute})
	require.NoError(t, err)
	t.Cleanup(func() { _ = sb.Destroy(context.Background()) })
	e := &env{sb: sb, opts: opts}
	home := strings.TrimSpace(e.sh(t, `printf '%s' "$HOME"`))
	if e.opts.BaseDir == "" {
		e.opts.BaseDir = home + "/workspace"
	}
	e.base, e.out = e.opts.BaseDir, home+"/outside"
	e.sh(t, "mkdir -p "+e.out+" && printf SECRET > "+e.out+"/secret.txt")
	e.b, err = New(sb, e.opts)
	require.NoError(t, err)
	t.Cleanup(func() { e.b.Close() })
	return e
}

// try runs a setup command and reports whether it succeeded.
func (e *env) try(line string) bool {
	res, err := e.sb.Exec(context.Background(), sandbox.Command{Shell: line})
	return err == nil && res.ExitCode == 0
}

// refusedAll checks that every file tool refuses p (or finds nothing) and
// that nothing outside was read or changed.
func refusedAll(t *testing.T, e *env, b *FilesystemBackend, p string) {
	t.Helper()
	r := readText(t, b, p)
	require.True(t, r.Error != nil, "read %s: %q", p, r.Content)
	rb, err := b.ReadBytes(ctx, &backend.ReadBytesRequest{Path: p})
	require.NoError(t, err)
	require.True(t, rb.Error != nil, "read bytes %s: %q", p, rb.Data)
	ed, err := b.Edit(ctx, &backend.EditRequest{Path: p, OldString: "SECRET", NewString: "PWNED"})
	require.NoError(t, err)
	require.True(t, ed.Error != nil, "edit %s", p)
	w, err := b.Write(ctx, &backend.WriteRequest{Path: p, Content: "PWNED"})
	require.NoError(t, err)
	require.True(t, w.Error != nil, "write %s", p)
	wb, err := b.WriteBytes(ctx, &backend.WriteBytesRequest{Path: p, Data: []byte{0, 'P'}})
	require.NoError(t, err)
	require.True(t, wb.Error != nil, "write bytes %s", p)
	gr, err := b.Grep(ctx, &backend.GrepRequest{Pattern: "SECRET"})
	if err == nil && gr.Error == nil {
		require.Empty(t, gr.Matches, "grep found the outside file's content")
	}
	all, err := b.GetFiles(ctx, &backend.GetFilesRequest{})
	if err == nil {
		for _, f := range all.Files {
			require.NotContains(t, string(f.Data), "SECRET", f.Path)
		}
	}
	require.Equal(t, "SECRET", e.sh(t, "cat "+e.out+"/secret.txt"), "the outside file is unchanged")
}

// requireReplacedGetFiles checks that GetFiles over a replaced workspace
// is a typed result the agent can read, not a Go error.
func requireReplacedGetFiles(t *testing.T, b *FilesystemBackend) {
	t.Helper()
	all, err := b.GetFiles(ctx, &backend.GetFilesRequest{})
	require.NoError(t, err, "get files of a replaced workspace")
	require.Equal(t, backend.CodeInvalidPath, codeOf(all.Error))
	require.Contains(t, all.Error.Text(), "replaced")
	require.Empty(t, all.Files)
}

func TestAdversarialWorkspaceSwap(t *testing.T) {
	t.Parallel()
	forEach(t, Options{AllowExecute: true}, func(t *testing.T, e *env) {
		// Before the first file tool call: execute's first contact pins the
		// workspace before the command can replace it.
		x, err := e.b.Execute(ctx, &backend.ExecuteRequest{Command: "cd .. && mv workspace ws_old && ln -s / workspace"})
		require.NoError(t, err)
		require.Equal(t, 0, x.ExitCode, x.Output)
		for _, b := range []*FilesystemBackend{e.b, e.reopen(t)} {
			r := readText(t, b, "/etc/passwd")
			require.Equal(t, backend.CodeInvalidPath, codeOf(r.Error), "read through a workspace swapped for / : %q", r.Content)
			require.Contains(t, r.Text(), "replaced")
			// A name no one else uses: at L1 the sandbox shares the
			// host's /tmp, where another program may own any short name.
			name := fmt.Sprintf("tmp/sbx-swap-%d-%d", os.Getpid(), time.Now().UnixNano())
			require.True(t, !e.try("test -e /"+name), "/%s exists before the write", name)
			w, err := b.Write(ctx, &backend.WriteRequest{Path: name, Content: "x"})
			require.NoError(t, err)
			require.Equal(t, backend.CodeInvalidPath, codeOf(w.Error))
			require.True(t, !e.try("test -e /"+name), "a write landed in /tmp")
			ls, err := b.Ls(ctx, &backend.LsRequest{Path: "/"})
			require.NoError(t, err)
			require.Equal(t, backend.CodeInvalidPath, codeOf(ls.Error), "ls of a swapped workspace: %s", ls.Text())
			gr, err := b.Grep(ctx, &backend.GrepRequest{Pattern: "root:", Path: "etc"})
			require.NoError(t, err)
			require.Equal(t, backend.CodeInvalidPath, codeOf(gr.Error))
			requireReplacedGetFiles(t, b)
		}

		// After first use: the swap is refused by this instance and by a
		// new one (the pin is persisted outside the workspace).
		parent := path.Dir(e.base)
		e.sh(t, "cd "+parent+" && rm workspace && mv ws_old workspace")
		write(t, e.b, "a.txt", "inside")
		e.sh(t, "cd "+parent+" && mv workspace ws_real && ln -s "+e.out+" workspace")
		for _, b := range []*FilesystemBackend{e.b, e.reopen(t)} {
			refusedAll(t, e, b, "secret.txt")
			requireReplacedGetFiles(t, b)
		}
		// Restored, the workspace works again.
		e.sh(t, "cd "+parent+" && rm -r workspace && mv ws_real workspace")
		require.Equal(t, "     1\tinside", readText(t, e.b, "a.txt").Content)
		require.Equal(t, "     1\tinside", readText(t, e.reopen(t), "a.txt").Content)
	})
}

// TestWorkspaceRecreated checks that a workspace removed and recreated as
// a plain directory the sandbox user owns is pinned anew, by the instance
// that pinned it and by a new one, while a symbolic link, a file or a
// directory elsewhere in its place stays refused.
func TestWorkspaceRecreated(t *testing.T) {
	t.Parallel()
	forEach(t, Options{}, func(t *testing.T, e *env) {
		parent := path.Dir(e.base)
		write(t, e.b, "a.txt", "old")
		e.sh(t, "rm -rf "+e.base+" && mkdir "+e.base+" && printf 'new\\n' > "+e.base+"/b.txt")
		require.Equal(t, "     1\tnew", readText(t, e.b, "b.txt").Content, "the same instance, after rm -rf and mkdir")
		write(t, e.b, "c.txt", "written")
		require.Equal(t, "written", e.sh(t, "cat "+e.base+"/c.txt"))
		// Again, the first call of the instance being a write.
		e.sh(t, "rm -rf "+e.base+" && mkdir "+e.base)
		write(t, e.b, "d.txt", "again")
		// A new instance reads the pin file, which now names the new one.
		e.sh(t, "rm -rf "+e.base+" && mkdir "+e.base+" && printf 'clone\\n' > "+e.base+"/e.txt")
		b2 := e.reopen(t)
		require.Equal(t, "     1\tclone", readText(t, b2, "e.txt").Content, "a new instance")
		ls, err := b2.Ls(ctx, &backend.LsRequest{})
		require.NoError(t, err)
		require.Nil(t, ls.Error)
		require.Equal(t, "     1\tclone", readText(t, e.b, "e.txt").Content, "the first instance after the second re-pinned")

		// A symbolic link to elsewhere in its place is refused, by both.
		e.sh(t, "cd "+parent+" && mv workspace ws_real && printf SECRET > "+e.out+"/secret.txt && ln -s "+e.out+" workspace")
		for _, b := range []*FilesystemBackend{e.b, b2, e.reopen(t)} {
			r := readText(t, b, "secret.txt")
			require.Equal(t, backend.CodeInvalidPath, codeOf(r.Error), "read through a workspace swapped for a link: %q", r.Content)
			require.Contains(t, r.Text(), "symbolic link")
			refusedAll(t, e, b, "secret.txt")
		}
		// So is a file in its place.
		e.sh(t, "cd "+parent+" && rm workspace && printf x > workspace")
		require.Equal(t, backend.CodeInvalidPath, codeOf(readText(t, e.b, "e.txt").Error))
		require.Equal(t, backend.CodeInvalidPath, codeOf(readText(t, e.reopen(t), "e.txt").Error))
		e.sh(t, "cd "+parent+" && rm workspace && mv ws_real workspace")
		require.Equal(t, "     1\tclone", readText(t, e.b, "e.txt").Content, "the pinned directory back")

		// A directory another user owns, where the sandbox may chown.
		if e.try("rm -rf " + e.base + " && mkdir " + e.base + " && chown 65534 " + e.base) {
			for _, b := range []*FilesystemBackend{e.b, e.reopen(t)} {
				r := readText(t, b, "e.txt")
				require.Equal(t, backend.CodeInvalidPath, codeOf(r.Error))
				require.Contains(t, r.Text(), "does not own")
			}
		} else {
			t.Log("the sandbox cannot chown: the other-owner case is not exercised here")
		}
	})
}

func TestAdversarialHardLinks(t *testing.T) {
	t.Parallel()
	forEach(t, Options{}, func(t *testing.T, e *env) {
		write(t, e.b, "a.txt", "inside")
		if !e.try("ln " + e.out + "/secret.txt " + e.base + "/hl.txt") {
			t.Logf("%s refuses hard links across directories; nothing to defend", e.sb.Info().Isolation)
		} else {
			refusedAll(t, e, e.b, "hl.txt")
			r := readText(t, e.b, "hl.txt")
			require.Contains(t, r.Text(), "hard link")
			gr, err := e.b.Grep(ctx, &backend.GrepRequest{Pattern: "SECRET"})
			require.NoError(t, err)
			require.Equal(t, []string{"hl.txt"}, gr.Skipped, "grep says what it passed over")
			dl, err := e.b.DownloadFiles(ctx, &backend.DownloadFilesRequest{Paths: []string{"hl.txt"}})
			require.NoError(t, err)
			require.Equal(t, backend.CodeInvalidPath, codeOf(dl.Results[0].Error))
		}
		// Every name inside the workspace: allowed.
		e.sh(t, "ln "+e.base+"/a.txt "+e.base+"/b.txt")
		require.Equal(t, "     1\tinside", readText(t, e.b, "b.txt").Content)
		write(t, e.b, "b.txt", "both")
		require.Equal(t, "     1\tboth", readText(t, e.b, "a.txt").Content)
	})
}

// TestAdversarialSwapRace swaps a directory for a symbolic link to the
// outside in a tight loop inside the sandbox while the tools run, and counts
// the calls that reached the outside.
func TestAdversarialSwapRace(t *testing.T) {
	t.Parallel()
	// A full run (SANDBOXTEST_FULL=1, as CI sets it) makes 200 calls per
	// verb for the verbs that read or write content and 50 for the others;
	// a plain run a quarter of that, -short a tenth. The calls are
	// repetitions of the same race: fewer give an escape fewer chances to
	// show, never a check that cannot fail, and the full count still runs
	// in CI (this test's environments run one after another, so its calls
	// were the package's longest wait).
	n, m := 50, 12
	switch {
	case fullRun():
		n, m = 200, 50
	case testing.Short():
		n, m = 20, 5
	}
	// Over E2B's adapter the race is the same as over provider/local
	// (e2bfake runs the commands there, the same helper serves the calls);
	// only the transport differs, which the other tests cover. A plain run
	// leaves it to the full run.
	list := advEnvs()
	if !fullRun() {
		for i := range list {
			if list[i].name == "e2b" {
				list[i].skip = "the race over E2B's adapter is provider/local's race; it runs with " + sandboxtest.FullEnv + "=1"
			}
		}
	}
	forEnvs(t, list, Options{}, false, func(t *testing.T, e *env) {
		write(t, e.b, "d/file.txt", "inside\n")
		e.sh(t, "mkdir -p "+e.out+"/d && printf 'SECRET\\n' > "+e.out+"/d/file.txt && : > "+e.out+"/d/only-outside.txt")
		stop := e.base + "/../race.stop"
		// The racer holds each state a moment (half the time the link is
		// in place), and ends by itself after a bounded number of swaps.
		p, err := e.sb.Start(ctx, sandbox.Command{Dir: e.base, Timeout: 15 * time.Minute, Shell: swapRacer(stop, "d", "d.real", e.out+"/d")})
		require.NoError(t, err)
		defer func() {
			e.sh(t, "touch "+stop)
			wctx, cancel := context.WithTimeout(ctx, time.Minute)
			defer cancel()
			_, _ = p.Wait(wctx)
			_ = p.Close()
			checkRacer(t, e, stop)
		}()
		escapes := map[string]int{}
		refused := map[string]int{}
		// A helper that fails outright while the tree changes under it is
		// a Go error where the agent should get a typed result (issue 15
		// item 7, still open for the race); it is logged, not an escape,
		// and never hides one: escapes are counted from the outside tree.
		failed := map[string]int{}
		goErr := func(verb string, err error) bool {
			if err == nil {
				return false
			}
			failed[verb]++
			t.Logf("%s under the swap race: %v", verb, err)
			return true
		}
		count := func(verb string, escaped bool, perr *backend.Error) {
			if escaped {
				escapes[verb]++
			}
			if perr != nil {
				refused[verb]++
			}
		}
		for range n {
			r := readText(t, e.b, "d/file.txt")
			count("read", strings.Contains(r.Content, "SECRET"), r.Error)
		}
		for i := range n {
			name := fmt.Sprintf("d/new%d.txt", i)
			w, err := e.b.Write(ctx, &backend.WriteRequest{Path: name, Content: "x"})
			if goErr("write", err) {
				continue
			}
			count("write", false, w.Error)
		}
		for range n {
			g, err := e.b.Grep(ctx, &backend.GrepRequest{Pattern: "SECRET"})
			if goErr("grep", err) {
				continue
			}
			count("grep", len(g.Matches) > 0, g.Error)
		}
		for range m {
			l, err := e.b.Ls(ctx, &backend.LsRequest{Path: "d"})
			if goErr("ls", err) {
				continue
			}
			count("ls", strings.Contains(l.Text(), "only-outside"), l.Error)
		}
		for range m {
			ed, err := e.b.Edit(ctx, &backend.EditRequest{Path: "d/file.txt", OldString: "SECRET", NewString: "PWNED"})
			if goErr("edit", err) {
				continue
			}
			count("edit", false, ed.Error)
		}
		for range m {
			all, err := e.b.GetFiles(ctx, &backend.GetFilesRequest{})
			if goErr("get-all", err) {
				continue
			}
			leaked := false
			for _, f := range all.Files {
				leaked = leaked || strings.Contains(string(f.Data), "SECRET") || strings.Contains(f.Path, "only-outside")
			}
			count("get-all", leaked, nil)
		}
		// Writes and edits that landed outside.
		escapes["write"] = strings.Count(e.sh(t, "ls "+e.out+"/d"), "new")
		if e.sh(t, "cat "+e.out+"/d/file.txt") != "SECRET\n" {
			escapes["edit"]++
		}

		// The last element itself swapped for a link to an outside file.
		write(t, e.b, "f.txt", "inside\n")
		fstop := e.base + "/../race.fstop"
		fp, err := e.sb.Start(ctx, sandbox.Command{Dir: e.base, Timeout: 15 * time.Minute, Shell: swapRacer(fstop, "f.txt", "f.real", e.out+"/secret.txt")})
		require.NoError(t, err)
		for range n {
			r := readText(t, e.b, "f.txt")
			count("read file", strings.Contains(r.Content, "SECRET"), r.Error)
		}
		for range n {
			g, err := e.b.Grep(ctx, &backend.GrepRequest{Pattern: "SECRET"})
			if goErr("grep file", err) {
				continue
			}
			count("grep file", len(g.Matches) > 0, g.Error)
		}
		for range n {
			w, err := e.b.Write(ctx, &backend.WriteRequest{Path: "f.txt", Content: "PWNED"})
			if goErr("write file", err) {
				continue
			}
			count("write file", false, w.Error)
		}
		e.sh(t, "touch "+fstop)
		wctx, cancel := context.WithTimeout(ctx, time.Minute)
		_, _ = fp.Wait(wctx)
		cancel()
		_ = fp.Close()
		checkRacer(t, e, fstop)
		if e.sh(t, "cat "+e.out+"/secret.txt") != "SECRET" {
			escapes["write file"]++
		}
		served := "the shell path"
		if runs := e.b.helperRuns.Load(); runs > 0 {
			served = fmt.Sprintf("the helper (%d runs)", runs)
		}
		t.Logf("served by %s; %d calls for read, write and grep, %d for ls, edit and get-all; refused (the race seen): %v; failed with a Go error: %v; escapes: %v", served, n, m, refused, failed, escapes)
		for verb, k := range escapes {
			require.Equal(t, 0, k, "%s escaped %d times", verb, k)
		}
		if !e.shell && helperBlob()[runtime.GOARCH] != nil {
			// With the helper every failure under the race is a typed
			// result: no Go error.
			require.True(t, e.b.helperRuns.Load() > 0, "the helper served the calls")
			require.Empty(t, failed, "Go errors under the race")
		}
	})
}

func TestAdversarialProvenance(t *testing.T) {
	t.Parallel()
	forEach(t, Options{}, func(t *testing.T, e *env) {
		w, err := e.b.WriteBytes(ctx, &backend.WriteBytesRequest{Path: "img/logo.png", Data: []byte("PNGish")})
		require.NoError(t, err)
		require.Nil(t, w.Error)
		e.sh(t, "cd "+e.base+" && ln -s img/logo.png sym.png && ln -s img imgs")
		aliases := []string{"img/logo.png", "sym.png", "imgs/logo.png", "/img/../imgs/logo.png"}
		if e.try("cd " + e.base + " && ln img/logo.png hard.png") {
			aliases = append(aliases, "hard.png")
		} else {
			t.Logf("%s refuses hard links across directories", e.sb.Info().Isolation)
		}
		for _, p := range aliases {
			require.Equal(t, backend.CodeBinaryFile, codeOf(readText(t, e.b, p).Error), "alias %s reads as text", p)
			rb, err := e.b.ReadBytes(ctx, &backend.ReadBytesRequest{Path: p})
			require.NoError(t, err)
			require.True(t, rb.Binary && string(rb.Data) == "PNGish", "alias %s", p)
			gr, err := e.b.Grep(ctx, &backend.GrepRequest{Pattern: "PNG", Path: p})
			require.NoError(t, err)
			require.Empty(t, gr.Matches, "grep of alias %s", p)
		}
		gr, err := e.b.Grep(ctx, &backend.GrepRequest{Pattern: "PNG"})
		require.NoError(t, err)
		require.Empty(t, gr.Matches)
		// The mark follows a rename; a copy is judged by its content.
		e.sh(t, "cd "+e.base+" && rm -f sym.png hard.png imgs && mv img/logo.png img/moved.png && cp img/moved.png copy.png")
		require.Equal(t, backend.CodeBinaryFile, codeOf(readText(t, e.b, "img/moved.png").Error))
		require.Equal(t, backend.CodeBinaryFile, codeOf(readText(t, e.reopen(t), "img/moved.png").Error))
		require.Equal(t, "     1\tPNGish", readText(t, e.b, "copy.png").Content)
		all, err := e.b.GetFiles(ctx, &backend.GetFilesRequest{})
		require.NoError(t, err)
		require.Equal(t, []backend.File{{Path: "copy.png", Data: []byte("PNGish")}, {Path: "img/moved.png", Data: []byte("PNGish"), Binary: true}}, all.Files)
		// A text write clears the mark; a file changed by a command is
		// judged by its content.
		write(t, e.b, "img/moved.png", "text now")
		require.Equal(t, "     1\ttext now", readText(t, e.b, "img/moved.png").Content)
		_, err = e.b.WriteBytes(ctx, &backend.WriteBytesRequest{Path: "b.bin", Data: []byte("abc")})
		require.NoError(t, err)
		e.sh(t, "printf 'def' >> "+e.base+"/b.bin")
		require.Equal(t, "     1\tabcdef", readText(t, e.b, "b.bin").Content)
	})
}

func TestAdversarialIndex(t *testing.T) {
	t.Parallel()
	forEach(t, Options{}, func(t *testing.T, e *env) {
		_, err := e.b.WriteBytes(ctx, &backend.WriteBytesRequest{Path: "logo.png", Data: []byte("PNGish")})
		require.NoError(t, err)
		write(t, e.b, "notes.txt", "kind=file\nneedle\n")
		e.sh(t, "cd "+e.base+" && ln -s . root && ln -s "+e.base+" abs && mkdir sub && ln -s .. sub/up")
		// Unreachable through every alias.
		ls, err := e.b.Ls(ctx, &backend.LsRequest{Path: "abs"})
		require.NoError(t, err)
		require.Nil(t, ls.Error, "a link to the workspace by its absolute path stays inside")
		require.Contains(t, ls.Text(), "abs/notes.txt")
		for _, alias := range []string{"root", "abs", "sub/up", "root/sub/up"} {
			for _, p := range []string{alias + "/" + MetadataDir, alias + "/" + MetadataDir + "/binary"} {
				require.Equal(t, backend.CodeInvalidPath, codeOf(readText(t, e.b, p).Error), p)
				ls, err := e.b.Ls(ctx, &backend.LsRequest{Path: p})
				require.NoError(t, err)
				require.Equal(t, backend.CodeInvalidPath, codeOf(ls.Error), "ls %s", p)
				w, err := e.b.Write(ctx, &backend.WriteRequest{Path: p + "/x", Content: "x"})
				require.NoError(t, err)
				require.Equal(t, backend.CodeInvalidPath, codeOf(w.Error), "write %s", p)
			}
			gl, err := e.b.Glob(ctx, &backend.GlobRequest{Pattern: "**", Path: alias})
			require.NoError(t, err)
			require.NotContains(t, gl.Text(), MetadataDir, "glob through %s", alias)
			ls, err := e.b.Ls(ctx, &backend.LsRequest{Path: alias})
			require.NoError(t, err)
			require.NotContains(t, ls.Text(), MetadataDir, "ls through %s", alias)
			gr, err := e.b.Grep(ctx, &backend.GrepRequest{Pattern: "-", Path: alias})
			require.NoError(t, err)
			require.NotContains(t, gr.Text(), MetadataDir, "grep through %s", alias)
		}
		want := "notes.txt:2:needle"
		grep := func() string {
			gr, err := e.b.Grep(ctx, &backend.GrepRequest{Pattern: "needle", Path: "notes.txt"})
			require.NoError(t, err)
			return gr.Text()
		}
		require.Equal(t, want, grep())
		// Hostile records: text meant to forge output, names that are not
		// identities, a directory and a 40 MiB file in the index.
		meta := e.base + "/" + MetadataDir + "/binary"
		e.sh(t, "printf 'x\\000kind=file\\000marks=1-1-1-1\\nkind=file' > '"+meta+"/1-2-3-4' && : > '"+meta+"/x\nkind=file' && mkdir '"+meta+"/5-6-7-8' && head -c 41943040 /dev/zero > "+meta+"/big")
		require.Equal(t, want, grep(), "a hostile index changes no other result")
		gr, err := e.b.Grep(ctx, &backend.GrepRequest{Pattern: "needle"})
		require.NoError(t, err)
		require.Equal(t, want, gr.Text())
		require.Equal(t, backend.CodeBinaryFile, codeOf(readText(t, e.b, "logo.png").Error), "the genuine mark still counts")
		// A hard link to a mark is refused.
		if e.try("ln " + meta + "/1-2-3-4 " + e.base + "/mark-link") {
			require.Equal(t, backend.CodeInvalidPath, codeOf(readText(t, e.b, "mark-link").Error))
		}
		// An index the agent broke is repaired by the next binary write,
		// never an error: a file where the directory was, then mode 000.
		e.sh(t, "cd "+e.base+" && rm -rf "+MetadataDir+" && printf junk > "+MetadataDir)
		w, err := e.b.WriteBytes(ctx, &backend.WriteBytesRequest{Path: "a.bin", Data: []byte("AAA")})
		require.NoError(t, err)
		require.Nil(t, w.Error)
		require.Equal(t, backend.CodeBinaryFile, codeOf(readText(t, e.b, "a.bin").Error))
		e.sh(t, "chmod 000 "+e.base+"/"+MetadataDir+"/binary "+e.base+"/"+MetadataDir)
		w, err = e.b.WriteBytes(ctx, &backend.WriteBytesRequest{Path: "c.bin", Data: []byte("CCC")})
		require.NoError(t, err)
		require.Nil(t, w.Error)
		require.Equal(t, backend.CodeBinaryFile, codeOf(readText(t, e.b, "c.bin").Error))
		all, err := e.b.GetFiles(ctx, &backend.GetFilesRequest{})
		require.NoError(t, err)
		for _, f := range all.Files {
			require.True(t, !isMeta(f.Path), f.Path)
		}
	})
}

func TestAdversarialBoundedWork(t *testing.T) {
	t.Parallel()
	forEach(t, Options{AllowExecute: true}, func(t *testing.T, e *env) {
		write(t, e.b, "ok.txt", "needle\n")
		e.sh(t, "cd "+e.base+" && mkfifo pipe && dd if=/dev/null of=big.bin bs=1 seek=21474836480 2>/dev/null")
		// A FIFO is refused before it is opened: no call blocks.
		cctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		defer cancel()
		r, err := e.b.Read(cctx, &backend.ReadRequest{Path: "pipe"})
		require.NoError(t, err)
		require.Equal(t, backend.CodeInvalidPath, codeOf(r.Error))
		require.Contains(t, r.Text(), "not a regular file")
		w, err := e.b.Write(cctx, &backend.WriteRequest{Path: "pipe", Content: "x"})
		require.NoError(t, err)
		require.Equal(t, backend.CodeInvalidPath, codeOf(w.Error))
		gr, err := e.b.Grep(cctx, &backend.GrepRequest{Pattern: "needle"})
		require.NoError(t, err)
		require.Equal(t, "ok.txt:1:needle\n[not searched (too large, or a hard link): big.bin]", gr.Text())
		gr, err = e.b.Grep(cctx, &backend.GrepRequest{Pattern: "needle", Path: "pipe"})
		require.NoError(t, err)
		require.Equal(t, backend.CodeInvalidPath, codeOf(gr.Error))
		// A 20 GiB sparse file answers "too large" without being read.
		start := time.Now()
		rb, err := e.b.ReadBytes(cctx, &backend.ReadBytesRequest{Path: "big.bin"})
		took := time.Since(start)
		require.NoError(t, err)
		require.Equal(t, backend.CodeTooLarge, codeOf(rb.Error))
		t.Logf("read of a 20 GiB sparse file answered in %v", took)
		require.True(t, took < 5*time.Second, "read of a 20 GiB sparse file took %v (goal under 1 s)", took)
		all, err := e.b.GetFiles(cctx, &backend.GetFilesRequest{})
		require.NoError(t, err)
		require.Equal(t, []backend.File{{Path: "ok.txt", Data: []byte("needle\n")}}, all.Files)
		// Names the file system cannot hold are results, not Go errors.
		long := strings.Repeat("n", 256)
		w, err = e.b.Write(cctx, &backend.WriteRequest{Path: long, Content: "x"})
		require.NoError(t, err)
		require.Equal(t, backend.CodeInvalidPath, codeOf(w.Error))
		w, err = e.b.WriteBytes(cctx, &backend.WriteBytesRequest{Path: "d/" + long + "/x", Data: []byte{0}})
		require.NoError(t, err)
		require.Equal(t, backend.CodeInvalidPath, codeOf(w.Error))
		up, err := e.b.UploadFiles(cctx, &backend.UploadFilesRequest{Files: []backend.File{{Path: long, Data: []byte("x")}}})
		require.NoError(t, err)
		require.Equal(t, backend.CodeInvalidPath, codeOf(up.Results[0].Error))
		write(t, e.b, strings.Repeat("n", 255), "fits")
		// A read-only directory, a full disk and the like: a typed result
		// carrying the system's words.
		x, err := e.b.Execute(cctx, &backend.ExecuteRequest{Command: "mkdir ro && touch ro/f && chmod 444 ro/f"})
		require.NoError(t, err)
		require.Equal(t, 0, x.ExitCode, x.Output)
		if e.try("test -w " + e.base + "/ro/f") {
			t.Logf("running as root: permission checks do not apply")
		} else {
			w, err = e.b.Write(cctx, &backend.WriteRequest{Path: "ro/f", Content: "x"})
			require.NoError(t, err)
			require.Equal(t, backend.CodePermissionDenied, codeOf(w.Error))
		}
	})
}

// TestConcurrentWritesShareNewDirectories: batch writes run a few at a
// time, and several may create the same new parent directory at once;
// none may fail for it.
func TestConcurrentWritesShareNewDirectories(t *testing.T) {
	t.Parallel()
	for name, mk := range envs(t, Options{}) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := mk(t)
			files := make([]backend.File, 12)
			for i := range files {
				files[i] = backend.File{Path: fmt.Sprintf("new/deep/dir/f%d.txt", i), Data: []byte("x")}
			}
			up, err := e.b.UploadFiles(ctx, &backend.UploadFilesRequest{Files: files})
			require.NoError(t, err)
			for _, r := range up.Results {
				require.Nil(t, r.Error, r.Path)
			}
		})
	}
}
