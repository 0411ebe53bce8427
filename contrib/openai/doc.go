// Package openai runs the OpenAI Responses API's client-executed tools in
// a sandbox: the shell tool (with a local environment) and apply_patch,
// and the legacy local_shell tool, on any provider of
// github.com/sandboxkit/sandbox (local, memory, E2B, Daytona, Docker).
//
// The Responses API executes these tools on the client: the model answers
// with shell_call, apply_patch_call or local_shell_call output items, and
// the client runs them and sends back shell_call_output,
// apply_patch_call_output or local_shell_call_output items in the next
// request. Tools does the running, inside one sandbox, instead of on the
// host:
//
//	tools, err := openai.New(sb, openai.Options{})
//	params.Tools = append(params.Tools, tools.Params()...)
//	resp, err := tools.Run(ctx, &client.Responses, params, openai.RunOptions{})
//
// Import it under another name when the SDK's own openai package is
// imported too (sbopenai in the examples).
//
// # Shell
//
// Each command of a shell call runs in a fresh "sh -c" whose working
// directory is the workspace (state such as cd or exported variables does
// not carry to the next command), with the call's timeout_ms (Options.Timeout
// when the call sets none, at most Options.MaxTimeout). A command that
// times out gets the outcome {"type":"timeout"} with the output it
// produced before, and the call's later commands are not run (they
// usually depend on it). Otherwise the outcome is {"type":"exit",
// "exit_code":N}; a command ended by a signal reports 128+signal, as a
// shell does.
//
// Output is capped per command at the call's max_output_length characters
// (Options.MaxOutputLength when the call sets none or asks for more),
// shared between stdout and stderr: what is cut is the middle of a
// stream, replaced by a line "[... N bytes truncated ...]", so the start and
// the end (where errors are) survive. A command's output is streamed
// through bounded buffers: a command that writes gigabytes costs a few
// hundred KiB of memory. The values of Options.SecretEnv, and the
// sandbox's brokered secrets, are replaced by "[REDACTED]" in everything
// sent back to the model.
//
// # apply_patch
//
// An apply_patch call carries one operation, create_file, update_file or
// delete_file, on one path, relative to the workspace root. Paths go
// through the file tools' jail (fsbackend): ".." may not climb above the
// workspace, an absolute path is re-rooted under it (the workspace's own
// absolute prefix is accepted), and a symbolic link is followed only while
// it stays inside. The operation is applied whole or not at all: an
// update_file diff is parsed and every hunk located against the file's
// content before the file is written, in one write, so a diff whose
// context does not match leaves the file as it was.
//
// create_file refuses a path that exists (use update_file), update_file
// refuses a missing file and a binary one (a file written as bytes, or
// whose content is not text), delete_file removes a file (a symbolic link
// is removed itself, never its target) and refuses a directory. Each
// failure is a failed apply_patch_call_output whose output says what went
// wrong and what to do, never a Go error: Go errors are kept for what the
// model cannot act on (the context ended, the sandbox is gone, the
// transport failed).
//
// # Conversations
//
// Conversations hands out one Tools per conversation key over a
// session.Manager: one sandbox per conversation, created on first use,
// reattached after a restart, extended on every call and reaped when idle.
package openai
