package anthropic

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/sandboxkit/sandbox"
	"github.com/sandboxkit/sandbox/backend"
)

// maxCommandBytes is the longest command bash accepts: the command travels
// in the environment of the sandbox's shell, which Linux caps at 128 KiB per
// string (and some providers quote it into one line).
const maxCommandBytes = 64 << 10

// bashScript runs the model's command ($SBX_ANTHROPIC_CMD) so that the
// shell's state persists between calls as far as a fresh process allows:
// the working directory and the variables (every assignment is exported,
// set -a, and saved, quoted, from the environment) are restored from a state file named
// by $SBX_ANTHROPIC_ID in the sandbox's temporary directory, outside the
// workspace. A restart takes a new id and removes the old file. The
// command text is never spliced into the script: it is eval'ed from the
// environment.
const bashScript = `__sbx_dir=${TMPDIR:-/tmp}
if [ -n "$SBX_ANTHROPIC_OLD" ]; then rm -f -- "$__sbx_dir/.sandbox-anthropic-bash-$SBX_ANTHROPIC_OLD" "$__sbx_dir/.sandbox-anthropic-bash-$SBX_ANTHROPIC_OLD.cwd"; fi
__sbx_state=$__sbx_dir/.sandbox-anthropic-bash-$SBX_ANTHROPIC_ID
__sbx_cmd=$SBX_ANTHROPIC_CMD
unset SBX_ANTHROPIC_CMD SBX_ANTHROPIC_ID SBX_ANTHROPIC_OLD
set -a
if [ -f "$__sbx_state" ]; then . "$__sbx_state" >/dev/null 2>&1; fi
if [ -f "$__sbx_state.cwd" ]; then __sbx_cwd=$(cat -- "$__sbx_state.cwd"); cd -- "$__sbx_cwd" 2>/dev/null || echo "[the previous working directory $__sbx_cwd is gone; now in $(pwd)]" >&2; fi
eval "$__sbx_cmd"
__sbx_rc=$?
set +a
__sbx_sq="'"
__sbx_rep="'\"'\"'"
__sbx_names=$(env | while IFS= read -r __sbx_l; do case $__sbx_l in [A-Za-z_]*=*) printf '%s\n' "${__sbx_l%%=*}" ;; esac; done)
for __sbx_n in $__sbx_names; do
  case $__sbx_n in PWD|OLDPWD|SHLVL|_|__sbx_*|*[!A-Za-z0-9_]*) continue ;; esac
  eval "__sbx_v=\${$__sbx_n}"
  __sbx_q=
  while :; do
    case $__sbx_v in
    *"$__sbx_sq"*) __sbx_head=${__sbx_v%%"$__sbx_sq"*}; __sbx_q=$__sbx_q$__sbx_head$__sbx_rep; __sbx_v=${__sbx_v#*"$__sbx_sq"} ;;
    *) __sbx_q=$__sbx_q$__sbx_v; break ;;
    esac
  done
  printf "%s='%s'\n" "$__sbx_n" "$__sbx_q"
done >"$__sbx_state" 2>/dev/null
pwd >"$__sbx_state.cwd" 2>/dev/null
exit $__sbx_rc
`

type bashInput struct {
	Command   string `json:"command"`
	Restart   bool   `json:"restart"`
	TimeoutMs int64  `json:"timeout_ms"`
}

// bash runs one bash call. withTimeout admits the agent toolset's
// timeout_ms.
func (t *Tools) bash(ctx context.Context, raw json.RawMessage, withTimeout bool) ([]sdk.BetaToolResultBlockParamContentUnion, error) {
	var in bashInput
	if err := json.Unmarshal(raw, &in); err != nil {
		return nil, failf("bash: the input is not valid JSON for this tool: %v", err)
	}
	if !in.Restart && strings.TrimSpace(in.Command) == "" {
		return nil, failf("bash: command is required (or set restart to true)")
	}
	if len(in.Command) > maxCommandBytes {
		return nil, failf("bash: the command is %d bytes, over the %d-byte limit; write a long script to a file with the editor and run the file", len(in.Command), maxCommandBytes)
	}
	if strings.ContainsRune(in.Command, 0) {
		return nil, failf("bash: the command holds a NUL character")
	}
	timeout := t.opts.BashTimeout
	if withTimeout && in.TimeoutMs < 0 {
		return nil, failf("bash: timeout_ms %d is negative", in.TimeoutMs)
	}
	if withTimeout && in.TimeoutMs > 0 && time.Duration(in.TimeoutMs)*time.Millisecond < timeout {
		timeout = time.Duration(in.TimeoutMs) * time.Millisecond
	}

	select {
	case t.bashTurn <- struct{}{}:
	case <-ctx.Done():
		return nil, failf("bash: %v", ctx.Err())
	}
	defer func() { <-t.bashTurn }()

	if in.Restart {
		t.mu.Lock()
		t.oldBash, t.bashID = t.bashID, newID()
		t.mu.Unlock()
		if strings.TrimSpace(in.Command) == "" {
			return t.run(ctx, BashToolName, func(ctx context.Context, st *boundState) (string, error) {
				t.mu.Lock()
				old := t.oldBash
				t.mu.Unlock()
				_, err := st.sb.Exec(ctx, sandbox.Command{
					Shell:   `d=${TMPDIR:-/tmp}; rm -f -- "$d/.sandbox-anthropic-bash-$SBX_ANTHROPIC_OLD" "$d/.sandbox-anthropic-bash-$SBX_ANTHROPIC_OLD.cwd"`,
					Env:     map[string]string{"SBX_ANTHROPIC_OLD": old},
					Timeout: 30 * time.Second,
				})
				if err != nil {
					return "", err
				}
				t.mu.Lock()
				if t.oldBash == old {
					t.oldBash = ""
				}
				t.mu.Unlock()
				return "tool has been restarted.", nil
			})
		}
	}

	return t.run(ctx, BashToolName, func(ctx context.Context, st *boundState) (string, error) {
		if err := st.pin(ctx); err != nil {
			return "", err
		}
		t.mu.Lock()
		id, old := t.bashID, t.oldBash
		t.mu.Unlock()
		env := make(map[string]string, len(t.opts.Env)+3)
		for k, v := range t.opts.Env {
			env[k] = v
		}
		env["SBX_ANTHROPIC_CMD"] = in.Command
		env["SBX_ANTHROPIC_ID"] = id
		if old != "" {
			env["SBX_ANTHROPIC_OLD"] = old
		}
		limit := 4 * t.opts.MaxOutput
		cmd := sandbox.Command{
			Shell: bashScript, Dir: st.base, Env: env, SecretEnv: t.opts.SecretEnv,
			Timeout: timeout, MaxOutput: limit,
		}
		res, err := st.sb.Exec(ctx, cmd)
		if err != nil && sandbox.CodeOf(err) == sandbox.NotFound && ctx.Err() == nil {
			// The workspace was removed (rm -rf by an earlier command):
			// make it again and run the command once more, so that one
			// command cannot leave the tool unable to run any other.
			if merr := st.sb.MkdirAll(ctx, st.base); merr != nil {
				return "", fmt.Errorf("anthropic: making the removed workspace again: %w", merr)
			}
			res, err = st.sb.Exec(ctx, cmd)
		}
		if err != nil {
			return "", err
		}
		if old != "" {
			t.mu.Lock()
			if t.oldBash == old {
				t.oldBash = ""
			}
			t.mu.Unlock()
		}
		out := res.Stdout
		if len(res.Stderr) > 0 {
			if len(out) > 0 && out[len(out)-1] != '\n' {
				out = append(out, '\n')
			}
			out = append(out, res.Stderr...)
		}
		xr := &backend.ExecuteResult{
			Output:    strings.ToValidUTF8(string(out), "\uFFFD"),
			ExitCode:  res.ExitCode,
			TimedOut:  res.TimedOut,
			Truncated: res.StdoutTruncated || res.StderrTruncated,
		}
		text := t.capKeepingTail(xr)
		if res.TimedOut {
			return "", &toolError{msg: text + fmt.Sprintf("\n[The command was ended after %v. The shell's state from before it is kept; run long jobs in the background with output to a file.]", timeout)}
		}
		if res.ExitCode != 0 {
			return "", &toolError{msg: text}
		}
		return text, nil
	})
}

// capKeepingTail renders a command's result with its status lines, cutting
// the output (not the status lines that follow it) to the cap.
func (t *Tools) capKeepingTail(xr *backend.ExecuteResult) string {
	status := ""
	if xr.ExitCode != 0 && !xr.TimedOut {
		status += fmt.Sprintf("\n[Command exited with code %d]", xr.ExitCode)
	}
	if xr.TimedOut {
		status += "\n[Command timed out]"
	}
	out := xr.Output
	room := t.opts.MaxOutput - len([]rune(status))
	if room < 0 {
		room = 0
	}
	capped := capText(out, room)
	if capped == out && xr.Truncated {
		capped += "\n[Output truncated]"
	}
	if capped == "" && status == "" {
		return "(no output)"
	}
	return capped + status
}

// pin makes sure the workspace exists and is pinned by fsbackend before a
// command can rearrange it (one round trip, once per sandbox).
func (st *boundState) pin(ctx context.Context) error {
	if st.pinned.Load() {
		return nil
	}
	r, err := st.fb.Ls(ctx, &backend.LsRequest{})
	if err != nil {
		return err
	}
	if r.Error != nil {
		return backendError(r.Error)
	}
	st.pinned.Store(true)
	return nil
}

// bashTool is the bash tool: the versioned client tool bash_20250124
// (ToolParams gives its definition) and the agent toolset's bash.
type bashTool struct {
	t     *Tools
	agent bool
}

var _ sdk.BetaTool = (*bashTool)(nil)

func (b *bashTool) Name() string { return BashToolName }

func (b *bashTool) Description() string {
	return "Run a shell command in the sandbox (POSIX sh), starting in the workspace " +
		"(the working directory the file tools' relative paths start at). The working directory and " +
		"variables persist between calls; functions, aliases and background jobs do not. " +
		"Set restart to true to start over from the workspace with a clean environment. " +
		"Output (stdout, then stderr) is cut at " + fmt.Sprint(b.t.opts.MaxOutput) + " characters with a line saying so; " +
		"secret values are shown as [REDACTED]. A command that exits non-zero is an error result with its exit code. " +
		"Commands are ended after " + b.t.opts.BashTimeout.String() + "."
}

func (b *bashTool) InputSchema() sdk.BetaToolInputSchemaParam {
	props := map[string]any{
		"command": map[string]any{"type": "string", "description": "The shell command to run."},
		"restart": map[string]any{"type": "boolean", "description": "Start a fresh shell state (working directory back to the workspace, variables cleared) before running command, if any."},
	}
	if b.agent {
		props["timeout_ms"] = map[string]any{"type": "integer", "description": "Per-call timeout in milliseconds; it can only shorten the tool's own limit."}
	}
	return sdk.BetaToolInputSchemaParam{Properties: props}
}

func (b *bashTool) Execute(ctx context.Context, input json.RawMessage) ([]sdk.BetaToolResultBlockParamContentUnion, error) {
	return b.t.bash(ctx, input, b.agent)
}

// Close closes the tool set (see Tools.Close); the environment worker
// closes the tools it was given after each session.
func (b *bashTool) Close() error { return b.t.Close() }
