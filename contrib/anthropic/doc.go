// Package anthropic gives Claude's client-side tools, as the Anthropic Go
// SDK (github.com/anthropics/anthropic-sdk-go/v2) runs them, a sandbox to
// work in instead of the host: bash and the text editor (the versioned
// client tools bash_20250124 and text_editor_20250728), and the
// agent_toolset_20260401 tools bash, read, write, edit, glob and grep. Each is
// an anthropic.BetaTool, usable with the SDK's BetaToolRunner, its
// SessionToolRunner, and the self-hosted environment worker of Managed
// Agents (WorkerToolsFunc).
//
// Import it under another name than the SDK's:
//
//	import sbanthropic "github.com/sandboxkit/sandbox/contrib/anthropic"
//
//	tools, _ := sbanthropic.New(sb, sbanthropic.Options{})
//	defer tools.Close()
//	params.Tools = tools.ToolParams()
//	runner := client.Beta.Messages.NewToolRunner(tools.ClientTools(), anthropic.BetaToolRunnerParams{BetaMessageNewParams: params})
//
// # What the model sees
//
// Every path is relative to the workspace (fsbackend's jail: an absolute
// path is taken inside it, the workspace's own absolute path included; ".."
// may not climb out of it; a symbolic link that leads out is refused). A
// failure the model can act on — a missing file, an escaping path, an
// str_replace whose old_str occurs 0 or 2+ times, a command that exits
// non-zero or times out — is a tool result with is_error set whose text says
// what to do; so is a failure of the sandbox itself. No tool call returns an
// error that ends the runner's loop.
//
// Results are capped at Options.MaxOutput characters (DefaultMaxOutput) and
// end with a line saying so when cut; a file view without view_range shows at
// most DefaultViewLines lines, with a note saying how to read on. The secret
// values of the sandbox (sandbox.CreateOptions.SecretEnv) and of
// Options.SecretEnv are replaced by "[REDACTED]" in everything returned,
// file contents included. A binary file is described (its size and how to
// inspect it with bash), never dumped.
//
// # Bash
//
// Each command is a fresh process in the sandbox (a provider may have no
// long-lived shell); the working directory and the shell's variables persist
// between calls through a state file outside the workspace (every assignment
// is exported). Functions, aliases and background jobs do not persist; a
// background job must redirect its output, or the call waits for it until
// its timeout. restart clears the state. Commands run one at a time.
//
// # One sandbox per conversation
//
// ForSession binds the tools to a session.Manager key: the sandbox is
// acquired on first use, each call extends its lease, and a sandbox found
// gone is replaced at the next call. WorkerToolsFunc gives each session an
// environment worker claims a sandbox of its own, destroyed when the worker
// closes the session's tools.
package anthropic
