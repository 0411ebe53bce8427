package sandbox_test

import (
	"bufio"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCoreModuleHasNoFrameworkDependency keeps the agent frameworks, the
// Kubernetes client libraries and the OpenTelemetry SDK's exporters out of
// the core module's go.mod: a program that imports this module for one
// provider must not download a framework it does not use. Adapters and
// heavy providers are modules of their own (contrib/, provider/k8s).
func TestCoreModuleHasNoFrameworkDependency(t *testing.T) {
	t.Parallel()
	f, err := os.Open("go.mod")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	forbidden := []string{
		"github.com/cloudwego/eino",
		"github.com/anthropics/anthropic-sdk-go",
		"github.com/openai/openai-go",
		"github.com/firebase/genkit",
		"github.com/mark3labs/mcp-go",
		"k8s.io/",
		"sigs.k8s.io/",
		"go.opentelemetry.io/otel/exporters/",
	}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		fields := strings.Fields(strings.TrimPrefix(strings.TrimSpace(sc.Text()), "require "))
		if len(fields) == 0 {
			continue
		}
		for _, p := range forbidden {
			if strings.HasPrefix(fields[0], p) {
				t.Errorf("go.mod:%d requires %s: the core module must not depend on %s; put the code that needs it in a module of its own under contrib/", n, fields[0], p)
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
}

// TestEveryNestedModuleIsTested keeps the Makefile's MODULES list (which
// make test and .ci/run go through) equal to the go.mod files nested in
// the repository, so a new adapter cannot go untested in CI.
func TestEveryNestedModuleIsTested(t *testing.T) {
	t.Parallel()
	mk, err := os.ReadFile("Makefile")
	if err != nil {
		t.Fatal(err)
	}
	text := strings.ReplaceAll(string(mk), "\\\n", " ")
	listed := map[string]bool{}
	for _, line := range strings.Split(text, "\n") {
		if rest, ok := strings.CutPrefix(line, "MODULES := "); ok {
			for _, m := range strings.Fields(rest) {
				listed[m] = true
			}
		}
	}
	for _, pat := range []string{"contrib/*/go.mod", "provider/*/go.mod", "examples/*/go.mod"} {
		found, err := filepath.Glob(pat)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range found {
			m := filepath.ToSlash(filepath.Dir(f))
			if !listed[m] {
				t.Errorf("%s is a module of its own but not in the Makefile's MODULES: CI would not test it", m)
			}
			delete(listed, m)
		}
	}
	for m := range listed {
		t.Errorf("the Makefile's MODULES names %s, which has no go.mod", m)
	}
}
