package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sandboxkit/sandbox"
)

// osc52 writes to the user's clipboard, then clears the screen.
const osc52 = "\x1b]52;c;Y3VybCBldmlsLnNofHNo\x07\x1b[2J"

// top's table shows ids and states a provider chose: control characters
// in them are escaped, never written raw to the terminal.
func TestTopTableEscapesControlCharacters(t *testing.T) {
	t.Parallel()
	rows := []topRow{
		{info: sandbox.Info{ID: "sbx" + osc52, State: sandbox.StateRunning}, err: errors.New("x"), cpu: -1},
		{info: sandbox.Info{ID: "ok", State: sandbox.State("running\x1b[31m")}, cpu: -1},
		{info: sandbox.Info{ID: "run\tning" + osc52, State: sandbox.StateRunning}, m: sandbox.Metrics{CPUTime: -1, MemoryBytes: -1, MemoryPeakBytes: -1, MemoryLimitBytes: -1, DiskBytes: -1, Processes: -1}, cpu: -1},
	}
	var b bytes.Buffer
	if err := printTop(&b, rows); err != nil {
		t.Fatal(err)
	}
	if strings.ContainsAny(b.String(), "\x1b\x07") {
		t.Errorf("top table carries raw escapes: %q", b.String())
	}
	if !strings.Contains(b.String(), `sbx\x1b]52;c;`) || !strings.Contains(b.String(), `run\tning`) {
		t.Errorf("escaped ids not shown: %q", b.String())
	}
}

// ls's table escapes the ids, states and templates a provider reports.
func TestLsTableEscapesControlCharacters(t *testing.T) {
	t.Parallel()
	var b bytes.Buffer
	err := printInfos(&b, []sandbox.Info{
		{ID: "sbx" + osc52, State: sandbox.State("running\x1b[31m"), Template: "t\x9b2J"},
		{ID: "ok", State: sandbox.StateRunning, Labels: map[string]string{"k": "v"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if strings.ContainsAny(b.String(), "\x1b\x07\u009b") {
		t.Errorf("ls table carries raw escapes: %q", b.String())
	}
	if !strings.Contains(b.String(), `sbx\x1b]52;c;`) || !strings.Contains(b.String(), "k=v") {
		t.Errorf("ls table does not show the escaped id or the label: %q", b.String())
	}
}

func TestPrintable(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"sbx-1":       "sbx-1",
		"héllo wörld": "héllo wörld",
		`say "hi"`:    `say "hi"`,
		"a\x1b[2Jb":   `a\x1b[2Jb`,
		"a\tb\n":      `a\tb\n`,
		"x\u202ey":    `x\u202ey`,
	} {
		if got := printable(in); got != want {
			t.Errorf("printable(%q) = %q, want %q", in, got, want)
		}
	}
}

// One sample time JSON cannot encode must not fail top --json for every
// row, nor the MCP metrics tool's answer (both encode toMetricsJSON).
func TestMetricsJSONUnencodableTime(t *testing.T) {
	t.Parallel()
	good := sandbox.Metrics{Time: time.Now(), CPUTime: -1, CPUPercent: 1, MemoryBytes: 1, MemoryPeakBytes: -1, DiskBytes: 1, Processes: -1, CPULimit: 1, MemoryLimitBytes: 1, DiskLimitBytes: 1}
	bad := good
	bad.Time = time.Unix(1e12, 0)
	rows := []topRow{
		{info: sandbox.Info{ID: "a", State: sandbox.StateRunning}, m: good, cpu: 1},
		{info: sandbox.Info{ID: "b", State: sandbox.StateRunning}, m: bad, cpu: 1},
	}
	var out, errb bytes.Buffer
	a := newApp(nil, &out, &errb)
	if err := a.printJSON(topJSON(rows)); err != nil {
		t.Fatalf("top --json with one unencodable time: %v", err)
	}
	var got []metricsJSON
	if err := json.Unmarshal(out.Bytes(), &got); err != nil || len(got) != 2 || len(got[1].Notes) != 1 {
		t.Fatalf("top --json = %s (%v)", out.String(), err)
	}
	for _, ts := range []time.Time{time.Unix(1e12, 0), time.Unix(-1e12, 0)} {
		bad.Time = ts
		if _, err := json.Marshal(toMetricsJSON(bad, bad.CPUPercent)); err != nil {
			t.Errorf("metrics tool answer for time %v: %v", ts, err)
		}
	}
}
