// Package daytona is the sandbox provider for Daytona (daytona.io): the
// main REST API for the sandbox lifecycle and the toolbox API (the daemon
// in each sandbox, reached through the toolbox proxy) for commands and
// files. Import it for its side effect to use "daytona://" URLs:
//
//	import _ "github.com/sandboxkit/sandbox/provider/daytona"
//
//	c, err := sandbox.Open(ctx, "daytona://?target=eu")
//
// # Configuration
//
// The API key comes from DAYTONA_API_KEY (or WithAPIKey), never from a
// URL; DAYTONA_API_URL, DAYTONA_TARGET and DAYTONA_ORGANIZATION_ID set the
// API, the region and the organization header. URL parameters: api_url,
// target, snapshot, organization_id, toolbox=legacy (reach the toolbox
// through the API's older /toolbox/{id}/toolbox path). The Runtime uses
// its own http.Client with no global timeout: every deadline comes from
// the context, so a long command is not cut at 60 s (daytonaio/daytona#4750).
//
// # Mapping onto the sandbox contract
//
//   - Template is a snapshot name; the provider option "image" builds from
//     a container image instead, and only then do Resources apply.
//   - The lease is Daytona's auto-stop interval (whole minutes): a sandbox
//     stops after that long without toolbox activity and keeps its files.
//     SetTimeout sets the interval and resets the inactivity timer.
//     Commands running inside do not count as activity, but the polling of
//     a running Exec or of a followed background process does, so auto-stop
//     does not cut them.
//   - Auto-delete is off by default: a stopped sandbox keeps its files
//     (and its storage bill) until it is destroyed or archived. Setting
//     the provider option OptAutoDelete ("autoDeleteInterval", minutes) to
//     RecommendedAutoDeleteMinutes (60) deletes a sandbox that has stayed
//     stopped that long, so a leaked sandbox stops costing storage. It is not the default because Pause here is a stop:
//     a paused sandbox would be deleted behind its owner's back once the
//     interval passed. "0" deletes as soon as the sandbox stops.
//   - Pause is stop and Resume is start: processes end, files stay
//     (Capabilities.PauseKeepsMemory is false). A toolbox call on a sandbox
//     paused through this Runtime fails with sandbox.ErrPaused; one on a
//     sandbox stopped behind its back (auto-stop) starts the sandbox and
//     runs the call once more (WithoutAutoWake turns that off).
//   - A toolbox call that finds the sandbox gone asks the API: a deleted
//     sandbox is NotFound and the Runtime forgets it; an archived or
//     stopped one is handled as above.
//   - Exec keeps stdout and stderr split and byte-exact, streams them while
//     the command runs and keeps partial output on timeout, although the
//     toolbox's execute call merges and mangles them (see exec.go). A
//     short command is one request. Its files live in a scratch directory
//     (/tmp/.sandboxkit, WithScratchDir). The command's timeout is sent on
//     the wire, in whole seconds rounded up.
//   - Background processes are toolbox session commands; their PID is the
//     number in their session's name. Their output comes from the session
//     logs and is not binary-safe.
//   - Terminals are the toolbox's PTY sessions. The daemon runs the
//     user's login shell on each and takes no program, so the adapter
//     types a line into it that runs an uploaded script (holding the
//     environment; it removes itself), and passes output on only from the
//     script's marker: the caller sees the program's output alone. The
//     session lives in the sandbox, so any Client attaches to it by its
//     ID (output is not replayed: an attach sees what comes after it).
//     Signal finds the program by its environment with a command and
//     signals the terminal's foreground process group; a signal's exit
//     status is 128+N, as the daemon reports it.
//   - Which signal ended a command is not reported (ExitStatus.Signal is
//     always 0, Capabilities.ReportsSignal false): the wrapper sees only
//     the shell's $?, where a signal n reads 128+n, the same as "exit
//     128+n". An Exec killed by a signal therefore shows that code; a
//     background process ended after Signal shows ExitCode -1.
//   - Rename onto an existing file is atomic, as on the other providers:
//     the toolbox's move refuses an existing destination, so the file is
//     then replaced by rename(2) in the sandbox (mv through the execute
//     endpoint), and a reader sees the old file or the new one, never
//     neither. A directory at the destination is refused.
//   - Every create carries a hidden label with a random token, so a
//     sandbox whose create answer was lost is found and destroyed.
//   - GetOrCreate names the sandbox "sbx-" and 32 hex digits of its key
//     (or the "name" option): Daytona keeps names unique, so across
//     processes one create wins and the others attach to it (CreateKeyed).
//   - Brokered secrets (CreateOptions.BrokeredSecrets) are not declared:
//     Daytona's API (CreateSandbox and network-settings, SDK v0.190.0)
//     has no field for a secret or a header to inject, only
//     networkBlockAll, networkAllowList and domainAllowList, so the
//     portable layer refuses them with FailedPrecondition before any
//     request.
//
// # Errors
//
// HTTP failures are *HTTPError values, classified onto the sandbox
// sentinels (404 NotFound, 409 AlreadyExists or FailedPrecondition, 429
// and quota messages ResourceExhausted, with HTTPError.RetryAfter, which
// the portable layer's create retry honours (sandbox.RetryDelayer), 401/403
// PermissionDenied, toolbox 400 "Is the Sandbox started?" ErrPaused,
// 502/503/504 Unavailable), from either error body shape (NestJS or gin)
// or none. A read that meets a 502 while the sandbox says started is
// tried once more after a short pause. A request that failed before a
// single byte of it was written (no connection could be made, or the
// pooled connection it was given had already been reset) is
// sandbox.ErrStaleTransport; a mutating one that failed after it was even
// partly written is sandbox.ErrOutcomeUnknown, since the server may have
// acted on it (a connection dropped before the answer proves nothing). No
// error carries the API key.
//
// # Directory watch and process list
//
// The toolbox has no file watch: Watch polls, listing the directory through
// the toolbox every WatchInterval (500 ms, declared as
// Capabilities.WatchLatency) and reporting the differences. An event comes
// up to that late; a rename is reported as a remove and a create; a change
// undone within one interval is not seen; a recursive watch lists at most
// 256 directories per poll (one request each) and reports an overflow
// beyond. Processes lists the background processes Start started that
// still run, by the PID Start gave them, from their launcher's records and
// /proc (one command); the toolbox lists no other processes, so neither
// does the adapter.
package daytona
