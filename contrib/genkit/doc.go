// Package sandboxgenkit gives a Firebase Genkit (Go) agent the file and
// shell tools of a sandbox: ls, read_file, write_file, edit_file, glob,
// grep and, when allowed, execute, as Genkit tools run by Genkit's own
// generate loop, on every provider of github.com/sandboxkit/sandbox.
//
// The tools are built on the module's fsbackend (the jail: every path is
// relative to the workspace and none leads out of it, symbolic links
// included; binary files are refused by the text tools) and session (one
// sandbox per conversation key, created on the key's first tool call,
// reattached after a restart, reaped when idle). Each tool call finds its
// conversation key in its context (WithConversation, or Options.Key).
//
// One line turns a Generate call into a sandboxed one:
//
//	resp, err := genkit.Generate(sandboxgenkit.WithConversation(ctx, "conv-42"), g,
//		ai.WithModelName("googleai/gemini-2.5-flash"), ai.WithUse(tools), ai.WithPrompt("..."))
//
// # Tool failures are tool results
//
// Genkit (v1.7.0) ends a whole Generate with an error as soon as one tool
// returns a Go error ("tool X failed"), and when the model asked for several
// tools in one turn, the other tools' goroutines stay blocked for ever
// (their results are sent on a channel nobody reads any more). A model
// that names a missing file, an ambiguous edit or a path outside the
// workspace should read what went wrong and try something else, so the tools
// never return a Go error: every failure, a cancelled context and a sandbox
// gone included, is the tool's output, with an error object
// {"code": ..., "message": ...} beside the fields of a success. The codes are
// fsbackend's (file_not_found, invalid_path, binary_file, no_match, ...) and,
// for failures of the sandbox or its provider, the snake_case name of the
// sandbox error code (unavailable, deadline_exceeded, canceled, ...).
//
// Genkit checks a tool's input against its JSON schema before the tool
// runs, and a mismatch (a number where a string belongs, a missing
// required field, a field the schema does not list) ends Generate too.
// Used as middleware (ai.WithUse(tools)), the Toolset also turns that
// refusal into an invalid_argument tool result, and a model call made after
// the context ended returns the context's error instead of reaching the
// model. Toolset.Define and Toolset.Tools give the same tools without the
// middleware, for prompts that name tools; add ai.WithUse(tools.Guard()) to
// such calls for the same treatment of bad input.
//
// The only Go error a tool returns is a missing conversation key: a
// configuration error, reported on the first call.
//
// # Caps and secrets
//
// Every text a tool returns is cut at Options.MaxOutput bytes (64 KiB by
// default) with a note saying how to read on; execute's output is capped
// at the same size and its timeout is at most Options.ExecuteTimeout.
// The values of Options.SecretEnv and Options.Secrets are replaced by
// "[REDACTED]" in every output and error message, those of the file tools
// too (a file that holds a secret reads back redacted).
package sandboxgenkit
