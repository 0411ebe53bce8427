package backend

import (
	"fmt"
	"io/fs"
)

// Code classifies an error the agent can act on. The first four are the
// file operation errors of the deepagents protocol, which batch items
// (UploadFiles, DownloadFiles) carry in all but rare cases; the others are
// specific to a few operations. Codes are stable strings, safe to show a
// model.
type Code string

// The codes.
const (
	// CodeFileNotFound: the path does not exist.
	CodeFileNotFound Code = "file_not_found"
	// CodePermissionDenied: the sandbox refused access, or the operation is
	// not allowed by this backend (for example Execute when disabled).
	CodePermissionDenied Code = "permission_denied"
	// CodeIsDirectory: a file operation named a directory.
	CodeIsDirectory Code = "is_directory"
	// CodeInvalidPath: the path is malformed (empty element after cleaning,
	// control characters, a name too long), climbs above the workspace
	// root, leads outside it through a symbolic link, names the backend's
	// private metadata, or names what the file tools do not handle: a hard
	// link to a file with other names, a named pipe, socket or device, or
	// a workspace replaced since the backend pinned it.
	CodeInvalidPath Code = "invalid_path"

	// CodeNotDirectory: Ls named a file, or a parent of a written path is
	// a file.
	CodeNotDirectory Code = "not_directory"
	// CodeBinaryFile: a text read or edit named a file written as bytes or
	// whose content is not text. Use ReadBytes.
	CodeBinaryFile Code = "binary_file"
	// CodeNoMatch: Edit did not find OldString.
	CodeNoMatch Code = "no_match"
	// CodeAmbiguousMatch: Edit found OldString more than once without ReplaceAll.
	CodeAmbiguousMatch Code = "ambiguous_match"
	// CodeTooLarge: the file is larger than the backend reads in one call.
	CodeTooLarge Code = "too_large"
	// CodeInvalidArgument: an argument other than a path is out of range
	// or malformed (a negative offset or limit, a pattern over its length
	// limit); the message names the argument.
	CodeInvalidArgument Code = "invalid_argument"
)

// Error is a failure the agent can act on. It travels in a result's Error
// field, not as a Go error, but implements error so callers may return it.
type Error struct {
	// Code classifies the failure.
	Code Code
	// Path is the workspace path the error is about, as the caller gave it
	// after cleaning ("" when the error is not about a path).
	Path string
	// Message says what went wrong and what to do differently, in words
	// meant for the model. It names Path.
	Message string
}

// Error returns the message.
func (e *Error) Error() string { return e.Message }

// Is matches the io/fs sentinels: CodeFileNotFound is fs.ErrNotExist,
// CodePermissionDenied fs.ErrPermission, and CodeInvalidPath and
// CodeInvalidArgument fs.ErrInvalid.
func (e *Error) Is(target error) bool {
	switch target {
	case fs.ErrNotExist:
		return e.Code == CodeFileNotFound
	case fs.ErrPermission:
		return e.Code == CodePermissionDenied
	case fs.ErrInvalid:
		return e.Code == CodeInvalidPath || e.Code == CodeInvalidArgument
	}
	return false
}

// Text returns the error as the model sees it: "Error: " and the message.
func (e *Error) Text() string { return "Error: " + e.Message }

// Errorf returns an *Error with the given code and path and a message
// formatted from format and args.
func Errorf(code Code, path, format string, args ...any) *Error {
	return &Error{Code: code, Path: path, Message: fmt.Sprintf(format, args...)}
}

// NotFound returns the CodeFileNotFound error for path.
func NotFound(path string) *Error {
	return Errorf(CodeFileNotFound, path, "file '%s' not found", path)
}

// IsDirectory returns the CodeIsDirectory error for path.
func IsDirectory(path string) *Error {
	return Errorf(CodeIsDirectory, path, "'%s' is a directory, not a file", path)
}

// NotDirectory returns the CodeNotDirectory error for path.
func NotDirectory(path string) *Error {
	return Errorf(CodeNotDirectory, path, "'%s' is not a directory", path)
}

// PermissionDenied returns the CodePermissionDenied error for path.
func PermissionDenied(path string) *Error {
	return Errorf(CodePermissionDenied, path, "permission denied for '%s'", path)
}

// InvalidPath returns the CodeInvalidPath error for path, saying why.
func InvalidPath(path, why string) *Error {
	return Errorf(CodeInvalidPath, path, "invalid path '%s': %s", path, why)
}

// Binary returns the CodeBinaryFile error for path; verb is what was
// refused, such as "read as text" or "edited".
func Binary(path, verb string) *Error {
	return Errorf(CodeBinaryFile, path, "'%s' is a binary file and cannot be %s", path, verb)
}

// InvalidArgument returns the CodeInvalidArgument error for the argument
// named name (such as "offset"), saying why; path is the file the call was
// about, if any.
func InvalidArgument(path, name, why string) *Error {
	return Errorf(CodeInvalidArgument, path, "invalid %s: %s", name, why)
}
