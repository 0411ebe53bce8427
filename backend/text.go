package backend

import (
	"fmt"
	"path"
	"strings"
	"unicode/utf8"
)

// IsText reports whether data reads as text: valid UTF-8 without control
// characters other than tab, newline, vertical tab, form feed and carriage
// return. Implementations use it to refuse text reads of binary content.
func IsText(data []byte) bool {
	for len(data) > 0 {
		r, n := utf8.DecodeRune(data)
		if r == utf8.RuneError && n <= 1 {
			return false
		}
		switch {
		case r == '\t', r == '\n', r == '\v', r == '\f', r == '\r':
		case r < 0x20, r == 0x7f, r >= 0x80 && r <= 0x9f:
			return false
		}
		data = data[n:]
	}
	return true
}

// splitLines splits content into lines; a final newline ends the last line
// rather than starting an empty one.
func splitLines(content string) []string {
	if content == "" {
		return nil
	}
	return strings.Split(strings.TrimSuffix(content, "\n"), "\n")
}

// NumberLines renders the lines of content from the 0-based line offset,
// at most limit of them (DefaultReadLimit when limit <= 0), in the Read
// format "%6d\t%s" joined by "\n". It also returns the number of lines in
// content. A window past the end yields "".
func NumberLines(content string, offset, limit int) (window string, total int) {
	lines := splitLines(content)
	offset = max(offset, 0)
	if limit <= 0 {
		limit = DefaultReadLimit
	}
	if offset >= len(lines) {
		return "", len(lines)
	}
	// Saturating: offset+limit may overflow for a limit near MaxInt.
	end := len(lines)
	if limit < end-offset {
		end = offset + limit
	}
	var b strings.Builder
	for i := offset; i < end; i++ {
		if i > offset {
			b.WriteByte('\n')
		}
		fmt.Fprintf(&b, "%6d\t%s", i+1, lines[i])
	}
	return b.String(), len(lines)
}

// CharWindow returns at most maxChars characters (code points) of content
// from the 0-based character offset (DefaultMaxChars when maxChars <= 0),
// and the number of characters in content. An empty content yields ""; an
// offset at or past the end of a non-empty content yields EndOfFile.
func CharWindow(content string, offset, maxChars int) (window string, total int) {
	total = utf8.RuneCountInString(content)
	if total == 0 {
		return "", 0
	}
	offset = max(offset, 0)
	if maxChars <= 0 {
		maxChars = DefaultMaxChars
	}
	if offset >= total {
		return EndOfFile, total
	}
	// Saturating: offset+maxChars may overflow for a maxChars near MaxInt.
	end := total
	if maxChars < total-offset {
		end = offset + maxChars
	}
	start, i := -1, 0
	for bi := range content {
		if i == offset {
			start = bi
		}
		if i == end {
			return content[start:bi], total
		}
		i++
	}
	return content[start:], total
}

// Replace replaces old with new in content for an Edit of the file at p.
// old must be non-empty and occur exactly once, or at least once when all
// is set; otherwise Replace returns an *Error (CodeNoMatch or
// CodeAmbiguousMatch) saying what to change.
func Replace(p, content, old, new string, all bool) (string, int, *Error) {
	if old == "" {
		return "", 0, Errorf(CodeNoMatch, p, "the string to replace in '%s' is empty; give the exact text to change", p)
	}
	n := strings.Count(content, old)
	switch {
	case n == 0:
		return "", 0, Errorf(CodeNoMatch, p, "the string to replace was not found in '%s'; read the file and copy the text exactly", p)
	case n > 1 && !all:
		return "", 0, Errorf(CodeAmbiguousMatch, p, "the string to replace occurs %d times in '%s'; add surrounding lines to make it unique, or set replace_all", n, p)
	}
	return strings.ReplaceAll(content, old, new), n, nil
}

// MatchGlob reports whether the workspace path p (relative, slash-separated)
// matches pattern. A pattern without a slash matches the base name at any
// depth ("*.go"), or the whole path. A pattern with a slash matches the whole
// path: "*", "?" and "[...]" match within one element as in path.Match, and
// an element "**" matches zero or more elements ("src/**/*.go"). Braces
// list alternatives ("*.{go,md}"). A leading "/" or "./" is ignored. A
// malformed pattern is an error matching path.ErrBadPattern.
func MatchGlob(pattern, p string) (bool, error) {
	alts, err := expandBraces(pattern)
	if err != nil {
		return false, err
	}
	for _, a := range alts {
		ok, err := matchOne(a, p)
		if err != nil || ok {
			return ok, err
		}
	}
	return false, nil
}

func matchOne(pattern, p string) (bool, error) {
	for {
		switch {
		case strings.HasPrefix(pattern, "/"):
			pattern = pattern[1:]
		case strings.HasPrefix(pattern, "./"):
			pattern = pattern[2:]
		default:
			goto done
		}
	}
done:
	if pattern == "" {
		return false, nil
	}
	if !strings.Contains(pattern, "/") {
		if ok, err := path.Match(pattern, path.Base(p)); err != nil || ok {
			return ok, err
		}
		if pattern == "**" {
			return true, nil
		}
		return path.Match(pattern, p)
	}
	return matchElems(strings.Split(pattern, "/"), strings.Split(p, "/"))
}

func matchElems(pat, elems []string) (bool, error) {
	for len(pat) > 0 {
		if pat[0] == "**" {
			for len(pat) > 1 && pat[1] == "**" {
				pat = pat[1:]
			}
			if len(pat) == 1 {
				return true, nil
			}
			for i := 0; i <= len(elems); i++ {
				ok, err := matchElems(pat[1:], elems[i:])
				if err != nil || ok {
					return ok, err
				}
			}
			return false, nil
		}
		if len(elems) == 0 {
			// Validate the rest of the pattern before answering.
			for _, q := range pat {
				if _, err := path.Match(q, ""); err != nil {
					return false, err
				}
			}
			return false, nil
		}
		ok, err := path.Match(pat[0], elems[0])
		if err != nil || !ok {
			return false, err
		}
		pat, elems = pat[1:], elems[1:]
	}
	return len(elems) == 0, nil
}

// expandBraces expands the first {a,b,...} group of pattern, recursively.
func expandBraces(pattern string) ([]string, error) {
	open := -1
	depth := 0
	for i := 0; i < len(pattern); i++ {
		switch pattern[i] {
		case '\\':
			i++
		case '{':
			if depth == 0 {
				open = i
			}
			depth++
		case '}':
			if depth == 0 {
				return nil, path.ErrBadPattern
			}
			depth--
			if depth > 0 {
				continue
			}
			var alts []string
			inner := pattern[open+1 : i]
			start, d := 0, 0
			for j := 0; j < len(inner); j++ {
				switch inner[j] {
				case '\\':
					j++
				case '{':
					d++
				case '}':
					d--
				case ',':
					if d == 0 {
						alts = append(alts, inner[start:j])
						start = j + 1
					}
				}
			}
			alts = append(alts, inner[start:])
			var out []string
			for _, a := range alts {
				rest, err := expandBraces(pattern[:open] + a + pattern[i+1:])
				if err != nil {
					return nil, err
				}
				out = append(out, rest...)
			}
			return out, nil
		}
	}
	if depth != 0 {
		return nil, path.ErrBadPattern
	}
	return []string{pattern}, nil
}
