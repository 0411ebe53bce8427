// Command sandbox creates, inspects and drives code-execution sandboxes on any
// provider from the terminal, and serves them to language models as an MCP
// server.
//
// Install it with
//
//	go install github.com/sandboxkit/sandbox/cmd/sandbox@latest
//
// The provider comes from --url, else $SANDBOX_URL, else local:// (the
// embedded local provider: no account, no server). Every verb has --help
// with an example; "sandbox completion bash|zsh|fish|powershell" prints a
// completion script.
//
// # Exit status
//
// The tool's own failures (bad usage included) exit 125 after printing one
// line, "sandbox: <Code>: <message>" (with --json, a JSON object on stderr),
// so that they never collide with the status of a command that exec passes
// through: the command's own exit code, 124 when its timeout ended it (as
// timeout(1) does), 126 and 127 as POSIX shells report a program that cannot
// run or is missing, and 128+N as shells report a command that signal N
// ended, with a line on stderr naming the signal ("killed by signal SIGTERM
// (15); exiting 143"). A provider that cannot say which signal ended a
// command (Capabilities.ReportsSignal false: docker, daytona) reports either
// the shell's 128+N as the exit code or, when it knows only that a signal
// ended it, exit 137 (as for SIGKILL) with a note on stderr. An interrupt
// (Ctrl-C) exits 130.
//
// # Environment and secrets
//
// --env KEY=VALUE sets a variable for commands (its value is visible in the
// process list), --env KEY takes the value of $KEY from the tool's own
// environment, and --secret-env KEY does too and redacts the value from
// everything the tool prints: command output, --json fields and errors.
//
// # Bounded waits
//
// Every wait on a provider's control plane is bounded by --call-timeout
// (default 2m); past it the tool fails with DeadlineExceeded saying what
// timed out.
//
// # Shell
//
// "sandbox shell [ID]" connects the terminal to a login shell on a terminal
// in the sandbox (raw mode: Ctrl-C goes to the sandbox; window size changes
// follow), exits with the shell's status and restores the terminal on every
// exit. Without ID it runs in a new sandbox, destroyed when the shell exits
// unless --keep.
//
// # MCP
//
// "sandbox mcp" serves the file tools of fsbackend (ls, read_file,
// write_file, edit_file, glob, grep) and, with --allow-execute, execute and
// run_start, run_status, run_logs, over stdio or, with --http
// 127.0.0.1:PORT, streamable HTTP. Each MCP session gets its own sandbox,
// created on its first tool call and destroyed when the session ends, unless
// --reuse-label names a sandbox to keep and reattach to across restarts.
// Over HTTP every request must carry "Authorization: Bearer <token>": the
// token is printed on stderr at start, or given through --token-file or
// $SANDBOX_MCP_TOKEN (never argv); each token holds at most --max-sessions
// sessions, and a session idle for --idle-timeout ends, releasing its
// sandbox.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	_ "github.com/sandboxkit/sandbox/provider/daytona"
	_ "github.com/sandboxkit/sandbox/provider/docker"
	_ "github.com/sandboxkit/sandbox/provider/e2b"
	_ "github.com/sandboxkit/sandbox/provider/local"
	_ "github.com/sandboxkit/sandbox/provider/memory"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := newApp(os.Stdin, os.Stdout, os.Stderr).run(ctx, os.Args[1:])
	stop()
	os.Exit(code)
}
