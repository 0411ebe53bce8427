// Package sandbox lets Go programs run untrusted code, often written by a
// language model, in sandboxes, with the same code on every provider: an
// embedded local provider (no account, no server), E2B, Daytona, and an
// in-memory fake for unit tests.
//
// Programs hold a *Client (one provider) and *Sandbox handles (one sandbox
// each). Providers implement the thin Runtime interface; the portable layer
// in this package adds the policy once for all of them: input validation,
// defaults, output caps with per-stream truncation flags, secret redaction,
// partial output on timeouts, error classification, the single retry after
// a stale transport, and destroying a sandbox whose Create finished after
// the caller gave up.
//
// The usual job (write input files, run a program, read back what it
// wrote) is one call, [Sandbox.Run]:
//
//	client, err := sandbox.Open(ctx, "") // SANDBOX_URL, else the local provider
//	sb, err := client.Create(ctx, sandbox.CreateOptions{})
//	defer sb.Destroy(ctx)
//	res, err := sb.Run(ctx, sandbox.Command{Args: []string{"python3", "stats.py"}, Timeout: time.Minute}, sandbox.RunOptions{
//		Files:   []sandbox.File{{Path: "a.csv", Data: a}, {Path: "b.csv", Data: b}, {Path: "stats.py", Data: script}},
//		Outputs: []string{"stats.json"},
//	})
//	var ee *sandbox.ExitError
//	if errors.As(err, &ee) { ... } // it ran and failed: ee.ExitCode, ee.Stderr
//	fmt.Printf("%s", res.Files["stats.json"])
//
// [Sandbox.Output] returns one command's stdout under the same rule: a
// command that ran and failed is an *ExitError, any other failure an
// *Error. [Sandbox.Exec] returns the whole Result instead, a non-zero
// exit included.
//
// # Commands
//
// A Command is an argv (Args, no shell) or a shell line (Shell). Its stdin
// is closed unless Stdin is set. Stdout and Stderr writers receive output
// live; Result holds the captured output, capped at MaxOutput per stream.
// The command's Timeout is always sent to the provider (no hidden provider
// default applies) and is bounded by ctx's deadline; Result.TimeoutBy says
// which of the two ended the command. A non-zero exit code is a Result,
// never an error (Output and Run make it an *ExitError).
//
// # Leases and ownership
//
// A sandbox lives until its lease ends (CreateOptions.Timeout). On a
// handle that owns its sandbox (see [Sandbox.Owned]), Exec, Output, Run
// and Start first extend a lease that would end during the command's
// timeout to that timeout plus [CommandLeaseGrace], at most to
// Capabilities.MaxLease, so a command is not cut off by a lease shorter
// than its timeout; a command lost to the end of the lease anyway fails
// with an error matching ErrLeaseExpired. Only the owner changes the sandbox's lifecycle: Pause,
// Resume, SetTimeout and SetNetwork on any other handle fail with
// FailedPrecondition, and its Destroy only forgets the handle.
//
// # Errors
//
// Every method's error is an *Error (a batch, such as WriteFiles, joins
// one per failed file with errors.Join; Output and Run report a command
// that ran and failed as an *ExitError). An *Error carries the operation,
// provider, sandbox id, path and a Code. Use CodeOf(err) or errors.Is with the
// sentinels (ErrNotFound, ErrPaused, ErrLimit, ErrStaleTransport, ...); a
// missing file also matches fs.ErrNotExist. Bad input is InvalidArgument
// and the message names the input. Error text never holds API keys,
// access tokens, signed URLs or the values of SecretEnv: not the
// outermost text, and not that of any error a caller or a logger reaches
// with errors.Unwrap (each link of the chain is a redacted copy that
// errors.Is, errors.As for *Error and CodeOf still match).
//
// Like database/sql with driver.ErrBadConn, a call that failed because the
// transport was dead before the request was sent is retried exactly once
// after the transport is reset (OnTransportReset listeners run first). A
// command whose request may have reached the provider is never re-sent: it
// fails with ErrOutcomeUnknown.
//
// # Defaults
//
// Every default bound of the portable layer, in one place (each can be
// changed on the Client):
//
//   - Command timeout: DefaultCommandTimeout (10 min) when neither the
//     Command nor WithCommandTimeout sets one; ctx's deadline bounds it too.
//     A 30 min budget suits the lifetime of a background run, which package run keeps (its
//     DefaultBudget is 30 min). A synchronous Exec holds its caller and a
//     connection for the command's whole life, so its default is shorter:
//     a hung command surfaces after 10 min instead of 30, and work that
//     needs longer is either given its own Timeout or started as a run.
//   - Captured output: DefaultMaxOutput (10 MiB) per stream (WithMaxOutput).
//   - ReadFile: files over DefaultMaxReadFile (10 MiB) are refused with
//     ErrLimit, checked by Stat before the transfer and while reading
//     (WithMaxReadFile; 0 = no cap). Download is never capped.
//   - Provider calls made with a ctx that has no deadline (see
//     CallTimeouts, WithCallTimeouts): Create 2 min; Get and each List
//     page 10 s; Destroy, SetTimeout and Pause 1 min; Resume 2 min; Exec
//     the command's timeout plus 30 s; Upload and Download end only when
//     no bytes move for 2 min, never for their total time. A ctx with a
//     deadline is used as is. A call ended by one of these bounds fails
//     with DeadlineExceeded and says which bound ended it.
//   - Create retries a provider's transient refusal (429, 503, no
//     capacity: ResourceExhausted or Unavailable) with jittered
//     exponential backoff from 1 s to 30 s, waiting at least the
//     provider's Retry-After (RetryDelayer), for up to 2 min and within
//     ctx's deadline (CallTimeouts.CreateRetry). A missing template, bad
//     credentials, invalid input or an outcome-unknown create are never
//     retried.
//   - WaitForPort with a ctx that has no deadline: DefaultPortWait (60 s;
//     WaitForPortOptions.Timeout), so a wait for a server that never
//     listens ends on its own.
//   - Clean-up of a sandbox orphaned by a failed create: 30 s
//     (WithCleanupTimeout).
//
// # URLs
//
// Open picks a provider by URL scheme; providers register their scheme when
// their package is imported:
//
//	local://                      the embedded local provider (default)
//	local:///var/lib/sandboxes    ... with its sandboxes under that root
//	memory://                     a fresh in-memory fake; memory://name is shared by name
//	e2b://                        E2B (E2B_API_KEY)
//	daytona://                    Daytona (DAYTONA_API_KEY)
//
// An empty URL means $SANDBOX_URL, and then "local://".
//
// # Providers
//
// Capabilities tells what a provider can do beyond the Runtime interface:
// pause (and whether it keeps memory), background processes, label search
// on the server, persistence across client restarts, the isolation it
// gives and its lease limits. Calls a provider cannot serve fail with
// ErrUnimplemented. Package sandboxtest is the conformance suite every
// provider passes.
//
// Client.GetOrCreate creates at most one sandbox per key (template and
// labels) among concurrent callers on one Client. Across Clients and OS
// processes it is the provider's guarantee ([driver.KeyedCreator]): local takes a
// lock file per key in its root; Daytona names the sandbox after the key
// and attaches on the 409 for a taken name; E2B, which has no unique
// names, checks after creating and keeps the oldest sandbox with the
// labels (a loser destroys its own), which an eventually consistent list
// can defeat; memory lives in one process.
package sandbox
