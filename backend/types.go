package backend

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
)

// DefaultReadLimit is the number of lines Read returns when Limit is 0.
const DefaultReadLimit = 2000

// DefaultMaxChars is the number of characters ReadChars returns when
// MaxChars is 0.
const DefaultMaxChars = 20000

// EndOfFile is what ReadChars returns for a window that starts at or past
// the end of a non-empty file.
const EndOfFile = "[End of file reached]"

// FileInfo describes one entry of an Ls or Glob result.
type FileInfo struct {
	// Path is relative to the workspace root, such as "src/main.go".
	Path string
	// IsDir reports a directory.
	IsDir bool
	// Size is the size in bytes (0 for directories).
	Size int64
	// ModTime is the modification time, when the backend knows it.
	ModTime time.Time
}

// LsRequest asks for the entries of a directory.
type LsRequest struct {
	// Path is the directory; "" means the workspace root.
	Path string
}

// LsResult lists a directory.
type LsResult struct {
	Files []FileInfo
	Error *Error
}

// Text renders the listing for the model (see the package documentation).
func (r *LsResult) Text() string {
	if r.Error != nil {
		return r.Error.Text()
	}
	return infoText(r.Files)
}

func infoText(files []FileInfo) string {
	if len(files) == 0 {
		return "No files found"
	}
	var b strings.Builder
	for i, f := range files {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(f.Path)
		if f.IsDir {
			b.WriteByte('/')
		}
	}
	return b.String()
}

// ReadRequest asks for a window of a text file's lines.
type ReadRequest struct {
	// Path is the file.
	Path string
	// Offset is the 0-based index of the first line to return.
	Offset int
	// Limit is the number of lines to return; 0 means DefaultReadLimit.
	Limit int
}

// ReadResult is a window of numbered lines.
type ReadResult struct {
	// Content is the window rendered as numbered lines (see the package
	// documentation); "" for a window past the end or an empty file.
	Content string
	// TotalLines is the number of lines in the file.
	TotalLines int
	// Truncated reports that the lines asked for exceed the backend's cap
	// on the bytes one read returns: Content ends at the last whole line
	// that fit (or holds the start of a single longer line), and a later
	// Offset reads on.
	Truncated bool
	Error     *Error
}

// Text returns Content, or the error, with a note when the window was
// cut.
func (r *ReadResult) Text() string {
	if r.Error != nil {
		return r.Error.Text()
	}
	if r.Truncated {
		return r.Content + "\n[Output truncated at the read size limit: read on with a later offset or fewer lines]"
	}
	return r.Content
}

// ReadBytesRequest asks for a whole file as bytes.
type ReadBytesRequest struct {
	Path string
}

// ReadBytesResult holds a file's bytes.
type ReadBytesResult struct {
	Data []byte
	// Binary reports that the file carries the backend's binary mark
	// (it was last written as bytes).
	Binary bool
	Error  *Error
}

// Text describes the result for the model; the bytes themselves are in Data.
func (r *ReadBytesResult) Text() string {
	if r.Error != nil {
		return r.Error.Text()
	}
	return fmt.Sprintf("Read %d bytes", len(r.Data))
}

// ReadCharsRequest asks for a window of a text file's characters.
type ReadCharsRequest struct {
	Path string
	// Offset is the 0-based index of the first character (code point).
	Offset int
	// MaxChars is the window's length; 0 means DefaultMaxChars.
	MaxChars int
}

// ReadCharsResult is a window of characters.
type ReadCharsResult struct {
	// Content is the window, or EndOfFile for a window at or past the end
	// of a non-empty file; "" for an empty file.
	Content string
	// TotalChars is the number of characters in the file.
	TotalChars int
	Error      *Error
}

// Text returns Content, or the error.
func (r *ReadCharsResult) Text() string {
	if r.Error != nil {
		return r.Error.Text()
	}
	return r.Content
}

// WriteRequest asks to write a text file.
type WriteRequest struct {
	Path    string
	Content string
}

// WriteBytesRequest asks to write a file's raw bytes.
type WriteBytesRequest struct {
	Path string
	Data []byte
}

// WriteResult reports a write.
type WriteResult struct {
	// Path is the written path, relative to the workspace root.
	Path string
	// Bytes is the number of bytes written.
	Bytes int64
	Error *Error
}

// Text renders the result for the model.
func (r *WriteResult) Text() string {
	if r.Error != nil {
		return r.Error.Text()
	}
	return fmt.Sprintf("Wrote %d bytes to %s", r.Bytes, r.Path)
}

// RemoveRequest asks to remove one file, or one symbolic link itself
// (never its target). A directory is refused: removing a tree is a
// command's job, not a file tool's.
type RemoveRequest struct {
	Path string
}

// RemoveResult reports a removal.
type RemoveResult struct {
	// Path is the removed path, relative to the workspace root.
	Path  string
	Error *Error
}

// Text renders the result for the model.
func (r *RemoveResult) Text() string {
	if r.Error != nil {
		return r.Error.Text()
	}
	return "Removed " + r.Path
}

// EditRequest asks to replace a string in a text file.
type EditRequest struct {
	Path      string
	OldString string
	NewString string
	// ReplaceAll replaces every occurrence; otherwise OldString must occur
	// exactly once.
	ReplaceAll bool
}

// EditResult reports an edit.
type EditResult struct {
	Path string
	// Occurrences is how many occurrences were replaced.
	Occurrences int
	Error       *Error
}

// Text renders the result for the model.
func (r *EditResult) Text() string {
	if r.Error != nil {
		return r.Error.Text()
	}
	return fmt.Sprintf("Replaced %d occurrence(s) in %s", r.Occurrences, r.Path)
}

// GlobRequest asks for the paths matching a pattern.
type GlobRequest struct {
	// Pattern is a glob (see MatchGlob): "*.go" matches by base name at any
	// depth, "src/**/*.go" matches paths relative to the workspace root.
	Pattern string
	// Path is the directory to search; "" means the workspace root.
	Path string
}

// GlobResult lists the matches.
type GlobResult struct {
	Files []FileInfo
	// Unreadable lists, sorted, the directories (each ending in "/")
	// that could not be opened, for lack of permission or another error:
	// what they hold is not in Files, and is not known to be absent.
	Unreadable []string
	Error      *Error
}

// Text renders the matches for the model.
func (r *GlobResult) Text() string {
	if r.Error != nil {
		return r.Error.Text()
	}
	return infoText(r.Files) + unreadableText(r.Unreadable)
}

// unreadableText renders the entries a search could not read, at most 10
// of them, on a line of its own ("" when there are none).
func unreadableText(list []string) string {
	n := len(list)
	if n == 0 {
		return ""
	}
	shown := list[:min(n, 10)]
	more := ""
	if n > len(shown) {
		more = fmt.Sprintf(" and %d more", n-len(shown))
	}
	return fmt.Sprintf("\n[could not be read (permission denied or an I/O error): %s%s]", strings.Join(shown, ", "), more)
}

// GrepRequest asks for the lines containing a literal string, or
// matching a regular expression, with optional context lines around each
// match, all in one search.
type GrepRequest struct {
	// Pattern is a literal string unless Regex is set. A literal pattern
	// holding a newline matches nothing (lines have none).
	Pattern string
	// Regex makes Pattern a regular expression in RE2 syntax, the syntax
	// of Go's regexp package (https://golang.org/s/re2syntax): it matches
	// anywhere in a line unless anchored with ^ or $, and has no
	// backreferences or lookaround. A pattern that does not compile is
	// refused with CodeInvalidArgument naming it, before any search.
	Regex bool
	// IgnoreCase matches letters regardless of case (grep -i), for a
	// literal pattern or a regular expression.
	IgnoreCase bool
	// Before is the number of lines of context returned before each
	// match (grep -B); 0 means none.
	Before int
	// After is the number of lines of context returned after each match
	// (grep -A); 0 means none.
	After int
	// Path is a directory to search recursively, or one file; "" means the
	// workspace root.
	Path string
	// Glob, when set, keeps only files matching it (see MatchGlob).
	Glob string
	// MaxCount caps the number of matches returned; 0 means no cap beyond
	// the backend's own output limit. Context lines do not count: those
	// of the matches returned are returned with them.
	MaxCount int
}

// GrepMatch is one matching line, or a line of context around one
// (Context set).
type GrepMatch struct {
	// Path is relative to the workspace root.
	Path string
	// Line is the 1-based line number.
	Line int
	// Text is the line without its newline. A line that is not text (it
	// holds a control character other than tab, vertical tab, form feed
	// and carriage return, or bytes that are not UTF-8, such as a
	// terminal escape sequence) is returned escaped: each such byte is
	// written \xNN (ESC is \x1b), and Escaped is set. Such a match is
	// never dropped.
	Text string
	// Escaped reports that Text holds \xNN escapes for bytes of the line
	// that are not text (see Text); a literal backslash is not escaped.
	Escaped bool
	// Context reports a line returned as context (GrepRequest.Before or
	// After) of a match near it, that does not match itself. Each line
	// appears once, however many matches it is near.
	Context bool
}

// GrepResult lists the matches, sorted by path and line.
type GrepResult struct {
	// Matches holds the matching lines and, when context was asked for,
	// the context lines around them (GrepMatch.Context set), in order.
	Matches []GrepMatch
	// Truncated reports that more matches existed than were returned.
	Truncated bool
	// Skipped lists the files that were not searched, sorted: files larger
	// than the backend reads, hard links to files with other names, and
	// the entries of Unreadable.
	Skipped []string
	// Unreadable lists, sorted, the files and directories (a directory
	// ends in "/") that could not be read, for lack of permission or
	// another error: they were not searched, and what a directory holds
	// is not known. Each is also in Skipped.
	Unreadable []string
	Error      *Error
}

// Text renders the matches for the model.
func (r *GrepResult) Text() string {
	if r.Error != nil {
		return r.Error.Text()
	}
	var b strings.Builder
	if len(r.Matches) == 0 {
		b.WriteString("No matches found")
	}
	hasContext := slices.ContainsFunc(r.Matches, func(m GrepMatch) bool { return m.Context })
	found := 0
	for i, m := range r.Matches {
		if i > 0 {
			b.WriteByte('\n')
			// As grep -A/-B/-C: "--" between groups of lines that are
			// not adjacent.
			if p := r.Matches[i-1]; hasContext && (p.Path != m.Path || p.Line+1 != m.Line) {
				b.WriteString("--\n")
			}
		}
		// As grep: "path:line:text" for a match, "path-line-text" for a
		// context line.
		sep := ':'
		if m.Context {
			sep = '-'
		} else {
			found++
		}
		fmt.Fprintf(&b, "%s%c%d%c%s", m.Path, sep, m.Line, sep, m.Text)
	}
	if r.Truncated {
		fmt.Fprintf(&b, "\n[results truncated at %d matches]", found)
	}
	passed := r.Skipped
	if len(r.Unreadable) > 0 {
		passed = nil
		for _, p := range r.Skipped {
			if !slices.Contains(r.Unreadable, p) {
				passed = append(passed, p)
			}
		}
	}
	if n := len(passed); n > 0 {
		shown := passed[:min(n, 10)]
		more := ""
		if n > len(shown) {
			more = fmt.Sprintf(" and %d more", n-len(shown))
		}
		fmt.Fprintf(&b, "\n[not searched (too large, or a hard link): %s%s]", strings.Join(shown, ", "), more)
	}
	b.WriteString(unreadableText(r.Unreadable))
	return b.String()
}

// ExecuteRequest asks to run a shell command.
type ExecuteRequest struct {
	// Command is a shell command line.
	Command string
	// Timeout bounds the command; 0 means the backend's default.
	Timeout time.Duration
	// Stream, when non-nil, receives the command's output while it runs:
	// stdout and stderr as they come, interleaved, with secret values
	// redacted, one Write at a time. It is not capped (the backend's
	// output limit applies to ExecuteResult.Output, which is still filled
	// in), so a caller that forwards it somewhere bounded caps it itself.
	// It lets an agent framework show a long command's progress live.
	Stream io.Writer
}

// ExecuteResult is how a command ended.
type ExecuteResult struct {
	// Output is the command's stdout followed by its stderr (on a new
	// line), with secret values redacted.
	Output string
	// ExitCode is the exit code; -1 when a signal or timeout ended the command.
	ExitCode int
	// Signal names the signal that ended the command ("SIGKILL"), where
	// the sandbox's provider can tell; empty when it exited, timed out, or
	// the provider reports only the shell's exit code (128+N).
	Signal string
	// TimedOut reports that the timeout ended the command.
	TimedOut bool
	// Truncated reports that output was cut at the backend's limit.
	Truncated bool
	Error     *Error
}

// Text renders the result for the model.
func (r *ExecuteResult) Text() string {
	if r.Error != nil {
		return r.Error.Text()
	}
	var b strings.Builder
	b.WriteString(r.Output)
	note := func(s string) {
		if b.Len() > 0 && !strings.HasSuffix(b.String(), "\n") {
			b.WriteByte('\n')
		}
		b.WriteString(s)
	}
	switch {
	case r.TimedOut:
		note("[Command timed out]")
	case r.Signal != "":
		note("[Command killed by signal " + r.Signal + "]")
	case r.ExitCode != 0:
		note(fmt.Sprintf("[Command exited with code %d]", r.ExitCode))
	}
	if r.Truncated {
		note("[Output truncated]")
	}
	return b.String()
}

// File is a path with its content, an item of a batch or a checkpoint.
type File struct {
	Path string
	Data []byte
	// Binary marks a file written as bytes (GetFiles reports it; SetFiles
	// restores it).
	Binary bool
}

// UploadFilesRequest asks to write a batch of files as bytes.
type UploadFilesRequest struct {
	Files []File
}

// FileResult is the outcome of one item of a batch.
type FileResult struct {
	Path string
	// Data is the content, for DownloadFiles.
	Data []byte
	// Error is nil on success. Its Code is one of the four file operation
	// codes (CodeFileNotFound, CodePermissionDenied, CodeIsDirectory,
	// CodeInvalidPath), or CodeNotDirectory when a parent of an uploaded
	// path is a file, or CodeTooLarge for a download over the backend's limit.
	Error *Error
}

// UploadFilesResult has one result per requested file, in input order.
type UploadFilesResult struct {
	Results []FileResult
}

// DownloadFilesRequest asks to read a batch of files.
type DownloadFilesRequest struct {
	Paths []string
}

// DownloadFilesResult has one result per requested path, in input order.
type DownloadFilesResult struct {
	Results []FileResult
}

// GetFilesRequest asks for the whole workspace.
type GetFilesRequest struct{}

// GetFilesResult holds every regular file of the workspace, sorted by path.
// Symbolic links and the backend's metadata are not included.
type GetFilesResult struct {
	Files []File
	// Error is nil on success. It is set, with Files empty, when the
	// workspace as a whole cannot be read for a reason the agent caused:
	// CodeInvalidPath with Path "/" when the workspace directory was
	// replaced or removed since the backend pinned it.
	Error *Error
}

// SetFilesRequest asks to write a checkpoint back.
type SetFilesRequest struct {
	Files []File
}

// SetFilesResult has one result per file, in input order.
type SetFilesResult struct {
	Results []FileResult
}
