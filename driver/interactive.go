package driver

import (
	"context"
	"io"
	"iter"
	"syscall"
	"time"
)

// TerminalRequest is what the portable layer passes to
// TerminalRuntime.StartTerminal: validated, Rows and Cols > 0, Dir
// absolute and never empty.
type TerminalRequest struct {
	// Args is the program and its arguments; empty means the sandbox
	// user's login shell (or the provider's default shell).
	Args []string
	// Dir is the working directory.
	Dir string
	// Env adds environment variables; TERM is set ("xterm-256color")
	// unless Env sets it.
	Env map[string]string
	// Rows and Cols are the initial window size.
	Rows, Cols uint16
	// Output receives everything the terminal writes (the program's
	// stdout and stderr together, with the terminal's echo), from the
	// start, until the handle is closed. Never nil.
	Output io.Writer
	// Timeout ends the terminal's program after this long; 0 means no limit.
	Timeout time.Duration
}

// TerminalRuntime is implemented by providers that run a program on a
// pseudo-terminal in the sandbox, with the same confinement as Exec.
type TerminalRuntime interface {
	// StartTerminal starts req's program on a new pseudo-terminal and
	// returns once it runs. ctx bounds only the start.
	StartTerminal(ctx context.Context, id string, req *TerminalRequest) (TerminalHandle, error)
	// AttachTerminal connects to a running terminal by its handle's ID,
	// possibly from another OS process (where
	// Capabilities.AttachAcrossClients holds). Output written after the
	// attach goes to out (non-nil). An unknown terminal is NotFound.
	AttachTerminal(ctx context.Context, id, terminalID string, out io.Writer) (TerminalHandle, error)
}

// TerminalHandle is a driver's handle on one terminal.
type TerminalHandle interface {
	// ID identifies the terminal within its sandbox for AttachTerminal.
	ID() string
	// PID is the program's process id in the sandbox, where known (0 if not).
	PID() int
	// Write sends input to the terminal, as typed keys: "\x03" is Ctrl-C
	// and, with the terminal's line discipline, interrupts the
	// foreground program.
	Write(ctx context.Context, p []byte) error
	// Resize sets the window size; the program gets SIGWINCH.
	Resize(ctx context.Context, rows, cols uint16) error
	// Signal sends sig to the terminal's foreground process group (or to
	// the program, where the provider cannot tell). Once the program has
	// exited it returns nil and sends nothing, promptly (no waiting for
	// a process that will not come).
	Signal(ctx context.Context, sig syscall.Signal) error
	// Wait blocks until the program exits (or ctx ends) and returns its
	// status; all output has been written when it returns. Safe to call
	// from several goroutines.
	Wait(ctx context.Context) (ExitStatus, error)
	// Close releases the handle without ending the program.
	Close() error
}

// FileEventKind is what happened to a path under a watched directory.
type FileEventKind string

// The file event kinds.
const (
	// FileCreated: Path was created (also the new name of a rename).
	FileCreated FileEventKind = "create"
	// FileWritten: Path's contents changed.
	FileWritten FileEventKind = "write"
	// FileRemoved: Path was removed.
	FileRemoved FileEventKind = "remove"
	// FileRenamed: Path was renamed away; the new name, when it stays
	// under the watched directory, comes as a FileCreated event.
	FileRenamed FileEventKind = "rename"
	// FileChmod: Path's permissions or other metadata changed.
	FileChmod FileEventKind = "chmod"
	// FileOverflow: events were lost (the consumer was too slow, or the
	// provider's own queue overflowed); Path is the watched directory.
	// The consumer should rescan.
	FileOverflow FileEventKind = "overflow"
)

// FileEvent is one change under a watched directory.
type FileEvent struct {
	// Path is the absolute path in the sandbox.
	Path string
	Kind FileEventKind
	// IsDir is true when Path is a directory, where the provider says.
	IsDir bool
	// Time is when the provider saw the event; zero when it does not say.
	Time time.Time
}

// WatchRequest is what the portable layer passes to Watcher.Watch.
type WatchRequest struct {
	// Recursive watches every directory below Dir, including ones created
	// later.
	Recursive bool
	// Buffer is the most events held for a slow consumer before they are
	// replaced by one FileOverflow event; > 0.
	Buffer int
}

// Watcher is implemented by providers that report file changes under a
// directory of a sandbox.
type Watcher interface {
	// Watch starts watching dir and returns once the watch is in place
	// (a change made after Watch returned is reported). A dir that does
	// not exist is NotFound, a file ErrNotDirectory. The sequence yields
	// events in the order the provider saw them until ctx ends (then it
	// stops without an error) or the watch fails (it yields the error and
	// stops); breaking out of the loop ends the watch. Memory is bounded
	// by req.Buffer whatever the consumer does.
	Watch(ctx context.Context, id, dir string, req *WatchRequest) (iter.Seq2[FileEvent, error], error)
}

// ProcessInfo describes a process running in a sandbox.
type ProcessInfo struct {
	// PID identifies the process within its sandbox.
	PID int
	// Args is its command line, where the provider sees it.
	Args []string
	// StartedAt is when it started; zero when the provider does not say.
	StartedAt time.Time
	// Handle is true when the process is one this SDK started with
	// Start (or StartTerminal) and ProcessRuntime.Attach can follow it.
	Handle bool
	// Terminal is the terminal's ID when the process runs on one started
	// with StartTerminal.
	Terminal string
}

// ProcessLister is implemented by providers that can list the processes
// running in a sandbox.
type ProcessLister interface {
	// Processes lists the processes running in sandbox id, sorted by PID;
	// a process that has exited is not in it.
	Processes(ctx context.Context, id string) ([]ProcessInfo, error)
}
