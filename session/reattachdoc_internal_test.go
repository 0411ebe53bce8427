package session

import (
	"go/parser"
	"go/token"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/sandboxkit/sandbox"
)

// The package doc's Reattach section lists the codes a failed look-up,
// attach or wake is retried on; the list must be the one transient uses,
// or a user reasons from the wrong list about when Acquire creates.
func TestReattachDocListsTransientCodes(t *testing.T) {
	t.Parallel()
	f, err := parser.ParseFile(token.NewFileSet(), "session.go", nil, parser.ParseComments|parser.PackageClauseOnly)
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Join(strings.Fields(f.Doc.Text()), " ")
	m := regexp.MustCompile(`fails for a transient reason \(([^)]*)\)`).FindStringSubmatch(text)
	if m == nil {
		t.Fatal("the package doc no longer lists the transient codes after \"fails for a transient reason (\"")
	}
	documented := strings.Split(m[1], ", ")
	slices.Sort(documented)
	var retried []string
	for c := sandbox.OK + 1; c <= sandbox.Internal; c++ {
		if transient(sandbox.Errorf(c, "test")) {
			retried = append(retried, c.String())
		}
	}
	slices.Sort(retried)
	if !slices.Equal(documented, retried) {
		t.Errorf("the Reattach doc lists %v; transient retries %v", documented, retried)
	}
}
