// Package run provides durable, idempotent background runs over any
// [sandbox.Sandbox]: a long command that outlives the request that started
// it and the client that asked, never runs twice for one run id, and keeps
// its status, combined output and exit code in files inside the sandbox, so
// that a new process holding a new Client can find it again.
//
// # Starting
//
// [Start] admits a run under a caller-chosen id. Admission is claimed
// atomically in the sandbox (mkdir of the run's directory) and recorded
// with a fingerprint of the request (SHA-256 over the command, the working
// directory and the sorted environment). Starting again with the same id
// and the same request returns the same run and never starts a second
// process; the same id with a different request fails with an error
// matching [ErrConflict] (Code AlreadyExists). Ids may hold any bytes: the
// directory name is a collision-free, filesystem-safe encoding of the id.
// A request without an id gets a fresh one, "run-<sandbox id>-<Unix
// milliseconds>-<random hex>" (a random part keeps two runs started in one millisecond apart), so
// it is never deduplicated: retry with [Run.ID], or choose the id, to be
// idempotent.
//
// When the start command's transport fails in a way that leaves its outcome
// unknown ([sandbox.ErrOutcomeUnknown]), Start does not submit the run
// again: it reconciles from the records in the sandbox and the sandbox's
// process list, adopts the process that was admitted, and kills any
// duplicate it finds. Even a second launch cannot run the command twice:
// the wrapper that runs it claims the run's start guard (another mkdir)
// before doing anything else, and exits when another wrapper holds it.
//
// # Detachment and budget
//
// The command runs under a small fixed POSIX sh wrapper, written into the
// run's directory and started detached from the request (setsid, or nohup
// where setsid is missing). The caller's command, directory and environment
// are passed to it as data (argv and environment), never as shell text.
// The run's lifetime is bounded by its Budget, enforced inside the sandbox
// by timeout(1); it is unrelated to the context of the call that starts
// it, so a short request deadline never ends a long run. Start also extends
// the sandbox's lease to cover the budget. Starting the command under
// timeout(1), recording its pid and exit atomically, telling the budget's
// end from a Kill and signalling its process group are internal/bgproc's
// shell functions, the same that run provider/daytona's background
// processes; what is the run's own (the claim, the start guard, admission
// and reconciliation) stays in this package's scripts.
//
// # Records
//
// Each run has a directory under $HOME/.sandboxkit/runs in the sandbox
// (created readable by the sandbox's user only) holding its request record, admission record (the wrapper's pid and the
// fingerprint), combined output, and exit record. The records are published
// atomically (written to a temporary file, then renamed; the request record
// is linked, so that it is never replaced). A run whose process is gone
// without an exit record is reported as [Lost] with exit code 255.
//
// The admission record is read strictly: exactly the wrapper's pid, one
// space and the 64 lower-case hex digits of the request's fingerprint,
// nothing before, between or after. A record of any other form, or one
// whose fingerprint is not the run's, is damaged or was written by
// something else: Status, Wait, Open, Kill and Start fail with an error
// matching [ErrBadRecord] rather than trust its pid, and Start kills no
// duplicate wrapper on its word. Every wrapper this package has written
// (v1 and v2) records "<pid> <fingerprint>", so there is no older form to
// accept; a record holding only a pid is refused like any other damage.
//
// # Requirements
//
// The sandbox must run commands with a POSIX sh and the usual tools (mkdir,
// mv, ln, cat, tail, head, tr, grep, sed, date, sleep, kill, timeout and,
// for the best detachment, setsid), and expose /proc for the process list,
// as Linux sandboxes of E2B, Daytona and the local provider do. In a
// sandbox without timeout(1), Start fails with Code FailedPrecondition.
//
// The run's command sees two extra environment variables: SANDBOXKIT_RUN
// (the encoded id) and SANDBOXKIT_RUN_DIR (the run's directory). Names
// starting with SANDBOXKIT_ are reserved.
package run
