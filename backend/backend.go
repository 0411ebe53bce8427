// Package backend defines the protocol behind an agent's file tools: ls,
// read, write, edit, glob, grep and execute, plus byte and character reads,
// batch upload and download, and the get/set of a whole workspace for
// checkpointing. Agent frameworks hand these tools to a language model;
// packages such as fsbackend implement them over a sandbox.
//
// # Requests and results
//
// Every operation takes a pointer to a request struct, so fields can be
// added without breaking callers or implementations, and returns a result
// struct and an error. The two kinds of failure are kept apart:
//
//   - A failure the agent can act on (a missing file, a path outside the
//     workspace, an ambiguous edit) is reported in the result's Error
//     field, an *Error with a Code. The model sees its text and tries
//     something else. The Go error is nil.
//   - A failure the agent cannot act on (the context ended, the sandbox is
//     gone, the transport failed twice) is the Go error, and the result is
//     nil. The caller decides whether to surface it.
//
// A non-zero exit code of an executed command is not a failure of either
// kind: it is ExecuteResult.ExitCode.
//
// # Paths
//
// Paths name files inside the workspace. They are slash-separated and
// relative to the workspace root; an absolute path is re-rooted under the
// workspace, never passed through; "" and "/" mean the root. An element
// ".." moves up and may not climb above the root; names merely containing
// dots, such as "report..final.md" or "[...slug]", are ordinary names.
// Paths in results are relative to the workspace root ("notes/a.md"), the
// form that also works as a relative path in an executed command, whose
// working directory is the workspace root.
//
// # Text the model sees
//
// Each result has a Text method that renders it for the model. These
// formats are stable: they change only with a new major version.
//
//   - Read: one line per file line, "%6d\t%s" (the 1-based line number
//     right-aligned in six columns, a tab, the line without its newline),
//     lines joined by "\n". A window past the end, or an empty file, is "".
//     A window cut at the backend's read size limit (ReadResult.Truncated)
//     ends with the line "[Output truncated at the read size limit: read
//     on with a later offset or fewer lines]".
//   - ReadChars: the characters themselves; a window starting at or past
//     the end of a non-empty file is "[End of file reached]".
//   - Ls and Glob: one entry per line, "path" for a file and "path/" for a
//     directory, sorted by path; nothing found is "No files found".
//   - Grep: one match per line, "path:line:text"; with context lines
//     (GrepRequest.Before, After), as grep -A/-B prints them: a context
//     line is "path-line-text", and a line "--" separates groups of lines
//     that are not adjacent; nothing found is
//     "No matches found"; a result cut at MaxCount ends with the line
//     "[results truncated at N matches]"; files passed over (GrepResult.Skipped)
//     add a line "[not searched (too large, or a hard link): a, b]", and
//     files and directories it could not read (GrepResult.Unreadable, also
//     GlobResult.Unreadable for Glob) a last line
//     "[could not be read (permission denied or an I/O error): d/, f]".
//   - Write: "Wrote N bytes to path"; Edit: "Replaced N occurrence(s) in path".
//   - Execute: the combined output, then "[Command exited with code N]" on
//     a line of its own when N is not 0, "[Command timed out]" when it
//     timed out, and "[Output truncated]" when output was cut.
//   - Any result with an Error: "Error: " followed by the error's message,
//     which names the path and says what to do differently.
package backend

import "context"

// Backend is the protocol an agent's file tools call. Implementations are
// safe for concurrent use. See the package documentation for the split
// between result errors (Result.Error) and Go errors.
type Backend interface {
	// Ls lists the entries of a directory (not recursive), sorted by path.
	Ls(ctx context.Context, req *LsRequest) (*LsResult, error)

	// Read returns a window of a text file's lines, numbered. A file that
	// was written as bytes, or whose content is not text, is refused with
	// CodeBinaryFile.
	Read(ctx context.Context, req *ReadRequest) (*ReadResult, error)

	// ReadBytes returns a file's content byte for byte, text or binary.
	ReadBytes(ctx context.Context, req *ReadBytesRequest) (*ReadBytesResult, error)

	// ReadChars returns a window of a text file's characters (Unicode code
	// points), for files with very long lines.
	ReadChars(ctx context.Context, req *ReadCharsRequest) (*ReadCharsResult, error)

	// Write creates or replaces a text file, creating missing parent
	// directories. It clears any binary mark the path had.
	Write(ctx context.Context, req *WriteRequest) (*WriteResult, error)

	// WriteBytes creates or replaces a file with raw bytes and marks it as
	// binary, so text reads and edits refuse it until a text Write replaces it.
	WriteBytes(ctx context.Context, req *WriteBytesRequest) (*WriteResult, error)

	// Edit replaces OldString with NewString in a text file. OldString must
	// occur exactly once unless ReplaceAll is set.
	Edit(ctx context.Context, req *EditRequest) (*EditResult, error)

	// Glob returns the files and directories under a directory whose paths
	// match a glob pattern, sorted by path.
	Glob(ctx context.Context, req *GlobRequest) (*GlobResult, error)

	// Grep searches text files for a literal string, or a regular
	// expression (RE2 syntax) when Regex is set, optionally ignoring case,
	// and returns the matching lines with the context lines asked for.
	Grep(ctx context.Context, req *GrepRequest) (*GrepResult, error)

	// Execute runs a shell command with the workspace root as its working
	// directory. Implementations that do not allow it return a result with
	// CodePermissionDenied.
	Execute(ctx context.Context, req *ExecuteRequest) (*ExecuteResult, error)

	// UploadFiles writes a batch of files as bytes and returns one result
	// per file, in input order; one failure does not stop the others.
	UploadFiles(ctx context.Context, req *UploadFilesRequest) (*UploadFilesResult, error)

	// DownloadFiles reads a batch of files as bytes and returns one result
	// per file, in input order.
	DownloadFiles(ctx context.Context, req *DownloadFilesRequest) (*DownloadFilesResult, error)

	// GetFiles returns every regular file of the workspace with its
	// content, for a checkpoint.
	GetFiles(ctx context.Context, req *GetFilesRequest) (*GetFilesResult, error)

	// SetFiles writes every file of a checkpoint back into the workspace,
	// restoring binary marks.
	SetFiles(ctx context.Context, req *SetFilesRequest) (*SetFilesResult, error)
}
