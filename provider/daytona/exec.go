package daytona

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"net/http"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/sandboxkit/sandbox/driver"
	"github.com/sandboxkit/sandbox/internal/iox"
	"github.com/sandboxkit/sandbox/internal/stdinread"
	"github.com/sandboxkit/sandbox/internal/wire"
	"github.com/sandboxkit/sandbox/provider/daytona/internal/toolbox"
	"github.com/sandboxkit/sandbox/sberrors"
)

// How Exec works. POST /process/execute merges stdout and stderr into one
// JSON string (invalid UTF-8 becomes U+FFFD), feeds the command to the
// shell on stdin, and on timeout kills the shell's process group and
// answers 408, throwing the output away. So Exec sends a small POSIX
// script instead of the command. The script runs the command (its argv
// quoted by shellQuote, in a subshell that execs it, so a name such as
// "exit" is never a builtin) with stdin from /dev/null or from an uploaded
// file, and stdout and stderr redirected to two files under the scratch
// directory (/tmp/.sandboxkit). When the command ends, the script prints
// one line with the exit code and the two sizes, then (when both are at
// most inlineMax) the two files in base64. The response is thus ASCII
// whatever the command wrote, and a short command takes one round trip and
// one process more than running it bare. The files of finished commands
// are removed in batches (sweepEvery).
//
// The command's timeout is the daemon's (sent on the wire, in whole
// seconds rounded up). On 408 the files still hold the output, which Exec
// downloads. While the command runs, a poller downloads what was appended
// to the two files (Range requests), so output reaches Command.Stdout and
// Stderr before the command exits and survives a timeout or a cancelled
// context. Larger outputs are downloaded from the files after the end,
// streamed. When ctx ends, Exec kills the shell's process group with a
// second execute call (the daemon does not end a command whose client
// left) and returns ctx's error.

// execRoot is the default directory of the per-command directories in
// the sandbox (see WithScratchDir).
const execRoot = "/tmp/.sandboxkit"

// inlineMax is the largest stream the script returns inline (base64).
const inlineMax = 1 << 20

// shellQuote returns s as one word for a POSIX shell (sh, dash, bash,
// zsh): unchanged when it holds only characters no shell treats
// specially, otherwise in single quotes with each single quote written as
// '\”. Inside single quotes every byte but the single quote is literal,
// including newlines and non-UTF-8 bytes. s must not hold NUL, which no
// argv can carry.
func shellQuote(s string) string {
	if s == "" {
		return "''"
	}
	safe := true
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("_@%+=:,./-", c) >= 0) {
			safe = false
			break
		}
	}
	if safe {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// argvText is the shell text of cmd's program and arguments: its argv,
// each word quoted, or "sh -c <Shell>".
func argvText(cmd *driver.Command) string {
	if len(cmd.Args) == 0 {
		return "sh -c " + shellQuote(cmd.Shell)
	}
	var b strings.Builder
	for i, a := range cmd.Args {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(shellQuote(a))
	}
	return b.String()
}

// exports returns export statements for the command's environment. The
// environment is set in the command's own shell rather than sent as the
// daemon's envs: those would be the wrapper's too, and a PATH, SHELLOPTS
// or BASH_ENV meant for the command would change how the wrapper runs
// (a PATH without stat and base64 would lose the output silently). Values
// that are not UTF-8, which the JSON envs could not carry, need no
// special case.
func exports(env map[string]string) string {
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(env)) {
		b.WriteString("export " + k + "=" + shellQuote(env[k]) + "\n")
	}
	return b.String()
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// maxInlineText is the longest command text sent inside the script. The
// kernel limits one argument to 128 KiB, and a background process's
// script (bgproc.Lib and the command) is quoted once more (at most 4 times
// longer) as an argument.
const maxInlineText = 32 << 10

// commandTexts returns the shell text that runs cmd after prefix, in two
// forms: inline, to go inside the script (the Shell line through sh -c),
// and file, to be run as "sh file" (the Shell line itself, so that no
// argument carries it). The file removes itself first: it holds the
// command's environment, secret values included, which should not stay
// on the sandbox's disk (sh keeps reading the open file).
func commandTexts(cmd *driver.Command, prefix string) (inline, file string) {
	head := prefix + exports(cmd.Env)
	inline = head + "exec " + argvText(cmd)
	const unlinkSelf = "rm -f -- \"$0\" 2>/dev/null\n"
	if len(cmd.Args) > 0 {
		return inline, unlinkSelf + inline
	}
	return inline, unlinkSelf + head + cmd.Shell
}

// stage uploads what a command needs before it runs: its stdin (when
// given) as d.in, and the command as d.cmd when its inline text is not
// UTF-8 (it could not travel in JSON) or too long for an argument. It
// returns the stdin path and the shell command that runs the command.
func (r *Runtime) stage(ctx context.Context, id, d string, cmd *driver.Command, inline, file string, wrap func(string) string) (stdin, run string, err error) {
	stdin = "/dev/null"
	if cmd.Stdin != nil {
		// The whole stdin is uploaded before the command runs. A Read of
		// the caller's reader that blocks is abandoned when ctx ends, so
		// that the upload (and Exec) can return.
		in := stdinread.New(cmd.Stdin)
		stopIn := context.AfterFunc(ctx, in.Stop)
		defer func() { stopIn(); in.Stop() }()
		cr := &iox.CountingReader{R: in}
		if err := r.upload(ctx, id, d+".in", cr, func() bool { return cr.N == 0 }); err != nil {
			return "", "", err
		}
		stdin = d + ".in"
	}
	if run := wrap(inline); utf8.ValidString(run) && len(run) <= maxInlineText {
		return stdin, run, nil
	}
	if err := r.upload(ctx, id, d+".cmd", strings.NewReader(file), nil); err != nil {
		return "", "", err
	}
	return stdin, "sh " + d + ".cmd", nil
}

// scratchDir returns the sandbox's scratch directory, resolving "~/".
func (r *Runtime) scratchDir(ctx context.Context, id string) (string, error) {
	if !strings.HasPrefix(r.scratch, "~/") {
		return r.scratch, nil
	}
	home, err := r.fetchHome(ctx, id)
	if err != nil {
		return "", err
	}
	dir := path.Join(home, r.scratch[2:])
	// The directory goes unquoted into the wrapper script: the home the
	// sandbox reported must keep to the same characters.
	if !scratchRE.MatchString(dir) {
		return "", sberrors.Errorf(sberrors.FailedPrecondition, "daytona: scratch directory %q (under the sandbox's home) has characters the exec wrapper cannot use unquoted; set WithScratchDir to an absolute path", dir)
	}
	return dir, nil
}

// execResult is the outcome of the execute request.
type execResult struct {
	resp *toolbox.ExecuteResponse
	err  error
}

// execute sends script through POST /process/execute.
func (r *Runtime) execute(ctx context.Context, id, script, cwd string, wireTimeout int) execResult {
	req := toolbox.ExecuteRequest{Command: script}
	if cwd != "" {
		req.Cwd = &cwd
	}
	if wireTimeout > 0 {
		req.Timeout = &wireTimeout
	}
	resp, err := r.toolboxCall(ctx, id, "exec", true, nil, func(ctx context.Context, c *toolbox.Client) (*http.Response, error) {
		return c.ExecuteCommand(ctx, req)
	}, http.StatusOK)
	if err != nil {
		return execResult{err: err}
	}
	var out toolbox.ExecuteResponse
	defer wire.DrainClose(resp.Body)
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		if ctx.Err() != nil {
			return execResult{err: ctx.Err()}
		}
		return execResult{err: fmt.Errorf("daytona: toolbox exec: reading the response: %w: %w", sberrors.ErrOutcomeUnknown, err)}
	}
	return execResult{resp: &out}
}

// ExecGrace is how long Exec may run past Command.Timeout whatever the
// connection does. The daemon ends a command at its timeout (rounded up to
// a whole second) and answers; when that answer has not come ExecGrace/2
// after the timeout, the connection is taken as stalled: Exec ends the
// command with a second request, bounded by what is left of the grace,
// and returns an error matching sberrors.ErrOutcomeUnknown. Downloading the
// rest of a large output after the command ended, and removing the
// command's files, happen within the same bound. When ctx ends first,
// fetching what the poller has not yet fetched and killing the abandoned
// command take at most ExecGrace/2 more.
const ExecGrace = 10 * time.Second

// Exec runs cmd to completion (see the comment at the top of exec.go for
// how stdout and stderr stay split and byte-exact). Every byte the command
// wrote reaches cmd.Stdout and cmd.Stderr, or Exec returns an error: a
// failure to download the output, a size that does not match what the
// wrapper reported, or a missing trailer is an error matching
// sberrors.ErrOutcomeUnknown when the command may have run, and another
// code when it did not start. Exec returns at most ExecGrace after
// cmd.Timeout elapses (when set), and at most ExecGrace/2 after ctx ends.
// The caller's Stdin is streamed to the command while it runs (see
// stdin.go); when Exec returns, its copy has ended: no Read of Stdin starts
// afterwards, and a Read still blocked is abandoned (its data discarded).
// A failure to read Stdin or to deliver it is an error matching
// sberrors.ErrOutcomeUnknown (the command ran).
func (r *Runtime) Exec(ctx context.Context, id string, cmd *driver.Command) (st driver.ExitStatus, err error) {
	ctx = withEnvValues(ctx, cmd.Env)
	start := time.Now()
	// hctx is the hard bound of the whole call; ectx that of the execute
	// request, whose answer should come at the command's timeout.
	hctx, ectx := ctx, ctx
	grace := r.execGrace()
	if cmd.Timeout > 0 {
		var c1, c2 context.CancelFunc
		hctx, c1 = context.WithDeadline(ctx, start.Add(cmd.Timeout+grace))
		defer c1()
		ectx, c2 = context.WithDeadline(hctx, start.Add(cmd.Timeout+grace/2))
		defer c2()
	}
	// stalled reports that the bound ran out while the caller still waits.
	stalled := func(c context.Context) bool { return ctx.Err() == nil && c.Err() != nil }
	root, err := r.scratchDir(hctx, id)
	if err != nil {
		if stalled(hctx) {
			return driver.ExitStatus{}, r.noAnswer(cmd, false, err)
		}
		return driver.ExitStatus{}, r.clean(err)
	}
	d := root + "/x" + randHex(8) // the command's files are d.o, d.e, ...
	inline, file := commandTexts(cmd, "")
	// A subshell that execs runs the program itself, never a builtin of
	// the daemon's shell, at the cost of the fork any command takes.
	staged := cmd
	if cmd.Stdin != nil {
		c := *cmd
		c.Stdin = nil // streamed while the command runs: see stdin.go
		staged = &c
	}
	stdin, run, err := r.stage(hctx, id, d, staged, inline, file, func(t string) string { return "(" + t + ")" })
	if err != nil {
		if stalled(hctx) {
			return driver.ExitStatus{}, r.noAnswer(cmd, false, err)
		}
		return driver.ExitStatus{}, r.clean(err)
	}
	if cmd.Stdin != nil {
		run = feedScript(d, run)
		feed := r.feedStdin(hctx, id, d, cmd.Stdin)
		defer func() {
			leftovers, ferr := feed.stop()
			if leftovers {
				r.cleanupStdin(id, d)
			}
			if ferr != nil && err == nil {
				err = r.clean(fmt.Errorf("daytona: exec: the command ran (exit code %d) but %w: %w", st.ExitCode, ferr, sberrors.ErrOutcomeUnknown))
				st = driver.ExitStatus{}
			}
		}()
	}
	mark := "SBKX" + randHex(6)
	// v names the shell variable holding the command's path prefix: random,
	// so that it cannot replace an environment variable of the command (r,
	// the exit code, is set only once the command has run).
	v := "_S" + randHex(3)
	// As few processes, files and bytes as possible (the daemon's shell
	// reads its script one byte at a time): the shell itself creates the
	// two output files and holds them open on fds 8 and 9 (that is how
	// killExec finds it: no pid file); stat and base64 run only when there
	// is output; one printf reports an empty result; the files of finished
	// commands go in one removal every sweepEvery commands.
	script := fmt.Sprintf(`{ %[8]s=%[2]s; [ -d %[1]s ] || mkdir -p %[1]s || exit 101
exec 8>$%[8]s.o 9>$%[8]s.e || exit 102
%[3]s <%[4]s >&8 2>&9 8>&- 9>&-
r=$?
if [ -s $%[8]s.o ] || [ -s $%[8]s.e ]; then
set -- $(stat -c %%s $%[8]s.o $%[8]s.e 2>/dev/null || { wc -c <$%[8]s.o; wc -c <$%[8]s.e; }) 0 0
printf '\n%[5]s %%s - %%s %%s\n' $r $1 $2
if [ $1 -le %[6]d ] && [ $2 -le %[6]d ]; then [ $1 = 0 ] || base64 $%[8]s.o; printf '\n%[5]s-E\n'; [ $2 = 0 ] || base64 $%[8]s.e; printf '\n%[5]s-Z\n'; fi
else printf '\n%[5]s %%s - 0 0\n\n%[5]s-E\n\n%[5]s-Z\n' $r; fi
%[7]s} </dev/null
`, root, d, run, stdin, mark, inlineMax, r.sweep(id), v)
	// The daemon enforces the timeout (whole seconds, rounded up): it
	// kills the shell's process group and answers 408; the output stays
	// in the files.
	wire := int(math.Ceil(cmd.Timeout.Seconds()))

	pl := &poller{r: r, id: id, d: d, stdout: cmd.Stdout, stderr: cmd.Stderr}
	pctx, stopPoll := context.WithCancel(hctx)
	pdone := make(chan struct{})
	go pl.run(pctx, pdone)
	// The request ends with ctx, or when the daemon's answer is overdue.
	res := r.execute(ectx, id, script, cmd.Dir, wire)
	stopPoll()
	<-pdone
	if res.err != nil && ctx.Err() != nil {
		// The daemon does not end a command whose client left: end it,
		// within the grace.
		kill := time.Now().Add(grace / 2)
		if cmd.Timeout > 0 {
			kill = earliest(kill, start.Add(cmd.Timeout+grace))
		}
		kctx, cancel := context.WithDeadline(context.Background(), kill)
		// First what the poller has not fetched yet, so that the partial
		// output is as complete as it can be (best effort, briefly).
		fctx, fcancel := context.WithTimeout(kctx, grace/4)
		_ = pl.rest(fctx)
		fcancel()
		r.killExec(kctx, id, d)
		cancel()
		return driver.ExitStatus{ExitCode: -1}, fmt.Errorf("daytona: exec: %w", ctx.Err())
	}
	if res.err != nil && stalled(ectx) {
		// No answer by the command's timeout: the connection stalled.
		r.killExec(hctx, id, d)
		return driver.ExitStatus{}, r.noAnswer(cmd, true, res.err)
	}
	if res.err != nil {
		var he *HTTPError
		if asHTTP(res.err, &he) && he.Status == http.StatusRequestTimeout {
			// The daemon's timeout fired: its response lost the output,
			// the files kept it.
			if err := pl.rest(hctx); err != nil {
				r.cleanupCtx(hctx, id, d)
				return driver.ExitStatus{}, r.clean(fmt.Errorf("daytona: exec: the command timed out but its output was lost: %w: %v", sberrors.ErrOutcomeUnknown, err))
			}
			r.cleanupCtx(hctx, id, d)
			return driver.ExitStatus{ExitCode: -1, TimedOut: true}, nil
		}
		return driver.ExitStatus{}, r.clean(res.err)
	}
	code := -1
	if res.resp.ExitCode != nil {
		code = *res.resp.ExitCode
	} else if res.resp.Code != nil {
		code = *res.resp.Code
	}
	out := str(res.resp.Result)
	tr, ok := parseTrailer(out, mark)
	if !ok {
		r.cleanupCtx(hctx, id, d)
		if code == -1 && strings.Contains(out, "no such file or directory") {
			return driver.ExitStatus{}, sberrors.Errorf(sberrors.NotFound, "daytona: exec: working directory %q does not exist", cmd.Dir)
		}
		if code == -1 && strings.Contains(out, "not a directory") {
			return driver.ExitStatus{}, fmt.Errorf("daytona: exec: working directory %q: %w", cmd.Dir, sberrors.ErrNotDirectory)
		}
		if (code == 101 || code == 102 || code == 1 || code == 2) && (strings.Contains(out, d+".") || strings.Contains(out, root)) {
			// The wrapper stopped before the command: the output (the
			// command's never reaches it) is the shell's own complaint
			// about the scratch directory, which it names.
			msg, _, _ := strings.Cut(strings.TrimSpace(out), "\n")
			if len(msg) > 200 {
				msg = msg[:200]
			}
			return driver.ExitStatus{}, sberrors.Errorf(sberrors.FailedPrecondition, "daytona: exec: the command did not run: its output files could not be created in %s (%s)", root, msg)
		}
		// The output is the command's own (it may print secret env
		// values): only its size goes into the error. The command may
		// have run.
		return driver.ExitStatus{}, fmt.Errorf("daytona: exec: the toolbox ran the command wrapper with exit code %d but its output (%d bytes, not shown) lacks the wrapper's trailer: %w", code, len(out), sberrors.ErrOutcomeUnknown)
	}
	if tr.inline {
		pl.write(tr.stdout, tr.stderr)
		r.spend(id, d)
		return driver.ExitStatus{ExitCode: tr.rc}, nil
	}
	err = pl.rest(hctx)
	if err == nil && (pl.offO < tr.sizeO || pl.offE < tr.sizeE) {
		err = fmt.Errorf("downloaded %d of %d bytes of stdout and %d of %d of stderr", pl.offO, tr.sizeO, pl.offE, tr.sizeE)
	}
	r.cleanupCtx(hctx, id, d)
	if err != nil {
		return driver.ExitStatus{}, r.clean(fmt.Errorf("daytona: exec: the command ran (exit code %d) but its output was lost: %w: %v", tr.rc, sberrors.ErrOutcomeUnknown, err))
	}
	return driver.ExitStatus{ExitCode: tr.rc}, nil
}

// noAnswer is the error of an Exec whose bound (cmd.Timeout plus
// ExecGrace) ran out before the toolbox answered. mayHaveRun says whether
// the command may have started (ErrOutcomeUnknown) or surely did not
// (ErrUnavailable).
func (r *Runtime) noAnswer(cmd *driver.Command, mayHaveRun bool, cause error) error {
	kind, what := sberrors.ErrUnavailable, "the command did not start"
	if mayHaveRun {
		kind, what = sberrors.ErrOutcomeUnknown, "the command may have run"
	}
	return r.clean(fmt.Errorf("daytona: exec: no answer from the toolbox within the command's timeout (%v) and its grace (%s; last error: %v): %w",
		cmd.Timeout, what, cause, kind))
}

func earliest(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// trailer is what the script printed after the command: a line
// "<mark> <exit code> - <stdout size> <stderr size>", then, when both
// sizes are small, the two outputs in base64 each followed by a marker
// line.
type trailer struct {
	rc             int
	sizeO, sizeE   int64 // the sizes the wrapper reported
	inline         bool
	stdout, stderr []byte
}

// parseTrailer finds the script's report in the execute result.
func parseTrailer(out, mark string) (trailer, bool) {
	var tr trailer
	i := strings.Index(out, "\n"+mark+" ")
	if i < 0 {
		return tr, false
	}
	rest := out[i+len(mark)+2:]
	head, rest, _ := strings.Cut(rest, "\n")
	f := strings.Fields(head)
	if len(f) != 4 {
		return tr, false
	}
	rc, err := strconv.Atoi(f[0])
	if err != nil {
		return tr, false
	}
	tr.rc = rc
	if tr.sizeO, err = strconv.ParseInt(f[2], 10, 64); err != nil {
		return tr, false
	}
	if tr.sizeE, err = strconv.ParseInt(f[3], 10, 64); err != nil {
		return tr, false
	}
	o, afterO, okE := strings.Cut(rest, "\n"+mark+"-E\n")
	e, _, okZ := strings.Cut(afterO, "\n"+mark+"-Z")
	if !okE || !okZ {
		return tr, true
	}
	so, err1 := unb64(o)
	se, err2 := unb64(e)
	if err1 != nil || err2 != nil {
		return tr, true
	}
	tr.inline, tr.stdout, tr.stderr = true, so, se
	return tr, true
}

func unb64(s string) ([]byte, error) {
	s = strings.Map(func(r rune) rune {
		if r == '\n' || r == '\r' || r == ' ' || r == '\t' {
			return -1
		}
		return r
	}, s)
	return base64.StdEncoding.DecodeString(s)
}

// killExec ends the command of an abandoned Exec (its process group) and
// removes its files. The Exec's shell is the process holding d.o open on
// fd 8 ([ -ef ] compares the link's target with the file, no process
// started per candidate; the loop runs over /proc/[0-9]*, a pattern that
// always matches, since zsh aborts on one that does not). ctx bounds it:
// the caller's own context is usually over.
func (r *Runtime) killExec(ctx context.Context, id, d string) {
	script := fmt.Sprintf(`{ for p in /proc/[0-9]*; do [ $p/fd/8 -ef %[1]s.o ] || continue; p=${p#/proc/}; kill -9 -$p 2>/dev/null || { pkill -9 -P $p; kill -9 $p; } 2>/dev/null; done; %[2]s; } </dev/null`, d, rmFiles(d))
	_ = r.execute(ctx, id, script, "", 10)
}

// sweepEvery is how many finished Execs leave their (small) files behind
// before one Exec removes them all: a process less for the others.
const sweepEvery = 32

// spend records the files of a finished Exec for a later sweep.
func (r *Runtime) spend(id, d string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.spent[id] = append(r.spent[id], d)
}

// sweep returns the script line that removes the files of finished Execs,
// once sweepEvery have gathered ("" until then).
func (r *Runtime) sweep(id string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.spent[id]) < sweepEvery {
		return ""
	}
	var b strings.Builder
	b.WriteString("rm -f")
	for _, d := range r.spent[id] {
		// Names, not d.* patterns: a pattern costs a directory scan.
		b.WriteString(" " + d + ".o " + d + ".e " + d + ".in " + d + ".cmd")
	}
	delete(r.spent, id)
	// In the foreground: a background rm may be killed with the command's
	// process group when the daemon's shell exits, leaving the files.
	b.WriteString(" </dev/null >/dev/null 2>&1\n")
	return b.String()
}

// rmFiles is the command that removes the files of the command d.
func rmFiles(d string) string {
	return fmt.Sprintf("rm -f %[1]s.o %[1]s.e %[1]s.t %[1]s.pid %[1]s.exit %[1]s.in %[1]s.cmd", d)
}

// cleanup removes a command's files, best effort and bounded.
func (r *Runtime) cleanup(id, d string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r.cleanupCtx(ctx, id, d)
}

// cleanupCtx removes a command's files within ctx (and at most 10 s).
// When that fails, the files are left to a later sweep.
func (r *Runtime) cleanupCtx(ctx context.Context, id, d string) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if res := r.execute(ctx, id, "{ "+rmFiles(d)+"; } </dev/null", "", 10); res.err != nil {
		r.spend(id, d)
	}
}

// poller copies what the command appends to its output files to the
// caller's writers while it runs.
type poller struct {
	r              *Runtime
	id, d          string
	stdout, stderr io.Writer
	offO, offE     int64
	seenO, seenE   bool // the file was found at least once
}

func (p *poller) run(ctx context.Context, done chan<- struct{}) {
	defer close(done)
	delay := 150 * time.Millisecond
	for {
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		// A failed poll loses nothing (the next one, or the final
		// download, resumes at the same offset); one the toolbox refuses
		// for good ends the polling.
		for _, err := range []error{
			p.fetch(ctx, "o", &p.offO, &p.seenO, p.stdout, false),
			p.fetch(ctx, "e", &p.offE, &p.seenE, p.stderr, false),
		} {
			if err == nil || ctx.Err() != nil {
				continue
			}
			var he *HTTPError
			if asHTTP(err, &he) && he.Status >= 400 && he.Status < 500 && he.Status != http.StatusTooManyRequests && he.Status != http.StatusRequestTimeout {
				return
			}
		}
		delay = min(delay*3/2, time.Second)
	}
}

// fetch copies the bytes of file name from *off on to w. A 404 means "no
// output yet" only while the command runs and before the file was first
// seen (the wrapper creates it first thing); once final (the command has
// ended), and after the file was seen, it is an error like any other
// failure. 416 (nothing past *off) is no new bytes.
func (p *poller) fetch(ctx context.Context, name string, off *int64, seen *bool, w io.Writer, final bool) error {
	c, err := p.r.toolboxClient(ctx, p.id)
	if err != nil {
		return err
	}
	from := *off
	tctx, a := wire.Trace(ctx)
	resp, err := c.DownloadFile(tctx, &toolbox.DownloadFileParams{Path: p.d + "." + name}, func(ctx context.Context, req *http.Request) error {
		if from > 0 {
			req.Header.Set("Range", fmt.Sprintf("bytes=%d-", from))
		}
		return nil
	})
	if err != nil {
		return p.r.transportError(ctx, "exec output", a, false, err)
	}
	switch resp.StatusCode {
	case http.StatusPartialContent:
	case http.StatusOK:
		if _, err := io.CopyN(io.Discard, resp.Body, from); err != nil {
			resp.Body.Close()
			return fmt.Errorf("daytona: exec output: reading the file: %w: %w", sberrors.ErrUnavailable, err)
		}
	case http.StatusRequestedRangeNotSatisfiable:
		readError(resp)
		*seen = true
		return nil
	case http.StatusNotFound:
		if !final && !*seen {
			readError(resp)
			return nil
		}
		fallthrough
	default:
		return p.r.responseError("exec output "+p.d+"."+name, resp)
	}
	defer resp.Body.Close()
	*seen = true
	n, err := io.Copy(w, resp.Body)
	*off += n
	if err != nil {
		return fmt.Errorf("daytona: exec output: reading the file: %w: %w", sberrors.ErrUnavailable, err)
	}
	return nil
}

// write delivers the parts of the inline output the poller has not.
func (p *poller) write(stdout, stderr []byte) {
	if int64(len(stdout)) > p.offO {
		_, _ = p.stdout.Write(stdout[p.offO:])
		p.offO = int64(len(stdout))
	}
	if int64(len(stderr)) > p.offE {
		_, _ = p.stderr.Write(stderr[p.offE:])
		p.offE = int64(len(stderr))
	}
}

// rest streams the remainders of both files, now that the command has
// ended: every failure is an error.
func (p *poller) rest(ctx context.Context) error {
	if err := p.fetchFinal(ctx, "o", &p.offO, &p.seenO, p.stdout); err != nil {
		return fmt.Errorf("downloading stdout: %w", err)
	}
	if err := p.fetchFinal(ctx, "e", &p.offE, &p.seenE, p.stderr); err != nil {
		return fmt.Errorf("downloading stderr: %w", err)
	}
	return nil
}

// finalFetchTries bounds the downloads of one output file once the
// command has ended.
const finalFetchTries = 3

// fetchFinal downloads the rest of an output file, trying again (from the
// offset reached, so no byte is delivered twice) after a transport
// failure: the download only reads, and the command's outcome is known,
// so one dropped connection must not turn a finished command into lost
// output (a fresh-clone CI run at load 90 lost one that way). A refusal
// from the toolbox (4xx) and the end of ctx are final.
func (p *poller) fetchFinal(ctx context.Context, name string, off *int64, seen *bool, w io.Writer) error {
	var err error
	for try := range finalFetchTries {
		if err = p.fetch(ctx, name, off, seen, w, true); err == nil || ctx.Err() != nil {
			return err
		}
		var he *HTTPError
		if asHTTP(err, &he) && he.Status >= 400 && he.Status < 500 && he.Status != http.StatusTooManyRequests && he.Status != http.StatusRequestTimeout {
			return err
		}
		if try < finalFetchTries-1 {
			t := time.NewTimer(time.Duration(100<<try) * time.Millisecond)
			select {
			case <-ctx.Done():
				t.Stop()
				return err
			case <-t.C:
			}
		}
	}
	return err
}
