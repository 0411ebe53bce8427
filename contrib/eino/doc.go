// Package eino plugs sandboxes into cloudwego/eino's agent development kit
// (adk): its Backend is eino's filesystem.Backend, Shell and StreamingShell
// over a sandbox per conversation (session.Manager) or over one sandbox,
// built on fsbackend, so the file tools of an eino agent are jailed to the
// sandbox's workspace, capped and redacted, and its execute tool runs in
// the sandbox, on every provider.
//
// The one line that makes an eino ChatModelAgent sandboxed:
//
//	b, _ := eino.New(mgr, eino.Options{AllowExecute: true})
//	mw, _ := eino.NewMiddleware(ctx, b, nil)
//	agent, _ := adk.NewChatModelAgent(ctx, &adk.ChatModelAgentConfig{Model: m, Handlers: []adk.ChatModelAgentMiddleware{mw}})
//	runner.Run(ctx, msgs, adk.WithSessionValues(map[string]any{eino.SessionKey: conversationID}))
//
// # What maps to what
//
//   - LsInfo, Read, GrepRaw, GlobInfo, Write, Edit: fsbackend's Ls, Read,
//     Grep (regular expressions, RE2), Glob, Write, Edit, one provider
//     round trip each (Edit two). Paths are relative to the workspace root;
//     absolute ones are re-rooted under it; nothing reaches outside it.
//     Read returns lines without numbers (eino's tool numbers them) and
//     honours eino's 1-based Offset; Limit 0 reads to the end.
//   - Execute, ExecuteStreaming: fsbackend's Execute, with the workspace as
//     working directory; the streaming one passes output on as the command
//     writes it (backend.ExecuteRequest.Stream).
//
// # Errors
//
// eino's Backend methods have only a Go error to report a failure, and
// eino's filesystem middleware returns it as the tool's error, which ends
// the agent's run. The Backend returns failures the model can act on as a
// *backend.Error (a Code such as file_not_found, invalid_path,
// binary_file, and a message naming the path); NewMiddleware wraps eino's
// middleware so that every failure of its tools reaches the model as the
// tool's result ("Error: ..."), and only what the model cannot help (the
// run's context ended, a closed Backend, a missing session key) ends the
// run. Use NewMiddleware rather than eino's filesystem.New directly.
package eino
