// Package interp runs code cell by cell in a stateful interpreter inside a
// [sandbox.Sandbox], on every provider, and returns rich results: streamed
// stdout and stderr, the value of the last expression in the formats the
// object offers (text/plain, text/html, text/markdown, application/json,
// image/png, ...), every matplotlib figure a cell created or changed as a
// PNG, and an exception's name, value and traceback. It is what E2B's
// code-interpreter run_code and Daytona's code_run offer, without Jupyter,
// on local sandboxes as well.
//
//	k, err := interp.New(ctx, sb, interp.Options{})           // a Python kernel
//	defer k.Close(ctx)
//	_, err = k.Run(ctx, "import math\nr = 2", interp.RunOptions{})
//	ex, err := k.Run(ctx, "math.pi * r**2", interp.RunOptions{})
//	fmt.Println(ex.Text())                                    // 12.566370614359172
//
// A [Kernel] is one context: its variables, imports, functions and working
// directory persist from one Run to the next. [Kernel.NewContext] starts
// another, independent kernel in the same sandbox; kernels run
// concurrently, while the cells of one kernel run one at a time. A cell's
// RunOptions.Timeout, or the end of Run's ctx, interrupts the cell
// (SIGINT: KeyboardInterrupt in Python) and keeps the kernel and its state.
// A cell that has not ended RunOptions.TimeoutGrace later (2 s by default:
// it caught or ignored the interrupt, or is stuck in a call no signal
// breaks) is ended for sure: its kernel is killed and a fresh one started,
// and Run's error matches [ErrRestarted] (Execution.Restarted is set), so
// that the caller knows the state is gone and the next cell never waits
// behind a runaway one. [Kernel.Restart] starts afresh; [Kernel.Close]
// ends the kernel.
//
// # Limits
//
// What Run keeps of a cell is capped, as Exec's output is: each stream at
// RunOptions.MaxOutput ([DefaultMaxOutput], 10 MiB, Exec's own default),
// the results at MaxResults ([DefaultMaxResults], 100) and MaxResultBytes
// ([DefaultMaxResultBytes], 10 MiB: text forms and images together). What
// is past a cap is dropped and flagged (StdoutTruncated, StderrTruncated,
// ResultsTruncated, Result.Truncated); the callbacks still get all the
// output. The kernel itself stops sending a stream past its cap (when no
// callback wants it) and cuts or drops results past theirs, and Run's
// memory stays within a small multiple of the caps whatever the kernel
// sends (an event line longer than any the caps allow is skipped unread),
// so a cell that prints without end costs the caller bounded memory. A cut never shows part of a
// secret: text is redacted before it is cut, and where the kernel cut it,
// the last 64 KiB before the kernel's cut are left out up to the last
// place where no secret runs across.
//
// # Languages
//
// Python (python3, standard library only; matplotlib is used when the
// sandbox has it, with the Agg backend), Bash (one persistent bash:
// variables, functions, cwd and exports persist; a non-zero exit status of
// a cell is its Error) and Node.js where node exists in the sandbox (one
// persistent vm context; the completion value of the cell is its result;
// Timeout and interrupts use vm's own timeout and breakOnSigint; output
// comes from the cell's console and process.stdout). Python output is captured at the sys.stdout and
// sys.stderr level: a subprocess the cell starts writes to the kernel's log,
// not to the cell, as in classic Jupyter.
//
// # How it talks to the kernel
//
// The protocol needs nothing from a provider but Exec with a closed or
// finite stdin, so it behaves the same on local, E2B and Daytona (whose
// background processes' stdin is not streamed today) and survives a
// transport failure:
//
//   - New runs one launcher command. It stores the kernel program, which is
//     embedded in this package, under $HOME/.sandboxkit/interp named by its
//     content hash (written once per sandbox and version; the source rides
//     on the launcher's stdin), creates the kernel's directory (mode 0700)
//     with two FIFOs, in and out, and starts the kernel detached (setsid)
//     under a small monitor sh that reaps it and reports its end, so that
//     it outlives the command that started it.
//   - Each Run is one Exec of a small sh client that uses shell builtins
//     only on its fast path (starting a program in a sandbox is what
//     costs): it stores the request (a JSON header line, then the code,
//     passed as an argument; a request over 64 KiB goes by WriteFile
//     first), writes its number to in, and blocks reading out until the
//     kernel wakes it. The kernel appends the request's events to a file:
//     JSON lines, ASCII only, stream data in base64 (Daytona's output is
//     not binary-safe), ending with a "done" event, and then wakes the
//     client, which prints the events. While a cell runs, the kernel wakes
//     the client when there is new output (at most every 200 ms), and the
//     client returns what there is, at most 4 MiB read from a byte offset;
//     Run follows with another Exec from where that ended, holding a line
//     that is not complete yet until the rest comes, so that an event of
//     any size (a large value, a large figure) is read in parts. That is how
//     output streams to RunOptions.OnStdout (Python; Bash output comes
//     when the cell ends). A client whose transport failed is run again
//     from the same offset, and a request is never run twice.
//   - Interrupt is an Exec of kill -INT for the kernel's process group,
//     sent only while that cell runs; a Timeout is enforced by the kernel
//     itself, so it holds even while no client waits, and by Run, which
//     kills the kernel once the grace after it is over (a Bash cell's
//     output, which its kernel sends only when the cell ends, is read from
//     its files first, bounded in size and time).
//   - Killing a kernel ends every process its cells started, also those
//     that left its session (setsid) or lost their parent: each inherits
//     an environment variable naming its kernel, and the killer walks
//     /proc for it, for the monitor's session and process group and for
//     their descendants, stopping what it finds before killing it so that
//     nothing forks past it. A kill that leaves any alive is reported as
//     [ErrNotKilled], never as a restart. Events that make no sense (a
//     cell may write to its kernel's files) end the kernel the same way:
//     a cell is never left running unseen.
//   - A kernel that died (killed, out of memory) is reported by its
//     monitor, or found missing by its pid (a sandbox resumed without its
//     memory); Run returns [ErrDied], now or on the next call. A paused
//     sandbox whose provider keeps memory resumes with its kernel.
//
// # Secrets
//
// The events are read unredacted, since the portable layer's redaction
// would corrupt them, and the secret values of the sandbox are redacted
// here field by field: every stream line, every text form of a result, the
// error's name, value and traceback. Stream output is handed on line by
// line, so a secret split across two writes is still found; a line without
// its newline waits for the next one or for the cell's end. Images are
// returned as produced.
package interp
