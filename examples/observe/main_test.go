package main

import (
	"bytes"
	"encoding/json"
	"io"
	"strings"
	"testing"
)

// The program writes the spans of the calls it made, each naming its
// operation and provider, in the program's trace.
func TestRunWritesSpans(t *testing.T) {
	var out bytes.Buffer
	if err := run("memory://", &out); err != nil {
		t.Fatal(err)
	}
	type span struct {
		Name        string
		SpanContext struct{ TraceID string }
		Attributes  []struct {
			Key   string
			Value struct{ Value any }
		}
	}
	dec := json.NewDecoder(&out)
	traces := map[string]bool{}
	names := map[string]bool{}
	for {
		var s span
		if err := dec.Decode(&s); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("stdout exporter output: %v", err)
		}
		names[s.Name] = true
		traces[s.SpanContext.TraceID] = true
		if strings.HasPrefix(s.Name, "sandbox.") {
			found := false
			for _, a := range s.Attributes {
				if a.Key == "sandbox.provider" && a.Value.Value == "memory" {
					found = true
				}
			}
			if !found {
				t.Errorf("span %s: no sandbox.provider=memory in %+v", s.Name, s.Attributes)
			}
		}
	}
	for _, want := range []string{"job", "sandbox.create", "sandbox.exec", "sandbox.destroy"} {
		if !names[want] {
			t.Errorf("no span %q among %v", want, names)
		}
	}
	if len(traces) != 1 {
		t.Errorf("spans in %d traces, want 1 (the calls are the job's children)", len(traces))
	}
}
