package openai

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/responses"

	"github.com/sandboxkit/sandbox"
)

// Shell runs a shell call's commands in the sandbox, one after another,
// and returns the shell_call_output that answers it (see the package
// documentation for timeouts, caps and redaction). A command the sandbox
// refuses (say, one holding a NUL byte) is reported to the model in its
// stderr with exit code 127. The error is non-nil only when the model
// cannot act on it: ctx ended, or the sandbox or its transport failed.
func (t *Tools) Shell(ctx context.Context, call responses.ResponseFunctionShellToolCall) (responses.ResponseInputItemShellCallOutputParam, error) {
	limit := t.outputLimit(call.Action.MaxOutputLength)
	timeout := t.timeout(call.Action.TimeoutMs)
	out := responses.ResponseInputItemShellCallOutputParam{
		CallID:          call.CallID,
		MaxOutputLength: param.NewOpt(int64(limit)),
		Status:          "completed",
	}
	switch call.Caller.Type {
	case "direct":
		out.Caller.OfDirect = &responses.ResponseInputItemShellCallOutputCallerDirectParam{}
	case "program":
		out.Caller.OfProgram = &responses.ResponseInputItemShellCallOutputCallerProgramParam{CallerID: call.Caller.CallerID}
	}
	if len(call.Action.Commands) == 0 {
		out.Output = append(out.Output, exitOutput("", "shell: the call has no commands; put at least one command in commands", 2))
		return out, nil
	}
	for _, c := range call.Action.Commands {
		r, err := t.runCommand(ctx, sandbox.Command{Shell: c}, timeout, limit)
		if err != nil {
			return out, err
		}
		t.log.InfoContext(ctx, "openai: shell command", "call_id", call.CallID, "exit", r.exitCode, "timed_out", r.timedOut, "truncated", r.truncated)
		if r.timedOut {
			out.Output = append(out.Output, responses.ResponseFunctionShellCallOutputContentParam{
				Stdout: r.stdout, Stderr: r.stderr,
				Outcome: responses.ResponseFunctionShellCallOutputContentOutcomeUnionParam{
					OfTimeout: &responses.ResponseFunctionShellCallOutputContentOutcomeTimeoutParam{},
				},
			})
			break
		}
		out.Output = append(out.Output, exitOutput(r.stdout, r.stderr, r.exitCode))
	}
	return out, nil
}

func exitOutput(stdout, stderr string, code int) responses.ResponseFunctionShellCallOutputContentParam {
	return responses.ResponseFunctionShellCallOutputContentParam{
		Stdout: stdout, Stderr: stderr,
		Outcome: responses.ResponseFunctionShellCallOutputContentOutcomeUnionParam{
			OfExit: &responses.ResponseFunctionShellCallOutputContentOutcomeExitParam{ExitCode: int64(code)},
		},
	}
}

// LocalShell runs a legacy local_shell call (an argv, with its own
// environment variables and working directory) and returns the
// local_shell_call_output that answers it. Its output is the JSON object
// {"output": stdout and stderr, "metadata": {"exit_code": N,
// "duration_seconds": S}} (with "timed_out": true after a timeout), as the
// models trained on the tool read it. A relative working_directory is
// taken from the workspace. The call's user is not honoured: commands run
// as the sandbox's user. Errors are as for Shell.
func (t *Tools) LocalShell(ctx context.Context, call responses.ResponseOutputItemLocalShellCall) (responses.ResponseInputItemLocalShellCallOutputParam, error) {
	a := call.Action
	limit := t.opts.MaxOutputLength
	cmd := sandbox.Command{Args: a.Command, Env: a.Env}
	if wd := a.WorkingDirectory; wd != "" {
		if !strings.HasPrefix(wd, "/") {
			wd = path.Join(t.ws, wd)
		}
		cmd.Dir = wd
	}
	out := responses.ResponseInputItemLocalShellCallOutputParam{ID: call.CallID, Status: "completed"}
	var text string
	meta := map[string]any{}
	if len(a.Command) == 0 {
		text, meta["exit_code"] = "local_shell: the call has no command", 2
	} else {
		r, err := t.runCommand(ctx, cmd, t.timeout(a.TimeoutMs), limit)
		if err != nil {
			return out, err
		}
		text = r.stdout
		if r.stderr != "" {
			if text != "" && !strings.HasSuffix(text, "\n") {
				text += "\n"
			}
			text += r.stderr
		}
		meta["exit_code"] = r.exitCode
		meta["duration_seconds"] = r.duration.Round(time.Millisecond).Seconds()
		if r.timedOut {
			meta["timed_out"] = true
		}
	}
	b, err := json.Marshal(map[string]any{"output": text, "metadata": meta})
	if err != nil {
		return out, fmt.Errorf("openai: encoding local_shell output: %w", err)
	}
	out.Output = string(b)
	return out, nil
}

// commandResult is one command's outcome as the model will see it.
type commandResult struct {
	stdout, stderr string
	exitCode       int
	timedOut       bool
	truncated      bool
	duration       time.Duration
}

func (t *Tools) outputLimit(asked int64) int {
	if asked > 0 && asked < int64(t.opts.MaxOutputLength) {
		return int(asked)
	}
	return t.opts.MaxOutputLength
}

func (t *Tools) timeout(ms int64) time.Duration {
	if ms <= 0 {
		return t.opts.Timeout
	}
	if ms >= t.opts.MaxTimeout.Milliseconds() {
		return t.opts.MaxTimeout
	}
	return time.Duration(ms) * time.Millisecond
}

// runCommand runs cmd with the workspace as its default working directory
// and the output streamed into bounded buffers.
func (t *Tools) runCommand(ctx context.Context, cmd sandbox.Command, timeout time.Duration, limit int) (commandResult, error) {
	if err := t.ensureWorkspace(ctx, false); err != nil {
		return commandResult{}, err
	}
	if cmd.Dir == "" {
		cmd.Dir = t.ws
	}
	env := make(map[string]string, len(cmd.Env)+len(t.opts.Env))
	for k, v := range cmd.Env {
		env[k] = v
	}
	for k, v := range t.opts.Env {
		env[k] = v
	}
	for k := range t.opts.SecretEnv {
		delete(env, k) // the secret's own value wins
	}
	cmd.Env, cmd.SecretEnv = env, t.opts.SecretEnv
	cmd.Timeout = timeout
	// Each stream keeps its first and last 4 bytes per character of the
	// budget (the widest UTF-8 character), so the cut below has enough of
	// both ends whatever the stream's encoding. The Result's own capture
	// is not used.
	capBytes := 4*limit + 64
	stdout, stderr := newHeadTail(capBytes), newHeadTail(capBytes)
	cmd.Stdout, cmd.Stderr, cmd.MaxOutput = stdout, stderr, 1
	start := time.Now()
	res, err := t.exec(ctx, cmd)
	if err != nil && sandbox.CodeOf(err) == sandbox.NotFound && ctx.Err() == nil && cmd.Dir == t.ws {
		// The workspace was removed (rm -rf by an earlier command): make
		// it again and run the command once more.
		if err := t.ensureWorkspace(ctx, true); err != nil {
			return commandResult{}, err
		}
		stdout, stderr = newHeadTail(capBytes), newHeadTail(capBytes)
		cmd.Stdout, cmd.Stderr = stdout, stderr
		res, err = t.exec(ctx, cmd)
	}
	if err != nil && ctx.Err() == nil && cmd.Dir != t.ws && (sandbox.CodeOf(err) == sandbox.NotFound || errors.Is(err, sandbox.ErrNotDirectory)) {
		// A working directory that is missing or not a directory is the
		// model's mistake: answered like a shell's failed cd, naming the
		// directory as the model can see it (the provider's error may
		// carry a host path).
		return commandResult{stderr: t.scrub(fmt.Sprintf("cannot run in working directory %s: it does not exist or is not a directory", t.shownDir(cmd.Dir))), exitCode: 127, duration: time.Since(start)}, nil
	}
	if err != nil {
		if ctx.Err() == nil && sandbox.CodeOf(err) == sandbox.InvalidArgument {
			// A command the sandbox refuses: the model can fix it.
			return commandResult{stderr: t.scrub(err.Error()), exitCode: 127, duration: time.Since(start)}, nil
		}
		return commandResult{}, fmt.Errorf("openai: running a command: %w", err)
	}
	so, se, cut := capStreams(stdout, stderr, limit)
	r := commandResult{stdout: t.scrub(so), stderr: t.scrub(se), exitCode: res.ExitCode, timedOut: res.TimedOut, truncated: cut, duration: res.Duration}
	if res.ExitCode < 0 && res.Signal > 0 {
		r.exitCode = 128 + int(res.Signal)
	}
	return r, nil
}

// headTail keeps the first and the last bytes written to it, up to a cap
// each, and counts the rest.
type headTail struct {
	cap   int
	head  []byte
	tail  []byte // the last bytes past head, at most 2*cap before a trim
	total int64
}

func newHeadTail(capBytes int) *headTail { return &headTail{cap: capBytes} }

func (h *headTail) Write(p []byte) (int, error) {
	n := len(p)
	h.total += int64(n)
	if room := h.cap - len(h.head); room > 0 {
		k := min(room, len(p))
		h.head = append(h.head, p[:k]...)
		p = p[k:]
	}
	if len(p) == 0 {
		return n, nil
	}
	if len(p) >= h.cap {
		h.tail = append(h.tail[:0], p[len(p)-h.cap:]...)
		return n, nil
	}
	h.tail = append(h.tail, p...)
	if len(h.tail) > 2*h.cap {
		h.tail = append(h.tail[:0], h.tail[len(h.tail)-h.cap:]...)
	}
	return n, nil
}

// view returns the stream's kept start and end, and how many bytes
// between them were dropped (0: start+end is the whole stream).
func (h *headTail) view() (start, end []byte, dropped int64) {
	end = h.tail
	if len(end) > h.cap {
		end = end[len(end)-h.cap:]
	}
	return h.head, end, h.total - int64(len(h.head)) - int64(len(end))
}

// runeLen estimates a stream's length in characters (dropped bytes count
// as one character each: a bound, used only to share the budget).
func (h *headTail) runeLen() int64 {
	s, e, d := h.view()
	return int64(utf8.RuneCount(s)+utf8.RuneCount(e)) + d
}

// capStreams renders stdout and stderr within limit characters in all,
// sharing the budget: each stream gets at least half when it needs it,
// and what one leaves unused goes to the other.
func capStreams(stdout, stderr *headTail, limit int) (string, string, bool) {
	lo, le := stdout.runeLen(), stderr.runeLen()
	L := int64(limit)
	so := min(lo, max(L/2, L-le))
	se := min(le, L-so)
	a, c1 := render(stdout, int(so))
	b, c2 := render(stderr, int(se))
	return a, b, c1 || c2
}

// render returns the stream within budget characters: whole when it fits,
// else its first and last characters around a line saying how many bytes
// were cut.
func render(h *headTail, budget int) (string, bool) {
	start, end, dropped := h.view()
	if dropped == 0 {
		whole := string(start) + string(end)
		if utf8.RuneCountInString(whole) <= budget {
			return whole, false
		}
		start, end = []byte(whole), []byte(whole)
	}
	keepHead := budget / 2
	keepTail := budget - keepHead
	hs := firstRunes(start, keepHead)
	ts := lastRunes(end, keepTail)
	cut := h.total - int64(len(hs)) - int64(len(ts))
	var b strings.Builder
	b.Write(hs)
	if len(hs) > 0 && hs[len(hs)-1] != '\n' {
		b.WriteByte('\n')
	}
	fmt.Fprintf(&b, "[... %d bytes truncated ...]\n", cut)
	b.Write(ts)
	return b.String(), true
}

func firstRunes(b []byte, n int) []byte {
	i := 0
	for k := 0; k < n && i < len(b); k++ {
		_, size := utf8.DecodeRune(b[i:])
		i += size
	}
	return b[:i]
}

func lastRunes(b []byte, n int) []byte {
	i := len(b)
	for k := 0; k < n && i > 0; k++ {
		_, size := utf8.DecodeLastRune(b[:i])
		i -= size
	}
	return b[i:]
}

// shownDir is dir as the model named it: relative to the workspace when
// it lies there, else as given.
func (t *Tools) shownDir(dir string) string {
	if rel, ok := strings.CutPrefix(dir, t.ws+"/"); ok {
		return strconv.Quote(rel)
	}
	return strconv.Quote(dir)
}
