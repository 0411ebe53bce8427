package openai

import (
	"fmt"
	"strings"
)

// The apply_patch tool sends V4A diffs: a file's content as lines each
// prefixed with "+" for create_file, and for update_file a sequence of
// hunks, each optionally introduced by "@@" header lines naming a nearby
// line of the file (a class or function signature), made of context lines
// (" " prefix), removed lines ("-") and added lines ("+"), with no line
// numbers: a hunk is located by its context and removed lines. A hunk
// followed by "*** End of File" must match at the end of the file.

const (
	v4aEndPatch  = "*** End Patch"
	v4aEndOfFile = "*** End of File"
	// maxShown bounds the lines of unmatched context quoted back to the
	// model in an error.
	maxShown = 8
)

// patchError is a diff the file cannot take: its message is written for
// the model, which sees it as the failed call's output.
type patchError struct{ msg string }

func (e *patchError) Error() string { return e.msg }

func patchErrorf(format string, args ...any) *patchError {
	return &patchError{msg: fmt.Sprintf(format, args...)}
}

// diffLines splits a diff into lines without their line endings, drops
// the empty line after a final newline, and leaves out the envelope a
// model sometimes copies from the multi-file patch format ("*** Begin
// Patch", "*** Update File: ...", "*** Add File: ...", "*** End Patch").
func diffLines(diff string) []string {
	lines := strings.Split(strings.ReplaceAll(diff, "\r\n", "\n"), "\n")
	if n := len(lines); n > 0 && lines[n-1] == "" {
		lines = lines[:n-1]
	}
	start := 0
	for start < len(lines) && (lines[start] == "*** Begin Patch" ||
		strings.HasPrefix(lines[start], "*** Update File: ") ||
		strings.HasPrefix(lines[start], "*** Add File: ")) {
		start++
	}
	lines = lines[start:]
	for i, l := range lines {
		if l == v4aEndPatch {
			return lines[:i]
		}
	}
	return lines
}

// createContent returns the content of a new file from a create_file
// diff: every line must start with "+", and each becomes one line of the
// file, ended by a newline (as a POSIX text file ends). An empty diff
// makes an empty file.
func createContent(diff string) (string, error) {
	lines := diffLines(diff)
	var b strings.Builder
	for i, l := range lines {
		if !strings.HasPrefix(l, "+") {
			return "", patchErrorf("line %d of the diff does not start with \"+\": every line of a create_file diff is a line of the new file prefixed with \"+\" (got %q)", i+1, shorten(l))
		}
		b.WriteString(l[1:])
		b.WriteByte('\n')
	}
	return b.String(), nil
}

// chunk is one run of removed and added lines, at a line index of the
// original file.
type chunk struct {
	at       int
	del, ins []string
}

// applyUpdate applies an update_file diff to text. Every hunk is located
// before anything changes, so a diff that does not fit returns an error
// and no partial result. Matching tries exact lines first, then lines
// without trailing whitespace, then without surrounding whitespace.
// Line endings are kept: a file with CRLF endings stays CRLF.
func applyUpdate(text, diff string) (string, error) {
	newline := "\n"
	if strings.Contains(text, "\r\n") {
		newline = "\r\n"
	}
	orig := strings.Split(strings.ReplaceAll(text, "\r\n", "\n"), "\n")
	lines := diffLines(diff)
	if len(lines) == 0 {
		return "", patchErrorf("the diff is empty: an update_file diff needs at least one hunk of context (\" \"), removed (\"-\") and added (\"+\") lines")
	}
	var chunks []chunk
	cursor := 0
	i := 0
	for i < len(lines) {
		// Headers: "@@" or "@@ anchor", possibly several.
		var anchors []string
		headed := false
		for i < len(lines) && strings.HasPrefix(lines[i], "@@") {
			headed = true
			if a := strings.TrimSpace(strings.TrimPrefix(lines[i], "@@")); a != "" {
				anchors = append(anchors, strings.TrimPrefix(lines[i], "@@ "))
			}
			i++
		}
		if !headed && len(chunks) > 0 {
			return "", patchErrorf("line %d of the diff: a new hunk must start with an \"@@\" line (got %q)", i+1, shorten(lines[i]))
		}
		for _, a := range anchors {
			cursor = advanceToAnchor(orig, cursor, a)
		}
		// The hunk's body.
		start := i
		var old []string // context and removed lines: what the file must hold
		var cur *chunk
		var hunk []chunk
		for i < len(lines) && !strings.HasPrefix(lines[i], "@@") && lines[i] != v4aEndOfFile {
			l := lines[i]
			if l == "" {
				l = " " // an empty context line whose space was trimmed
			}
			switch l[0] {
			case ' ':
				cur = nil
				old = append(old, l[1:])
			case '-':
				if cur == nil {
					hunk = append(hunk, chunk{at: len(old)})
					cur = &hunk[len(hunk)-1]
				}
				cur.del = append(cur.del, l[1:])
				old = append(old, l[1:])
			case '+':
				if cur == nil {
					hunk = append(hunk, chunk{at: len(old)})
					cur = &hunk[len(hunk)-1]
				}
				cur.ins = append(cur.ins, l[1:])
			default:
				if strings.HasPrefix(l, "***") {
					return "", patchErrorf("line %d of the diff: %q is not part of an update_file diff (one call changes one file)", i+1, shorten(l))
				}
				return "", patchErrorf("line %d of the diff must start with \" \" (context), \"-\" (remove) or \"+\" (add) (got %q)", i+1, shorten(l))
			}
			i++
		}
		eof := false
		if i < len(lines) && lines[i] == v4aEndOfFile {
			eof = true
			i++
		}
		if i == start || (len(old) == 0 && len(hunk) == 0) {
			return "", patchErrorf("line %d of the diff: the hunk has no lines", start+1)
		}
		at := findContext(orig, old, cursor, eof)
		if at < 0 {
			return "", contextError(old, cursor, eof)
		}
		for _, c := range hunk {
			c.at += at
			chunks = append(chunks, c)
		}
		cursor = at + len(old)
	}
	var out []string
	pos := 0
	for _, c := range chunks {
		if c.at < pos {
			return "", patchErrorf("two hunks of the diff change overlapping lines (near line %d of the file)", c.at+1)
		}
		out = append(out, orig[pos:c.at]...)
		out = append(out, c.ins...)
		pos = c.at + len(c.del)
	}
	out = append(out, orig[pos:]...)
	return strings.Join(out, newline), nil
}

// advanceToAnchor moves the cursor past the first line at or after it
// that equals the anchor (exactly, else ignoring surrounding
// whitespace). An anchor that is not found leaves the cursor: the
// hunk's context decides.
func advanceToAnchor(orig []string, cursor int, anchor string) int {
	for i := cursor; i < len(orig); i++ {
		if orig[i] == anchor {
			return i + 1
		}
	}
	t := strings.TrimSpace(anchor)
	for i := cursor; i < len(orig); i++ {
		if strings.TrimSpace(orig[i]) == t {
			return i + 1
		}
	}
	return cursor
}

// findContext returns the index of the first place at or after start
// where the file holds want, or -1. With eof the place must end the file
// (a last empty element, the newline that ends the file, may follow).
func findContext(orig, want []string, start int, eof bool) int {
	if len(want) == 0 {
		if eof {
			return len(orig)
		}
		return start
	}
	for _, norm := range []func(string) string{
		func(s string) string { return s },
		func(s string) string { return strings.TrimRight(s, " \t") },
		strings.TrimSpace,
	} {
		if eof {
			for _, end := range []int{len(orig), len(orig) - 1} {
				at := end - len(want)
				if at >= start && equalAt(orig, want, at, norm) {
					return at
				}
			}
			continue
		}
		for at := start; at+len(want) <= len(orig); at++ {
			if equalAt(orig, want, at, norm) {
				return at
			}
		}
	}
	return -1
}

func equalAt(orig, want []string, at int, norm func(string) string) bool {
	for k, w := range want {
		if norm(orig[at+k]) != norm(w) {
			return false
		}
	}
	return true
}

// contextError says which lines were not found, quoting a few of them.
func contextError(old []string, cursor int, eof bool) error {
	shown := old
	more := ""
	if len(shown) > maxShown {
		shown, more = shown[:maxShown], fmt.Sprintf("\n[... %d more lines]", len(old)-maxShown)
	}
	where := fmt.Sprintf("at or after line %d of the file", cursor+1)
	if eof {
		where = "at the end of the file (the hunk ends with \"*** End of File\")"
	}
	return patchErrorf("the diff's context and removed lines were not found %s; read the file again and resend the diff with lines that match it exactly. Lines not found:\n%s%s",
		where, shorten(strings.Join(shown, "\n")), more)
}

// shorten bounds text quoted back to the model.
func shorten(s string) string {
	const limit = 2000
	if len(s) <= limit {
		return s
	}
	cut := limit
	for cut > 0 && !isRuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}

func isRuneStart(b byte) bool { return b&0xC0 != 0x80 }
