package eino

import (
	"context"
	"sort"
	"strings"
	"sync"
)

// minSecretLine is the shortest line of a multi-line secret redacted on
// its own: the line tools (read numbers lines, grep returns single lines)
// never show such a secret whole.
const minSecretLine = 6

// newRedactor returns a function that replaces every value of secrets,
// and every line of at least minSecretLine bytes of a multi-line one, with
// "[REDACTED]", longest first so that a secret holding another is replaced
// whole.
func newRedactor(secrets map[string]string) func(string) string {
	vals := redactedValues(secrets)
	if len(vals) == 0 {
		return func(s string) string { return s }
	}
	pairs := make([]string, 0, 2*len(vals))
	for _, v := range vals {
		pairs = append(pairs, v, "[REDACTED]")
	}
	return strings.NewReplacer(pairs...).Replace
}

// redactedValues returns what newRedactor replaces, longest first.
func redactedValues(secrets map[string]string) []string {
	var vals []string
	for _, v := range secrets {
		if v == "" {
			continue
		}
		vals = append(vals, v)
		if strings.Contains(v, "\n") {
			for _, line := range strings.Split(v, "\n") {
				if line = strings.TrimSuffix(line, "\r"); len(line) >= minSecretLine {
					vals = append(vals, line)
				}
			}
		}
	}
	sort.Slice(vals, func(i, j int) bool { return len(vals[i]) > len(vals[j]) })
	return vals
}

// secretTail returns where in p a tail starts that is a proper prefix of
// one of vals (len(p) when none does): output cut there may continue a
// value in its next part, which the redaction must see whole.
func secretTail(p []byte, vals []string) int {
	longest := 0
	for _, v := range vals {
		longest = max(longest, len(v))
	}
	for i := max(0, len(p)-longest); i < len(p); i++ {
		for _, v := range vals {
			if len(p)-i < len(v) && strings.HasPrefix(v, string(p[i:])) {
				return i
			}
		}
	}
	return len(p)
}

// notes collects what a tool's result should say besides what eino's
// interface carries (more entries than shown, files grep passed over).
// NewMiddleware puts one in each call's context and appends the notes to
// the tool's result.
type notes struct {
	mu    sync.Mutex
	lines []string
}

type notesCtx struct{}

func withNotes(ctx context.Context) (context.Context, *notes) {
	n := &notes{}
	return context.WithValue(ctx, notesCtx{}, n), n
}

func addNote(ctx context.Context, line string) {
	if n, ok := ctx.Value(notesCtx{}).(*notes); ok {
		n.mu.Lock()
		n.lines = append(n.lines, line)
		n.mu.Unlock()
	}
}

func (n *notes) text() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return strings.Join(n.lines, "\n")
}
