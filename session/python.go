package session

import (
	"regexp"
	"strings"
)

var (
	futureRE    = regexp.MustCompile(`^from\s+__future__\s+import\b`)
	docstringRE = regexp.MustCompile(`^[rRuU]?("""|''')`)
	oneLineStr  = regexp.MustCompile(`^[rRuU]?("[^"\\]*(?:\\.[^"\\]*)*"|'[^'\\]*(?:\\.[^'\\]*)*')\s*(#.*)?$`)
)

// joinPrelude returns prelude followed by code, except that code's leading
// block (blank lines, comments, a module docstring and the
// "from __future__" imports) stays first: Python accepts future imports
// only at the top of a module.
func joinPrelude(code, prelude string) string {
	if prelude == "" {
		return code
	}
	if !strings.HasSuffix(prelude, "\n") {
		prelude += "\n"
	}
	head, rest := splitFuture(code)
	return head + prelude + rest
}

// splitFuture splits code after its leading future imports (and the
// comments, blank lines and module docstring around them). head is empty
// when code has no leading future import.
func splitFuture(code string) (head, rest string) {
	lines := strings.SplitAfter(code, "\n")
	sawFuture, docAllowed := false, true
	split := len(lines)
lines:
	for i := 0; i < len(lines); i++ {
		t := strings.TrimSpace(lines[i])
		switch {
		case t == "" || strings.HasPrefix(t, "#"):
			continue
		case docAllowed && docstringRE.MatchString(t):
			docAllowed = false
			q := docstringRE.FindStringSubmatch(t)[1]
			start := i
			body := t[strings.Index(t, q)+3:]
			for !strings.Contains(body, q) { // the docstring continues on later lines
				if i++; i >= len(lines) {
					return "", code // unterminated: leave the code alone
				}
				body = lines[i]
			}
			// Only a comment may follow the closing quotes: anything else
			// (`"""a""" + """` opens another string) makes the statement
			// code, and the prelude goes before it.
			if after := strings.TrimSpace(body[strings.Index(body, q)+3:]); after != "" && !strings.HasPrefix(after, "#") {
				split = start
				break lines
			}
			continue
		case docAllowed && oneLineStr.MatchString(t):
			docAllowed = false
			continue
		case futureRE.MatchString(t):
			docAllowed, sawFuture = false, true
			// A parenthesized or backslash-continued import spans lines.
			open := strings.Count(t, "(") > strings.Count(t, ")")
			for (open || strings.HasSuffix(t, `\`)) && i+1 < len(lines) {
				i++
				t = strings.TrimSpace(lines[i])
				if open && strings.Contains(t, ")") {
					open = false
				}
			}
			continue
		}
		split = i
		break
	}
	if !sawFuture {
		return "", code
	}
	head = strings.Join(lines[:split], "")
	if head != "" && !strings.HasSuffix(head, "\n") {
		head += "\n"
	}
	return head, strings.Join(lines[split:], "")
}
